"""p4c's BMv2 JSON (`p4c --target bmv2 --arch v1model`) read into the lowered form.

Everything is checked while it is read: a malformed or inconsistent file is one P4Error
naming the file and the JSON path of the culprit (`basic.json: error: pipelines[0].tables[2]
.key[0].target: unknown header 'ipv5'`), never a KeyError later in an engine. So is what p4c
never writes and would hold a packet forever (simple_switch 1.15 spins on it): a loop among a
pipeline's nodes. A jump in an action may go back (p4c writes for loops in actions so): where
simple_switch spins on a loop that never ends, both engines drop the packet after
MAX_BACKWARD_JUMPS jumps back in one run of the action. A parser may loop (header
stacks): as on BMv2 the loop ends when the packet or the stack runs out (PacketTooShort,
StackOutOfBounds); one that consumes nothing, which simple_switch spins on forever, ends on
both engines after MAX_PARSER_STATES states with error.ParserTimeout.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from p4target.errors import P4Error
from p4target.lowered import model as m

SUPPORTED_MAJOR_VERSION = 2
T = TypeVar("T")


def looks_like_bmv2_json(data: bytes | str) -> bool:
    """True when `data` starts like a JSON object (P4 source never starts with `{`)."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    return text.lstrip()[:1] == "{"


def load_file(path: str) -> m.Program:
    """Read p4c's BMv2 JSON from `path` (P4Error when unreadable or malformed)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise P4Error(f"cannot read {path}: {exc.strerror}") from None
    return loads(text, path)


def loads(text: str | bytes, source: str = "<json>") -> m.Program:
    """Parse p4c's BMv2 JSON text into a Program."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        col = getattr(exc, "colno", None)
        raise P4Error(f"not valid JSON: {getattr(exc, 'msg', exc)}", source, line, col) from None
    return _Reader(source).program(doc)


class _Json:
    """Walks the document keeping the JSON path of what it reads, for error messages; reads the type-value objects
    and expressions p4c writes everywhere in it."""

    def __init__(self, source: str):
        self.source = source
        self.path: list[str] = []
        self.headers: dict[str, m.Header] = {}
        self.types: dict[str, m.HeaderType] = {}

    # -- helpers

    def fail(self, message: str) -> P4Error:
        where = "".join(self.path).lstrip(".")
        return P4Error(f"{where}: {message}" if where else message, self.source)

    def at(self, step: str, fn: Callable[[], T]) -> T:
        self.path.append(step)
        try:
            return fn()
        finally:
            self.path.pop()

    def key(self, obj: Any, name: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        if not isinstance(obj, dict):
            raise self.fail(f"expected an object, found {type(obj).__name__}")
        if name not in obj or obj[name] is None:
            if default is not ...:
                return default
            raise self.fail(f"missing '{name}'")
        value = obj[name]
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise self.at(f".{name}", lambda: self.fail(f"expected {_kind_name(kind)}, found {type(value).__name__}"))
        return value

    def each(self, obj: Any, name: str, fn: Callable[[Any], T]) -> list[T]:
        """`fn` of every item of the list `obj[name]` (absent: none)."""
        return self.over(self.key(obj, name, list, []), f".{name}", fn)

    def over(self, items: list, where: str, fn: Callable[[Any], T]) -> list[T]:
        out: list[T] = []
        for i, item in enumerate(items):
            self.path.append(f"{where}[{i}]")
            try:
                out.append(fn(item))
            finally:
                self.path.pop()
        return out

    def hexint(self, text: Any) -> int:
        if isinstance(text, bool) or not isinstance(text, (str, int)):
            raise self.fail(f"expected a hex string, found {type(text).__name__}")
        if isinstance(text, int):
            return text
        try:
            return int(text, 16)
        except ValueError:
            raise self.fail(f"not a hex string: {text!r}") from None

    def field_ref(self, value: Any) -> m.Field:
        if not (isinstance(value, list) and len(value) == 2 and all(isinstance(x, str) for x in value)):
            raise self.fail("a field reference must be [header, field]")
        header, name = value
        inst = self.headers.get(header)
        if inst is None:
            raise self.fail(f"unknown header '{header}'")
        if name != "$valid$" and self.types[inst.header_type].field(name) is None:
            raise self.fail(f"header '{header}' has no field '{name}'")
        return m.Field(header, name)

    # -- values

    def value(self, obj: Any) -> m.Value:
        """A type-value object (or a bare expression node, as p4c nests them)."""
        if isinstance(obj, dict) and "op" in obj and "type" not in obj:
            return self.expression(obj)
        kind = self.key(obj, "type", str)
        raw = obj.get("value")
        return self.at(f"<{kind}>", lambda: self._typed(kind, raw, obj))

    def _typed(self, kind: str, raw: Any, obj: dict) -> m.Value:
        if kind == "field":
            return self.field_ref(raw)
        if kind == "hexstr":
            width = obj.get("bitwidth")
            return m.Const(self.hexint(raw), width if isinstance(width, int) else None)
        if kind == "bool":
            if not isinstance(raw, bool):
                raise self.fail("a bool value must be true or false")
            return m.BoolConst(raw)
        if kind in ("header", "regular"):
            return m.HeaderRef(self._name(raw, self.headers, "header"))
        if kind in ("header_stack", "stack"):
            return m.StackRef(self._str(raw))
        if kind == "header_union":
            return m.UnionRef(self._str(raw))
        if kind == "header_union_stack":
            return m.UnionStackRef(self._str(raw))
        if kind == "union_stack":
            if not (isinstance(raw, list) and len(raw) == 2):
                raise self.fail("a union_stack extract target must be [stack, member]")
            return m.UnionStackField(self._str(raw[0]), self._str(raw[1]), "")
        if kind in ("runtime_data", "local"):
            if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0:
                raise self.fail("an action data index must be a non-negative integer")
            return m.ActionParam(raw)
        if kind in ("calculation", "register_array", "counter_array", "meter_array", "extern"):
            return m.Named(kind, self._str(raw))
        if kind == "string":
            return m.String(self._str(raw))
        if kind == "lookahead":
            if not (isinstance(raw, list) and len(raw) == 2 and all(isinstance(x, int) for x in raw)):
                raise self.fail("lookahead must be [offset, width]")
            return m.Lookahead(raw[0], raw[1])
        if kind == "register":
            if not (isinstance(raw, list) and len(raw) == 2):
                raise self.fail("register must be [name, index expression]")
            return m.RegisterCell(self._str(raw[0]), self.at(".index", lambda: self.value(raw[1])))
        if kind == "stack_field":
            if not (isinstance(raw, list) and len(raw) == 2):
                raise self.fail("stack_field must be [stack, field]")
            return m.StackField(self._str(raw[0]), self._str(raw[1]))
        if kind == "union_stack_field":
            if not (isinstance(raw, list) and len(raw) == 3):
                raise self.fail("union_stack_field must be [stack, member, field]")
            return m.UnionStackField(self._str(raw[0]), self._str(raw[1]), self._str(raw[2]))
        if kind == "payload":
            return m.Payload()
        if kind == "parameters_vector":
            if not isinstance(raw, list):
                raise self.fail("parameters_vector must be a list")
            return m.ValueList(tuple(self.over(raw, "", self.value)))
        if kind == "expression":
            return self.value(raw)
        raise self.fail(f"unknown value type '{kind}'")

    def expression(self, obj: dict) -> m.Expr:
        op = self.key(obj, "op", str)
        if op not in m.BINARY_OPS and op not in m.UNARY_OPS:
            raise self.fail(f"unknown expression operator '{op}'")
        if op in ("access_field", "access_union_header"):
            offset = obj.get("right")
            if not isinstance(offset, int):
                raise self.fail(f"'{op}' needs an integer offset")
            header = self.at(".left", lambda: self.value(obj.get("left")))
            return m.Expr(op, header, m.Const(offset))

        def operand(name: str) -> m.Value | None:
            raw = obj.get(name)
            return None if raw is None else self.at(f".{name}", lambda: self.value(raw))

        left, right, cond = operand("left"), operand("right"), operand("cond")
        if right is None or (op in m.BINARY_OPS and op != "-" and left is None) or (op == "?" and cond is None):
            raise self.fail(f"operator '{op}' is missing an operand")
        return m.Expr(op, left, right, cond)

    def _str(self, raw: Any) -> str:
        if not isinstance(raw, str):
            raise self.fail(f"expected a name, found {type(raw).__name__}")
        return raw

    def _name(self, raw: Any, known: dict, what: str) -> str:
        name = self._str(raw)
        if name not in known:
            raise self.fail(f"unknown {what} '{name}'")
        return name



class _Reader(_Json):
    """The document's sections, each into its part of the lowered form."""

    def program(self, doc: Any) -> m.Program:
        if not isinstance(doc, dict):
            raise self.fail("the top level must be a JSON object (p4c's BMv2 JSON)")
        meta = doc.get("__meta__")
        version = meta.get("version") if isinstance(meta, dict) else None
        if not (isinstance(version, list) and version and version[0] == SUPPORTED_MAJOR_VERSION):
            raise self.fail(f"__meta__.version: expected BMv2 JSON format {SUPPORTED_MAJOR_VERSION}.x, found {version}")
        p = m.Program(self.source)
        p.header_types = self.each(doc, "header_types", self.header_type)
        self.types = _unique(self, p.header_types, "header_types")
        p.headers = self.each(doc, "headers", self.header)
        self.headers = _unique(self, p.headers, "headers")
        by_id = {h.id: h for h in p.headers}
        p.header_stacks = self.each(doc, "header_stacks", lambda o: self.header_stack(o, by_id))
        p.header_union_types = self.each(doc, "header_union_types", self.union_type)
        self.union_types = _unique(self, p.header_union_types, "header_union_types")
        p.header_unions = self.each(doc, "header_unions", lambda o: self.header_union(o, by_id))
        p.header_union_stacks = self.each(doc, "header_union_stacks", self.union_stack)
        p.errors = self.each(doc, "errors", self.named_number)
        p.enums = {e[0]: dict(e[1]) for e in self.each(doc, "enums", self.enum)}
        p.field_lists = self.each(doc, "field_lists", self.field_list)
        p.learn_lists = self.each(doc, "learn_lists", self.learn_list)
        p.parse_vsets = self.each(doc, "parse_vsets", self.parse_vset)
        p.parsers = self.each(doc, "parsers", self.parser)
        p.deparsers = self.each(doc, "deparsers", self.deparser)
        p.meter_arrays = self.each(doc, "meter_arrays", self.meter_array)
        p.counter_arrays = self.each(doc, "counter_arrays", self.counter_array)
        p.register_arrays = self.each(doc, "register_arrays", self.register_array)
        p.calculations = self.each(doc, "calculations", self.calculation)
        p.actions = self.each(doc, "actions", self.action)
        p.pipelines = self.each(doc, "pipelines", self.pipeline)
        p.checksums = self.each(doc, "checksums", self.checksum)
        p.extern_instances = self.each(doc, "extern_instances", self.extern_instance)
        p.field_aliases = dict(self.each(doc, "field_aliases", self.field_alias))
        _check_references(self, p)
        _check_control_flow(self, p)
        return p

    def header_type(self, o: Any) -> m.HeaderType:
        fields = self.each(o, "fields", self.field_type)
        return m.HeaderType(self.key(o, "name", str), self.key(o, "id", int), fields,
                            self.key(o, "max_length", int, None))

    def field_type(self, f: Any) -> m.FieldType:
        if not (isinstance(f, list) and len(f) in (2, 3) and isinstance(f[0], str)):
            raise self.fail("a field must be [name, width] or [name, width, signed]")
        if f[1] == "*":
            return m.FieldType(f[0], None)
        if not isinstance(f[1], int) or isinstance(f[1], bool) or f[1] < 0:
            raise self.fail(f"field '{f[0]}': width must be a non-negative integer or \"*\"")
        return m.FieldType(f[0], f[1], bool(f[2]) if len(f) == 3 else False)

    def header(self, o: Any) -> m.Header:
        type_name = self._name(self.key(o, "header_type", str), self.types, "header type")
        return m.Header(self.key(o, "name", str), self.key(o, "id", int), type_name, self.key(o, "metadata", bool))

    def header_stack(self, o: Any, by_id: dict[int, m.Header]) -> m.HeaderStack:
        ids = self.key(o, "header_ids", list)
        if any(i not in by_id for i in ids):
            raise self.fail("header_ids names a header id that does not exist")
        return m.HeaderStack(self.key(o, "name", str), self.key(o, "id", int),
                             self._name(self.key(o, "header_type", str), self.types, "header type"), ids)

    def union_type(self, o: Any) -> m.HeaderUnionType:
        members = self.key(o, "headers", list)
        return m.HeaderUnionType(self.key(o, "name", str), self.key(o, "id", int),
                                 [(self._str(a), self._str(b)) for a, b in members])

    def header_union(self, o: Any, by_id: dict[int, m.Header]) -> m.HeaderUnion:
        ids = self.key(o, "header_ids", list)
        if any(i not in by_id for i in ids):
            raise self.fail("header_ids names a header id that does not exist")
        return m.HeaderUnion(self.key(o, "name", str), self.key(o, "id", int), self._union_type(o), ids)

    def union_stack(self, o: Any) -> m.HeaderUnionStack:
        return m.HeaderUnionStack(self.key(o, "name", str), self.key(o, "id", int), self._union_type(o),
                                  self.key(o, "header_union_ids", list))

    def _union_type(self, o: Any) -> str:
        """A union's `union_type`, which must name an entry of header_union_types (p4c 1.2.5 leaves that list
        empty for unions declared in a control)."""
        return self._name(self.key(o, "union_type", str), self.union_types, "header union type")

    def named_number(self, o: Any) -> tuple[str, int]:
        if not (isinstance(o, list) and len(o) == 2 and isinstance(o[0], str) and isinstance(o[1], int)):
            raise self.fail("expected [name, number]")
        return o[0], o[1]

    def enum(self, o: Any) -> tuple[str, list[tuple[str, int]]]:
        return self.key(o, "name", str), self.each(o, "entries", self.named_number)

    def field_list(self, o: Any) -> m.FieldList:
        def element(e: Any) -> m.Field:
            value = self.value(e)
            if not isinstance(value, m.Field):
                raise self.fail("a field list element must be a field")
            return value
        return m.FieldList(self.key(o, "id", int), self.key(o, "name", str), self.each(o, "elements", element))

    def learn_list(self, o: Any) -> m.LearnList:
        fields = self.field_list(o)
        return m.LearnList(fields.id, fields.name, fields.elements)

    def parse_vset(self, o: Any) -> m.ParseVset:
        return m.ParseVset(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "compressed_bitwidth", int),
                           self.key(o, "max_size", int, 0))

    def parser(self, o: Any) -> m.Parser:
        return m.Parser(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "init_state", str),
                        self.each(o, "parse_states", self.parse_state))

    def parse_state(self, o: Any) -> m.ParseState:
        return m.ParseState(self.key(o, "name", str), self.key(o, "id", int),
                            self.each(o, "parser_ops", self.parser_op),
                            self.each(o, "transition_key", self.value),
                            self.each(o, "transitions", self.transition))

    def parser_op(self, o: Any) -> m.ParserOp:
        op = self.key(o, "op", str)
        if op not in ("extract", "extract_VL", "set", "verify", "shift", "advance", "primitive"):
            raise self.fail(f"unknown parser operation '{op}'")
        if op == "primitive":
            params = self.key(o, "parameters", list)
            if len(params) != 1:
                raise self.fail("a primitive parser operation takes exactly one primitive")
            prim = self.at(".parameters[0]", lambda: self.primitive(params[0]))
            return m.ParserOp(op, [m.Named("primitive", prim.op)] + prim.parameters)
        return m.ParserOp(op, self.each(o, "parameters", self.value))

    def transition(self, o: Any) -> m.Transition:
        kind = self.key(o, "type", str, "hexstr")
        nxt = self.key(o, "next_state", str, None)
        if kind == "default":
            return m.Transition(kind, None, None, nxt)
        mask = o.get("mask")
        mask_v = None if mask is None else self.at(".mask", lambda: self.hexint(mask))
        if kind == "parse_vset":
            return m.Transition(kind, None, mask_v, nxt, self.key(o, "value", str))
        if kind != "hexstr":
            raise self.fail(f"unknown transition type '{kind}'")
        return m.Transition(kind, self.at(".value", lambda: self.hexint(o.get("value"))), mask_v, nxt)

    def deparser(self, o: Any) -> m.Deparser:
        order = self.over(self.key(o, "order", list), ".order", lambda h: self._name(h, self.headers, "header"))
        return m.Deparser(self.key(o, "name", str), self.key(o, "id", int), order,
                          self.each(o, "primitives", self.primitive))

    def meter_array(self, o: Any) -> m.MeterArray:
        target = o.get("result_target")
        result = None if target is None else self.at(".result_target", lambda: self.field_ref(target))
        kind = self.key(o, "type", str)
        if kind not in ("bytes", "packets"):
            raise self.fail(f"type: a meter counts bytes or packets, not '{kind}'")
        return m.MeterArray(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "size", int, 0), kind,
                            self.key(o, "rate_count", int, 2), self.key(o, "is_direct", bool),
                            self.key(o, "binding", str, None), result)

    def counter_array(self, o: Any) -> m.CounterArray:
        return m.CounterArray(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "size", int, 0),
                              self.key(o, "is_direct", bool), self.key(o, "binding", str, None))

    def register_array(self, o: Any) -> m.RegisterArray:
        return m.RegisterArray(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "size", int),
                               self.key(o, "bitwidth", int))

    def calculation(self, o: Any) -> m.Calculation:
        return m.Calculation(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "algo", str),
                             self.each(o, "input", self.value))

    def primitive(self, o: Any) -> m.Primitive:
        info = self.key(o, "source_info", dict, {})
        source = ":".join(str(info[k]) for k in ("filename", "line", "column") if k in info)
        return m.Primitive(self.key(o, "op", str), self.each(o, "parameters", self.value), source)

    def action(self, o: Any) -> m.Action:
        def param(r: Any) -> tuple[str, int]:
            return self.key(r, "name", str), self.key(r, "bitwidth", int)
        return m.Action(self.key(o, "name", str), self.key(o, "id", int), self.each(o, "runtime_data", param),
                        self.each(o, "primitives", self.primitive))

    def pipeline(self, o: Any) -> m.Pipeline:
        return m.Pipeline(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "init_table", str, None),
                          self.each(o, "tables", self.table), self.each(o, "conditionals", self.conditional),
                          self.each(o, "action_profiles", self.action_profile))

    def table(self, o: Any) -> m.Table:
        default = o.get("default_entry")
        return m.Table(
            name=self.key(o, "name", str), id=self.key(o, "id", int), match_type=self.key(o, "match_type", str),
            type=self.key(o, "type", str, "simple"), max_size=self.key(o, "max_size", int, 1024),
            with_counters=self.key(o, "with_counters", bool, False),
            support_timeout=self.key(o, "support_timeout", bool, False),
            key=self.each(o, "key", self.key_element), action_ids=self.key(o, "action_ids", list, []),
            actions=self.key(o, "actions", list, []),
            next_tables={str(k): v for k, v in self.key(o, "next_tables", dict, {}).items()},
            base_default_next=self.key(o, "base_default_next", str, None),
            default_entry=None if default is None else self.at(".default_entry", lambda: self.default_entry(default)),
            entries=self.each(o, "entries", self.table_entry),
            action_profile=self.key(o, "action_profile", str, None),
            direct_meters=self.key(o, "direct_meters", str, None))

    def key_element(self, o: Any) -> m.KeyElement:
        kind = self.key(o, "match_type", str)
        raw = o.get("target")
        target: m.Field | m.HeaderRef
        if kind == "valid":
            target = m.HeaderRef(self.at(".target", lambda: self._name(raw, self.headers, "header")))
        else:
            target = self.at(".target", lambda: self.field_ref(raw))
        mask = o.get("mask")
        name = self.key(o, "name", str, None) or (f"{target.header}.{target.field}" if isinstance(target, m.Field)
                                                  else target.name)
        return m.KeyElement(kind, target, None if mask is None else self.at(".mask", lambda: self.hexint(mask)), name)

    def action_data(self, o: Any) -> list[int]:
        return self.each(o, "action_data", self.hexint)

    def default_entry(self, o: Any) -> m.DefaultEntry:
        return m.DefaultEntry(self.key(o, "action_id", int), self.key(o, "action_const", bool, False),
                              self.action_data(o), self.key(o, "action_entry_const", bool, False))

    def table_entry(self, o: Any) -> m.TableEntry:
        action = self.key(o, "action_entry", dict)
        entry = self.at(".action_entry", lambda: m.ActionEntry(self.key(action, "action_id", int),
                                                                self.action_data(action)))
        return m.TableEntry(self.each(o, "match_key", self.match_value), entry, self.key(o, "priority", int, 0))

    def match_value(self, o: Any) -> m.MatchValue:
        kind = self.key(o, "match_type", str)

        def hx(name: str) -> int | None:
            return None if o.get(name) is None else self.at(f".{name}", lambda: self.hexint(o[name]))
        if kind == "valid":
            return m.MatchValue(kind, key=self.key(o, "key", bool))
        return m.MatchValue(kind, key=hx("key"), mask=hx("mask"), prefix_length=self.key(o, "prefix_length", int, None),
                            start=hx("start"), end=hx("end"))

    def conditional(self, o: Any) -> m.Conditional:
        return m.Conditional(self.key(o, "name", str), self.key(o, "id", int),
                             self.at(".expression", lambda: self.value(self.key(o, "expression", dict))),
                             self.key(o, "true_next", str, None), self.key(o, "false_next", str, None))

    def action_profile(self, o: Any) -> m.ActionProfile:
        sel = o.get("selector")
        selector = None if sel is None else self.at(".selector", lambda: m.Selector(
            self.key(sel, "algo", str), self.each(sel, "input", self.value)))
        return m.ActionProfile(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "max_size", int, 0),
                               selector)

    def checksum(self, o: Any) -> m.Checksum:
        cond = o.get("if_cond")
        return m.Checksum(self.key(o, "name", str), self.key(o, "id", int),
                          self.at(".target", lambda: self.field_ref(o.get("target"))), self.key(o, "type", str, "generic"),
                          self.key(o, "calculation", str), self.key(o, "verify", bool, True),
                          self.key(o, "update", bool, True),
                          None if cond is None else self.at(".if_cond", lambda: self.value(cond)))

    def extern_instance(self, o: Any) -> m.ExternInstance:
        attrs = dict(self.each(o, "attribute_values", lambda a: (self.key(a, "name", str), self.value(a))))
        return m.ExternInstance(self.key(o, "name", str), self.key(o, "id", int), self.key(o, "type", str), attrs)

    def field_alias(self, o: Any) -> tuple[str, m.Field]:
        if not (isinstance(o, list) and len(o) == 2 and isinstance(o[0], str)):
            raise self.fail("a field alias must be [name, [header, field]]")
        return o[0], self.field_ref(o[1])


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "an integer", bool: "true or false", list: "a list", dict: "an object"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _unique(r: _Reader, items: list, what: str) -> dict:
    out: dict = {}
    for item in items:
        if item.name in out:
            raise r.fail(f"{what}: '{item.name}' is defined twice")
        out[item.name] = item
    return out


