"""P4Info generation with p4c's control-plane names and IDs.

A controller written against the P4Info that p4c emits for a program must work unchanged
against ours, so names, aliases and IDs follow p4c's P4Runtime serializer exactly:

- names are control-plane names (`@name` with a leading `.` stripped, else the
  declaration name prefixed by its enclosing control: `MyIngress.ipv4_lpm`);
- ids: `@id` first (the type prefix byte is OR'd in when its top byte is 0), then every
  other name of a type in bytewise-sorted order gets `(prefix << 24) | (jenkins & 0xFFFFFF)`,
  probing upward on a collision;
- aliases: the shortest dotted suffix that no other symbol (of any type) shares.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from p4target.errors import P4Error
from p4target.extern_registry import for_type

if TYPE_CHECKING:
    from finsy.proto import p4i

    from p4target.frontend import ir

# Entity-type prefix bytes (p4.config.v1.P4Ids).
ACTION = 0x01
TABLE = 0x02
VALUE_SET = 0x03
CONTROLLER_HEADER = 0x04
ACTION_PROFILE = 0x11
COUNTER = 0x12
DIRECT_COUNTER = 0x13
METER = 0x14
DIRECT_METER = 0x15
REGISTER = 0x16
DIGEST = 0x17

DEFAULT_TABLE_SIZE = 1024  # p4c's size for a table without a `size` property


def jenkins_hash(name: str) -> int:
    """Jenkins one-at-a-time hash of the name's UTF-8 bytes, as uint32 (p4c's id hash)."""
    h = 0
    for b in name.encode():
        h = (h + b) & 0xFFFFFFFF
        h = (h + (h << 10)) & 0xFFFFFFFF
        h ^= h >> 6
    h = (h + (h << 3)) & 0xFFFFFFFF
    h ^= h >> 11
    h = (h + (h << 15)) & 0xFFFFFFFF
    return h


@dataclass(frozen=True)
class Symbol:
    """One control-plane visible object before ids are assigned."""

    prefix: int
    name: str
    explicit_id: int | None = None  # from @id
    file: str | None = None
    line: int | None = None


def assign_ids(symbols: Iterable[Symbol]) -> dict[tuple[int, str], int]:
    """Map (prefix, name) -> id the way p4c's symbol table does.

    Explicit `@id`s are taken first (in declaration order, duplicates are errors); the
    rest are hashed per type in sorted name order so the result does not depend on
    declaration order.
    """
    ids: dict[tuple[int, str], int] = {}
    taken: set[int] = set()
    pending: dict[int, set[str]] = {}
    for sym in symbols:
        key = (sym.prefix, sym.name)
        if key in ids or sym.name in pending.get(sym.prefix, ()):
            continue  # the same object seen twice (p4c accepts duplicates silently)
        if sym.explicit_id is None:
            pending.setdefault(sym.prefix, set()).add(sym.name)
            continue
        top = sym.explicit_id >> 24
        if top not in (0, sym.prefix):
            raise P4Error(f"@id {sym.explicit_id:#x} of '{sym.name}' has the wrong 8-bit prefix",
                          sym.file, sym.line)
        value = sym.explicit_id | (sym.prefix << 24)
        if value in taken:
            raise P4Error(f"@id {sym.explicit_id} is assigned to multiple declarations", sym.file, sym.line)
        taken.add(value)
        ids[key] = value
    for prefix in sorted(pending):
        for name in sorted(pending[prefix], key=str.encode):
            h = jenkins_hash(name)
            while (prefix << 24) | (h & 0xFFFFFF) in taken:
                h += 1
            value = (prefix << 24) | (h & 0xFFFFFF)
            taken.add(value)
            ids[(prefix, name)] = value
    return ids


def compute_aliases(names: Iterable[str]) -> dict[str, str]:
    """Shortest unique dotted suffix of each name among all the names (p4c's aliases).

    A suffix is unique once no other name ends with the same components; a name that
    is itself a suffix of another keeps all its components.
    """
    unique = list(dict.fromkeys(names))
    counts: dict[tuple[str, ...], int] = {}
    for name in unique:
        parts = name.split(".")
        for k in range(1, len(parts) + 1):
            suffix = tuple(parts[-k:])
            counts[suffix] = counts.get(suffix, 0) + 1
    aliases = {}
    for name in unique:
        parts = name.split(".")
        k = 1
        while k < len(parts) and counts[tuple(parts[-k:])] >= 2:
            k += 1
        aliases[name] = ".".join(parts[-k:])
    return aliases


# ---------------------------------------------------------------------------
# Building the P4Info message from the IR

_MATCH_TYPES = {"exact": "EXACT", "lpm": "LPM", "ternary": "TERNARY", "range": "RANGE", "optional": "OPTIONAL"}
_SKIPPED_ANNOTATIONS = frozenset({"name", "id", "brief", "description"})
_TEXT_HEADER = "# proto-file: p4/config/v1/p4info.proto\n# proto-message: p4.config.v1.P4Info\n\n"


def build_p4info(program: ir.Program) -> p4i.P4Info:
    """The P4Info p4c would write for `program` (v1model); raises P4Error on bad @id."""
    return _P4InfoBuilder(program).build()


def p4info_text(info: p4i.P4Info) -> str:
    """Text format with p4c's two header comment lines."""
    from google.protobuf import text_format

    return _TEXT_HEADER + text_format.MessageToString(info)


def _annotation_text(a: ir.Annotation) -> str:
    """One annotation as p4c serializes it: `@name`, `@name(its body's tokens)`, or for one made up here
    `@name(arg, ...)` with strings quoted."""
    if a.body is not None:
        return f"@{a.name}({a.body})"
    if not a.args:
        return f"@{a.name}"
    parts = []
    for arg in a.args:
        if isinstance(arg, str):
            escaped = arg.replace("\\", "\\\\").replace('"', '\\"')
            parts.append(f'"{escaped}"')
        else:
            parts.append(str(arg))
    return f"@{a.name}(" + ", ".join(parts) + ")"


def _add_annotations(message, annotations: ir.Annotations) -> None:
    """Copy annotations (minus name/id/doc ones) and @brief/@description docs onto a message."""
    for a in annotations:
        if a.structured:
            _add_structured(message.structured_annotations.add(name=a.name), a.args)
        elif a.name not in _SKIPPED_ANNOTATIONS:
            message.annotations.append(_annotation_text(a))
    if "doc" not in message.DESCRIPTOR.fields_by_name:
        return
    brief, description = annotations.get_str("brief"), annotations.get_str("description")
    if brief is not None:
        message.doc.brief = brief
    if description is not None:
        message.doc.description = description


def _add_structured(msg, args: list) -> None:
    """`@name[...]`'s values as P4Info's expression list or key-value list (none when empty)."""
    def expression(target, value) -> None:
        if isinstance(value, bool):
            target.bool_value = value
        elif isinstance(value, int):
            target.int64_value = value
        else:
            target.string_value = value
    for arg in args:
        if isinstance(arg, tuple):
            pair = msg.kv_pair_list.kv_pairs.add(key=arg[0])
            expression(pair.value, arg[1])
        else:
            expression(msg.expression_list.expressions.add(), arg)


def _positional_ids(items: list, annotations_of) -> list[int]:
    """Ids of match fields/params/metadata as p4c allocates them: `@id` wins; the others take
    their 1-based position, moved up past ids already taken."""
    explicit = [annotations_of(x).get_int("id") for x in items]
    taken = {i for i in explicit if i is not None}
    out, position = [], 1
    for value in explicit:
        if value is None:
            while position in taken:
                position += 1
            value = position
            taken.add(value)
        else:
            position += 1
        out.append(value)
    return out


def _walk_exprs(node, seen: set[int]):
    """Every statement/expression node under `node` that can run, not following declarations.

    The branch an `if` with a constant condition never takes is left out, as p4c removes it.
    """
    from p4target.frontend import ir

    if isinstance(node, ir.If) and isinstance(node.cond, ir.BoolLiteral) and id(node) not in seen:
        seen.add(id(node))
        yield node
        yield from _walk_exprs(node.then if node.cond.value else node.else_, seen)
    elif isinstance(node, (list, tuple)):
        for item in node:
            yield from _walk_exprs(item, seen)
    elif isinstance(node, dict):
        for item in node.values():
            yield from _walk_exprs(item, seen)
    elif isinstance(node, (ir.Expr, ir.Stmt, ir.SwitchCase)) and id(node) not in seen:
        seen.add(id(node))
        yield node
        for name, value in vars(node).items():
            if name not in ("type", "loc", "decl", "action", "table", "labels"):
                yield from _walk_exprs(value, seen)
        if isinstance(node, ir.VarDeclStmt):  # a local's initializer is part of the code
            yield from _walk_exprs(node.decl.init, seen)


class _P4InfoBuilder:
    """Collects the control-plane symbols of a program, assigns ids, fills the message."""

    def __init__(self, program: ir.Program):
        from p4target.frontend import ir

        self.ir = ir
        self.program = program
        main = program.main
        if main is None:
            raise P4Error("program has no `main` V1Switch instance", program.source)
        stages = [main.verify_checksum, main.ingress, main.egress, main.compute_checksum, main.deparser]
        self.controls = list({id(c): c for c in stages}.values())
        self.tables = [t for c in self.controls for t in self._applied_tables(c)
                       if not t.annotations.has("hidden")]
        # a global action used by several controls appears once (p4c deduplicates its copies)
        actions: dict[str, ir.Action] = {}
        self.parameterless: set[int] = set()  # id() of actions only called directly: p4c binds their params
        for control in self.controls:
            for action in self._control_actions(control):
                actions.setdefault(action.control_plane_name, action)
        self.actions = list(actions.values())
        self.instances = [d for c in self.controls for d in c.locals if isinstance(d, ir.ExternInstance)]
        self.profiles = self._action_profiles()
        self.bodies = [c.body for c in self.controls] + [a.body for a in self._reachable_actions()]
        self.digest_types = self._digest_types()
        self.value_sets = program.value_sets()
        self.controller_headers = [t for t in program.types.values()
                                   if isinstance(t, ir.HeaderType) and t.annotations.has("controller_header")]

    # -- which objects exist

    def _needs_implicit_noaction(self, table: ir.Table) -> bool:
        """p4c gives a table without `default_action` a `@defaultonly NoAction` ref."""
        return table.default_action is None and all(r.action.name != "NoAction" or r.action.control
                                                    for r in table.actions)

    def _applied_tables(self, control: ir.Control) -> list[ir.Table]:
        """Tables the control applies, in declaration order (p4c removes the others)."""
        applied = {id(node.table) for node in _walk_exprs(control.body, set())
                   if isinstance(node, (self.ir.TableApply, self.ir.TableHitMiss, self.ir.ActionRun))}
        return [t for t in control.tables.values() if id(t) in applied]

    def _control_actions(self, control: ir.Control) -> list[ir.Action]:
        """Actions of a control as p4c's front end leaves them: used global actions first
        (p4c localizes them into the control), then the control's own used actions in
        declaration order. p4c removes unused actions and inlines those only called from
        other actions; an action the control body calls directly stays, its directionless
        parameters bound to the call's arguments (so it has none in P4Info) unless a table
        uses it too."""
        in_tables: list = []
        for table in self._applied_tables(control):
            refs = [r.action for r in table.actions] + [e.action.action for e in table.entries]
            if table.default_action is not None:
                refs.append(table.default_action.action)
            elif self._needs_implicit_noaction(table) and "NoAction" in self.program.actions:
                refs.append(self.program.actions["NoAction"])
            in_tables += [a for a in refs if all(a is not u for u in in_tables)]
        called = [node.action for node in _walk_exprs(control.body, set()) if isinstance(node, self.ir.ActionCall)]
        used = in_tables + [a for a in called if all(a is not u for u in in_tables)]
        self.parameterless.update(id(a) for a in called if all(a is not u for u in in_tables))
        own = [a for a in control.actions.values() if any(a is u for u in used)]
        globals_ = [a for a in dict.fromkeys(used) if a.control is None]
        return [a for a in globals_ + own if not a.annotations.has("hidden")]

    def _reachable_actions(self) -> list[ir.Action]:
        """Every action the pipeline can run: tables' and direct calls', and those they call."""
        found: dict[int, ir.Action] = {}
        pending = list(self.actions) + [node.action for c in self.controls for node in _walk_exprs(c.body, set())
                                        if isinstance(node, self.ir.ActionCall)]
        while pending:
            action = pending.pop()
            if id(action) not in found:
                found[id(action)] = action
                pending += [node.action for node in _walk_exprs(action.body, set())
                            if isinstance(node, self.ir.ActionCall)]
        return list(found.values())

    def _action_profiles(self) -> list[ir.ExternInstance]:
        """Action profiles and selectors: those the controls declare, then those tables build inline."""
        found = {id(i): i for i in self.instances if i.extern in _PROFILE_EXTERNS}
        for table in self.tables:
            if table.implementation is not None:
                found.setdefault(id(table.implementation), table.implementation)
        return list(found.values())

    def _digest_types(self) -> list:
        """Struct types passed to `digest<T>(receiver, data)`, in order of appearance."""
        found: dict[str, object] = {}
        for node in _walk_exprs(self.bodies, set()):
            if isinstance(node, self.ir.ExternFunctionCall) and node.name == "digest":
                data_type = node.type_args[0] if node.type_args else node.args[1].type
                if not isinstance(data_type, self.ir.StructType):
                    raise P4Error(f"digest data must be a struct, not {data_type}",
                                  node.loc.file, node.loc.line, node.loc.col)
                found.setdefault(data_type.name, data_type)
        return list(found.values())

    # -- ids and aliases

    def _symbols(self) -> list[Symbol]:
        def sym(prefix: int, name: str, node) -> Symbol:
            return Symbol(prefix, name, node.annotations.get_int("id"), node.loc.file, node.loc.line)

        out = [sym(ACTION, a.control_plane_name, a) for a in self.actions]
        out += [sym(TABLE, t.control_plane_name, t) for t in self.tables]
        for inst in self.instances:
            prefix = _extern_prefix(inst.extern)
            if prefix is not None:
                out.append(sym(prefix, inst.control_plane_name, inst))
        out += [sym(ACTION_PROFILE, p.control_plane_name, p) for p in self.profiles  # those built inline
                if all(p is not i for i in self.instances)]
        out += [sym(DIGEST, t.name, t) for t in self.digest_types]
        out += [sym(VALUE_SET, v.control_plane_name, v) for v in self.value_sets]
        out += [sym(CONTROLLER_HEADER, _type_control_plane_name(t), t) for t in self.controller_headers]
        return out

    # -- the message

    def build(self):
        from finsy.proto import p4i

        symbols = self._symbols()
        self.ids = assign_ids(symbols)
        self.aliases = compute_aliases(s.name for s in symbols)
        info = p4i.P4Info()
        info.pkg_info.arch = "v1model"
        for table in self.tables:
            self._add_table(info, info.tables.add(), table)
        for action in self.actions:
            self._add_action(info, info.actions.add(), action)
        for profile in self.profiles:
            self._add_action_profile(info.action_profiles.add(), profile)
        for inst in self.instances:
            self._add_instance(info, inst)
        for header in self.controller_headers:
            self._add_controller_header(info, info.controller_packet_metadata.add(), header)
        for struct in self.digest_types:
            digest = info.digests.add()
            self._preamble(digest.preamble, DIGEST, struct.name, struct)
            self.type_spec(digest.type_spec, struct, info)
        for vs in self.value_sets:
            self._add_value_set(info.value_sets.add(size=vs.size), vs)
        if self._has_type_info(info):
            info.type_info.SetInParent()
        return info

    def _add_value_set(self, msg, vs: ir.ValueSet) -> None:
        """One match field per select key, named after a struct's fields; a field's `@match(kind)` is
        written as p4c writes it, though the set matches exactly (as on BMv2)."""
        from finsy.proto import p4i

        self._preamble(msg.preamble, VALUE_SET, vs.control_plane_name, vs)
        for i, f in enumerate(vs.fields, start=1):
            mf = msg.match.add(id=i, name=f.name, bitwidth=self.ir.width_of(f.type))
            kind = f.annotations.get_str("match") or "exact"
            mf.match_type = p4i.MatchField.MatchType.Value(_MATCH_TYPES.get(kind, "EXACT"))

    def _has_type_info(self, info) -> bool:
        """Whether p4c writes `type_info` (even empty): it does once it has described a table's keys,
        an action parameter, a controller header field, an extern instance or an extern function call."""
        return bool(info.tables or any(a.params for a in info.actions)
                    or any(h.metadata for h in info.controller_packet_metadata) or self.instances
                    or any(isinstance(node, self.ir.ExternFunctionCall) for node in _walk_exprs(self.bodies, set())))

    def _preamble(self, preamble, prefix: int, name: str, node) -> None:
        preamble.id = self.ids[(prefix, name)]
        preamble.name = name
        preamble.alias = self.aliases[name]
        _add_annotations(preamble, node.annotations)

    def _add_table(self, info, msg, table: ir.Table) -> None:
        from finsy.proto import p4i

        self._preamble(msg.preamble, TABLE, table.control_plane_name, table)
        for key, fid in zip(table.keys, _positional_ids(table.keys, lambda k: k.annotations)):
            if key.match_kind == "selector":  # feeds the action selector's hash, not the control plane
                continue
            mf = msg.match_fields.add(id=fid, name=key.name)
            if isinstance(key.expr.type, self.ir.ErrorType):  # p4c describes an error as a string
                info.type_info.error.members[:] = self.program.errors
            else:
                mf.bitwidth = key.width
                self._describe(key.expr.type, info)
            _add_annotations(mf, key.annotations)
            if key.match_kind in _MATCH_TYPES:
                mf.match_type = p4i.MatchField.MatchType.Value(_MATCH_TYPES[key.match_kind])
            else:
                mf.other_match_type = key.match_kind
        for ref in table.actions:
            self._add_action_ref(msg, ref.action, ref.annotations)
        if self._needs_implicit_noaction(table):
            noaction = self.program.actions["NoAction"]
            self._add_action_ref(msg, noaction, self.ir.Annotations([self.ir.Annotation("defaultonly")]))
        if table.default_action is not None and table.default_action_const:
            msg.const_default_action_id = self._action_id(table.default_action.action)
        self._initial_default_action(msg.initial_default_action, table)
        if table.implementation is not None:
            msg.implementation_id = self.ids[(ACTION_PROFILE, table.implementation.control_plane_name)]
        for inst in (table.direct_counter, table.direct_meter):
            if inst is not None:
                msg.direct_resource_ids.append(self.ids[(_extern_prefix(inst.extern), inst.control_plane_name)])
        msg.size = table.size if table.size is not None else DEFAULT_TABLE_SIZE
        if table.entries_const:
            msg.is_const_table = True
        if table.entries:
            msg.has_initial_entries = True
        if self.ir.supports_timeout(table):
            msg.idle_timeout_behavior = p4i.Table.IdleTimeoutBehavior.NOTIFY_CONTROL

    def _initial_default_action(self, msg, table: ir.Table) -> None:
        """The program's default action with its arguments as full-width byte strings (as p4c writes them)."""
        binding = table.default_action
        if binding is None:
            msg.action_id = self._action_id(self.program.actions["NoAction"])
            return
        msg.action_id = self._action_id(binding.action)
        data = binding.action.data_params
        args = binding.args[len(binding.args) - len(data):]  # directional arguments come first
        for param, pid, arg in zip(data, _positional_ids(data, lambda p: p.annotations), args):
            width = self.ir.width_of(param.type)
            value = self.ir.constant_value(arg) & ((1 << width) - 1)
            msg.arguments.add(param_id=pid, value=value.to_bytes((width + 7) // 8, "big"))

    def _add_action_profile(self, msg, profile: ir.ExternInstance) -> None:
        msg.preamble.id = self.ids[(ACTION_PROFILE, profile.control_plane_name)]
        msg.preamble.name = profile.control_plane_name
        msg.preamble.alias = self.aliases[profile.control_plane_name]
        kept = [a for a in profile.annotations if a.name not in _PROFILE_ANNOTATIONS]
        _add_annotations(msg.preamble, self.ir.Annotations(kept))
        msg.table_ids.extend(self.ids[(TABLE, t.control_plane_name)] for t in self.tables if t.implementation is profile)
        msg.size = profile.size or 0
        if profile.extern != "action_selector":
            return
        msg.with_selector = True
        msg.max_group_size = profile.annotations.get_int("max_group_size") or 0
        semantics = profile.annotations.get_str("selector_size_semantics")
        if semantics == "sum_of_weights":
            msg.sum_of_weights.SetInParent()
        elif semantics == "sum_of_members":
            msg.sum_of_members.SetInParent()
            weight = profile.annotations.get_int("max_member_weight")
            if weight:
                msg.sum_of_members.max_member_weight = weight
        elif semantics is not None:
            raise P4Error(f"@selector_size_semantics must be \"sum_of_weights\" or \"sum_of_members\", not {semantics!r}",
                          profile.loc.file, profile.loc.line, profile.loc.col)

    def _action_id(self, action: ir.Action) -> int:
        return self.ids[(ACTION, action.control_plane_name)]

    def _add_action_ref(self, table_msg, action: ir.Action, annotations: ir.Annotations) -> None:
        from finsy.proto import p4i

        ref = table_msg.action_refs.add(id=self._action_id(action))
        _add_annotations(ref, annotations)
        if annotations.has("tableonly") and annotations.has("defaultonly"):
            raise P4Error(f"action reference {action.name} is both @tableonly and @defaultonly",
                          action.loc.file, action.loc.line)
        if annotations.has("tableonly"):
            ref.scope = p4i.ActionRef.Scope.TABLE_ONLY
        elif annotations.has("defaultonly"):
            ref.scope = p4i.ActionRef.Scope.DEFAULT_ONLY

    def _add_action(self, info, msg, action: ir.Action) -> None:
        self._preamble(msg.preamble, ACTION, action.control_plane_name, action)
        params = [] if id(action) in self.parameterless else action.data_params
        for param, pid in zip(params, _positional_ids(params, lambda p: p.annotations)):
            p = msg.params.add(id=pid, name=param.name, bitwidth=self.ir.width_of(param.type))
            self._describe(param.type, info)
            _add_annotations(p, param.annotations)

    def _add_instance(self, info, inst: ir.ExternInstance) -> None:
        """The instance's entry, as its extern's module (p4target.externs) writes it; none for what v1model's
        P4Info does not show (e.g. Checksum16; action profiles come with their tables)."""
        ext = for_type(inst.extern)
        if ext is None or ext.p4info_prefix is None:
            return
        msg = ext.p4info(self, info, inst)
        if msg is not None:
            self._preamble(msg.preamble, ext.p4info_prefix, inst.control_plane_name, inst)

    def direct_table_id(self, inst: ir.ExternInstance) -> int:
        for table in self.tables:
            if inst is table.direct_counter or inst is table.direct_meter:
                return self.ids[(TABLE, table.control_plane_name)]
        raise P4Error(f"{inst.extern} {inst.name} is not attached to any table",
                      inst.loc.file, inst.loc.line, inst.loc.col)

    def _add_controller_header(self, info, msg, header: ir.HeaderType) -> None:
        name = header.annotations.get_str("controller_header")
        msg.preamble.id = self.ids[(CONTROLLER_HEADER, _type_control_plane_name(header))]
        msg.preamble.name = name
        msg.preamble.alias = name
        _add_annotations(msg.preamble, header.annotations)
        fields = [f for f in header.fields if not f.annotations.has("hidden")]
        for field_, fid in zip(fields, _positional_ids(fields, lambda f: f.annotations)):
            md = msg.metadata.add(id=fid, name=field_.name, bitwidth=self.ir.width_of(field_.type))
            self._describe(field_.type, info)
            _add_annotations(md, field_.annotations)

    def type_spec(self, spec, t, info) -> None:
        """p4.config.v1.P4DataTypeSpec for `t`; named structs/headers go into type_info."""
        ir = self.ir
        if isinstance(t, ir.BitsType):
            spec.bitstring.bit.bitwidth = t.width
        elif isinstance(t, ir.IntType):
            spec.bitstring.int.bitwidth = t.width
        elif isinstance(t, ir.BoolType):
            spec.bool.SetInParent()
        elif isinstance(t, ir.EnumType) and t.underlying is not None:
            spec.serializable_enum.name = t.name
            self._describe(t, info)
        elif isinstance(t, ir.EnumType):
            spec.enum.name = t.name
            if t.name not in info.type_info.enums:
                entry = info.type_info.enums[t.name]
                for member in t.members:
                    entry.members.add(name=member)
        elif isinstance(t, ir.ErrorType):
            spec.error.SetInParent()
            info.type_info.error.members[:] = self.program.errors
        elif isinstance(t, (ir.StructType, ir.HeaderType)):
            is_struct = isinstance(t, ir.StructType)
            (spec.struct if is_struct else spec.header).name = t.name
            table = info.type_info.structs if is_struct else info.type_info.headers
            if t.name not in table:
                entry = table[t.name]
                for f in t.fields:
                    member = entry.members.add(name=f.name)
                    if is_struct:
                        self.type_spec(member.type_spec, f.type, info)
                    else:
                        self._bitstring(member.type_spec, f.type)
        else:
            raise P4Error(f"type {t} cannot be described in P4Info", self.program.source)

    def _describe(self, t, info) -> None:
        """Add to type_info what p4c adds when it describes a value of type `t`: a serializable
        enum's underlying width and members (values as full-width byte strings)."""
        if not (isinstance(t, self.ir.EnumType) and t.underlying is not None) or t.name in info.type_info.serializable_enums:
            return
        entry = info.type_info.serializable_enums[t.name]
        width = self.ir.width_of(t.underlying)
        entry.underlying_type.bitwidth = width
        for member in t.members:
            value = t.values[member] & ((1 << width) - 1)
            entry.members.add(name=member, value=value.to_bytes((width + 7) // 8, "big"))

    def _bitstring(self, spec, t) -> None:
        if isinstance(t, self.ir.IntType):
            spec.int.bitwidth = t.width
        else:
            spec.bit.bitwidth = self.ir.width_of(t)


_PROFILE_EXTERNS = ("action_profile", "action_selector")


def _extern_prefix(extern: str) -> int | None:
    """The id prefix of an extern type's instances (its module's `p4info_prefix`); None: not in P4Info."""
    ext = for_type(extern)
    return ext.p4info_prefix if ext is not None else None


_PROFILE_ANNOTATIONS = frozenset({"max_group_size", "selector_size_semantics", "max_member_weight"})


def _type_control_plane_name(t) -> str:
    name = t.annotations.get_str("name")
    if name is None:
        return t.name
    return name[1:] if name.startswith(".") else name


# ---------------------------------------------------------------------------
# Name <-> id lookups over a P4Info message

_ENTITY_KINDS = ("tables", "actions", "counters", "direct_counters", "meters", "direct_meters",
                 "registers", "digests", "controller_packet_metadata", "value_sets", "action_profiles")


class UnknownEntity(KeyError):
    """A name or id that the P4Info does not have; `str()` is the plain message."""

    exit_code = 2

    def __str__(self) -> str:
        return str(self.args[0])


class P4InfoIndex:
    """Find P4Info entities by fully qualified name, alias or id (one dict lookup each).

    `index.table("ipv4_lpm")`, `index.action(28792405)`,
    `index.match_field("MyIngress.ipv4_lpm", "hdr.ipv4.dstAddr")`, `index.param(action, "port")`.
    Both the controller (by name) and the P4Runtime server (by id, per update) look up here;
    iterate a kind through `index.p4info.tables` etc.
    """

    def __init__(self, info: p4i.P4Info):
        self.p4info = info
        self._entities: dict[tuple[str, str | int], object] = {}
        self._names: dict[int, str] = {}
        for kind in _ENTITY_KINDS:
            entities = getattr(info, kind)
            for entity in entities:
                pre = entity.preamble
                self._entities.setdefault((kind, pre.id), entity)
                self._entities.setdefault((kind, pre.name), entity)
                self._names[pre.id] = pre.name
            for entity in entities:  # after all names, so an alias never hides another entity's name
                self._entities.setdefault((kind, entity.preamble.alias), entity)
        self._direct_counters = {c.direct_table_id: c for c in info.direct_counters}
        self._direct_meters = {m.direct_table_id: m for m in info.direct_meters}
        # Per table and per action, what the server looks up for every update, made when first asked for (a
        # Write batch would otherwise build the same dicts for each of its updates).
        self._fields: dict[int, tuple[dict[int, p4i.MatchField], list[str]]] = {}
        self._scopes: dict[int, dict[int, int]] = {}
        self._params: dict[int, dict[int, p4i.Action.Param]] = {}

    def find(self, kind: str, key: str | int):
        """The entity of `kind` (a P4Info list name such as "tables") with that name, alias or id; None if absent."""
        return self._entities.get((kind, key))

    def entity(self, kind: str, key: str | int):
        """Like `find`, but an absent entity raises UnknownEntity."""
        found = self.find(kind, key)
        if found is None:
            raise UnknownEntity(f"P4Info has no {kind[:-1].replace('_', ' ')} {key!r}")
        return found

    def table(self, key: str | int) -> p4i.Table:
        return self.entity("tables", key)

    def action(self, key: str | int) -> p4i.Action:
        return self.entity("actions", key)

    def counter(self, key: str | int) -> p4i.Counter:
        return self.entity("counters", key)

    def direct_counter(self, key: str | int) -> p4i.DirectCounter:
        return self.entity("direct_counters", key)

    def meter(self, key: str | int) -> p4i.Meter:
        return self.entity("meters", key)

    def register(self, key: str | int) -> p4i.Register:
        return self.entity("registers", key)

    def digest(self, key: str | int) -> p4i.Digest:
        return self.entity("digests", key)

    def controller_metadata(self, key: str | int) -> p4i.ControllerPacketMetadata:
        """"packet_in" / "packet_out" header description."""
        return self.entity("controller_packet_metadata", key)

    def direct_counter_of(self, table: str | int) -> p4i.DirectCounter | None:
        """The direct counter attached to `table`, None when it has none."""
        return self._direct_counters.get(self.table(table).preamble.id)

    def direct_meter_of(self, table: str | int) -> p4i.DirectMeter | None:
        """The direct meter attached to `table`, None when it has none."""
        return self._direct_meters.get(self.table(table).preamble.id)

    def name(self, entity_id: int) -> str:
        """Fully qualified name of any entity id."""
        try:
            return self._names[entity_id]
        except KeyError:
            raise UnknownEntity(f"P4Info has no entity with id {entity_id}") from None

    def match_field(self, table: str | int, key: str | int) -> p4i.MatchField:
        t = self.table(table)
        for mf in t.match_fields:
            if key in (mf.id, mf.name):
                return mf
        raise UnknownEntity(f"table {t.preamble.name} has no match field {key!r}")

    def fields_by_id(self, table: p4i.Table) -> tuple[dict[int, p4i.MatchField], list[str]]:
        """A table's match fields by id, and the names of its exact ones."""
        shape = self._fields.get(table.preamble.id)
        if shape is None:
            from finsy.proto import p4i

            shape = self._fields[table.preamble.id] = (
                {f.id: f for f in table.match_fields},
                [f.name for f in table.match_fields if f.match_type == p4i.MatchField.EXACT])
        return shape

    def action_scopes(self, table: p4i.Table) -> dict[int, int]:
        """The scope of each of a table's actions, by action id."""
        scopes = self._scopes.get(table.preamble.id)
        if scopes is None:
            scopes = self._scopes[table.preamble.id] = {ref.id: ref.scope for ref in table.action_refs}
        return scopes

    def params_by_id(self, action: p4i.Action) -> dict[int, p4i.Action.Param]:
        """An action's parameters by id."""
        params = self._params.get(action.preamble.id)
        if params is None:
            params = self._params[action.preamble.id] = {p.id: p for p in action.params}
        return params

    def param(self, action: str | int, key: str | int) -> p4i.Action.Param:
        a = self.action(action)
        for p in a.params:
            if key in (p.id, p.name):
                return p
        raise UnknownEntity(f"action {a.preamble.name} has no parameter {key!r}")