def _check_references(r: _Reader, p: m.Program) -> None:
    """Names that point across sections (actions of tables, next nodes, calculations) exist."""
    action_ids = {a.id for a in p.actions}
    calcs = {c.name for c in p.calculations}
    for i, pl in enumerate(p.pipelines):
        nodes = {t.name for t in pl.tables} | {c.name for c in pl.conditionals}
        if pl.init_table is not None and pl.init_table not in nodes:
            raise r.fail(f"pipelines[{i}].init_table: unknown node '{pl.init_table}'")
        for j, t in enumerate(pl.tables):
            where = f"pipelines[{i}].tables[{j}]"
            if any(a not in action_ids for a in t.action_ids):
                raise r.fail(f"{where}.action_ids: names an action id that does not exist")
            for nxt in [*t.next_tables.values(), t.base_default_next]:
                if nxt is not None and nxt not in nodes:
                    raise r.fail(f"{where}.next_tables: unknown node '{nxt}'")
            if t.default_entry is not None and t.default_entry.action_id not in action_ids:
                raise r.fail(f"{where}.default_entry.action_id: no action has id {t.default_entry.action_id}")
        for j, c in enumerate(pl.conditionals):
            for nxt in (c.true_next, c.false_next):
                if nxt is not None and nxt not in nodes:
                    raise r.fail(f"pipelines[{i}].conditionals[{j}]: unknown node '{nxt}'")
    for i, csum in enumerate(p.checksums):
        if csum.calculation not in calcs:
            raise r.fail(f"checksums[{i}].calculation: unknown calculation '{csum.calculation}'")
    for i, ps in enumerate(p.parsers):
        states = {s.name for s in ps.parse_states}
        if ps.init_state not in states:
            raise r.fail(f"parsers[{i}].init_state: unknown state '{ps.init_state}'")
        for j, s in enumerate(ps.parse_states):
            for tr in s.transitions:
                if tr.next_state is not None and tr.next_state not in states:
                    raise r.fail(f"parsers[{i}].parse_states[{j}]: unknown next state '{tr.next_state}'")


def _check_control_flow(r: _Reader, p: m.Program) -> None:
    """Refuse what would hold a packet forever and p4c never writes: a cycle among a pipeline's nodes (reachable or
    not). An action's jumps must name a constant place in it (its end included); one going back is a loop (p4c
    writes them for a for loop in an action), which the engines end after MAX_BACKWARD_JUMPS."""
    for i, pl in enumerate(p.pipelines):
        after: dict[str, list[str]] = {t.name: [n for n in [*t.next_tables.values(), t.base_default_next] if n]
                                       for t in pl.tables}
        after.update({c.name: [n for n in (c.true_next, c.false_next) if n] for c in pl.conditionals})
        looping = _node_on_a_cycle(after)
        if looping is not None:
            raise r.fail(f"pipelines[{i}]: node '{looping}' leads back to itself (a packet would never leave the "
                         "pipeline; p4c writes no loop)")
    for i, a in enumerate(p.actions):
        for j, prim in enumerate(a.primitives):
            if prim.op not in ("_jump", "_jump_if_zero"):
                continue
            arity = 1 if prim.op == "_jump" else 2
            target = prim.parameters[-1] if len(prim.parameters) == arity else None
            if not (isinstance(target, m.Const) and 0 <= target.value <= len(a.primitives)):
                raise r.fail(f"actions[{i}].primitives[{j}]: {prim.op} takes {arity} parameter(s), the last a constant "
                             f"index into the action, 0 to {len(a.primitives)}")


def _node_on_a_cycle(after: dict[str, list[str]]) -> str | None:
    """A node of the graph `after` (node -> next nodes) that lies on a cycle; None when it has none. Iterative depth
    first search: a client's JSON may chain many thousands of nodes."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in after:
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(after[root]))]
        while stack:
            node, nexts = stack[-1]
            nxt = next(nexts, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return nxt
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(after.get(nxt, []))))
    return None
