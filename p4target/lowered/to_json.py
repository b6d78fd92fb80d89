"""The lowered form written as BMv2 JSON: what `simple_switch` runs (`aggnet p4 compile --bmv2-json`).

The inverse of `bmv2_json`: every section is written with the keys p4c writes, so our front
end's lowering of a program can run on BMv2 itself and be compared with p4c's.
"""
from __future__ import annotations

import json
from typing import Any

from p4target.lowered import model as m

FORMAT_VERSION = [2, 23]


def _hex(value: int) -> str:
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"


def value(v: m.Value | None) -> Any:
    """A type-value object."""
    if v is None:
        return None
    if isinstance(v, m.Field):
        return {"type": "field", "value": [v.header, v.field]}
    if isinstance(v, m.Const):
        if v.width is None:
            return {"type": "hexstr", "value": _hex(v.value)}
        # a calculation input: simple_switch takes as many bytes as the hex string has digits for, not `bitwidth`
        return {"type": "hexstr", "value": "0x" + v.value.to_bytes((v.width + 7) // 8, "big").hex(), "bitwidth": v.width}
    if isinstance(v, m.BoolConst):
        return {"type": "bool", "value": v.value}
    if isinstance(v, m.HeaderRef):
        return {"type": "header", "value": v.name}
    if isinstance(v, m.StackRef):
        return {"type": "header_stack", "value": v.name}
    if isinstance(v, m.UnionRef):
        return {"type": "header_union", "value": v.name}
    if isinstance(v, m.UnionStackRef):
        return {"type": "header_union_stack", "value": v.name}
    if isinstance(v, m.ActionParam):
        return {"type": "runtime_data", "value": v.index}
    if isinstance(v, m.Named):
        return {"type": v.kind, "value": v.name}
    if isinstance(v, m.String):
        return {"type": "string", "value": v.value}
    if isinstance(v, m.Lookahead):
        return {"type": "lookahead", "value": [v.offset, v.width]}
    if isinstance(v, m.RegisterCell):
        return {"type": "register", "value": [v.name, value(v.index)]}
    if isinstance(v, m.StackField):
        return {"type": "stack_field", "value": [v.stack, v.field]}
    if isinstance(v, m.UnionStackField):
        return {"type": "union_stack_field", "value": [v.stack, v.member, v.field]}
    if isinstance(v, m.Payload):
        return {"type": "payload", "value": None}
    if isinstance(v, m.ValueList):
        return {"type": "parameters_vector", "value": [value(x) for x in v.items]}
    return {"type": "expression", "value": expression(v)}


def expression(e: m.Expr) -> dict[str, Any]:
    if e.op in ("access_field", "access_union_header"):
        assert isinstance(e.right, m.Const)
        return {"op": e.op, "left": value(e.left), "right": e.right.value}
    out = {"op": e.op, "left": _operand(e.left), "right": _operand(e.right)}
    if e.cond is not None:
        out["cond"] = _operand(e.cond)
    return out


def _operand(v: m.Value | None) -> Any:
    """Inside an expression, action data is `local` (BMv2's name for it there)."""
    if isinstance(v, m.ActionParam):
        return {"type": "local", "value": v.index}
    return value(v)


def param(v: m.Value) -> Any:
    """A primitive's or parser op's argument: there BMv2 wants an expression wrapped twice, as p4c writes it."""
    if isinstance(v, m.Expr):
        return {"type": "expression", "value": value(v)}
    return value(v)


def _primitive(p: m.Primitive) -> dict[str, Any]:
    if p.op == "_jump" or p.op == "_jump_if_zero":
        return {"op": p.op, "parameters": [_jump_arg(x) for x in p.parameters]}
    out: dict[str, Any] = {"op": p.op, "parameters": [param(x) for x in p.parameters]}
    if p.source:
        filename, line, column = p.source.rsplit(":", 2)
        out["source_info"] = {"filename": filename, "line": int(line), "column": int(column)}
    return out


def _jump_arg(v: m.Value) -> Any:
    return {"type": "hexstr", "value": _hex(v.value)} if isinstance(v, m.Const) else param(v)


def _primitives(prims: list[m.Primitive]) -> list[dict[str, Any]]:
    """An action's primitives. simple_switch's `exit` only marks the packet and the action runs on, so each
    `exit` is followed by a jump to the action's end, and the jumps' targets move past those added."""
    exits = [i for i, x in enumerate(prims) if x.op == "exit"]

    def moved(i: int) -> int:
        return i + sum(1 for e in exits if e < i)

    out = []
    for i, x in enumerate(prims):
        if x.op in ("_jump", "_jump_if_zero") and isinstance(x.parameters[-1], m.Const):
            x = m.Primitive(x.op, [*x.parameters[:-1], m.Const(moved(x.parameters[-1].value))], x.source)
        out.append(_primitive(x))
        if i in exits:
            out.append(_primitive(m.Primitive("_jump", [m.Const(len(prims) + len(exits))])))
    return out


def _parser_op(op: m.ParserOp) -> dict[str, Any]:
    ps = op.parameters
    if op.op == "primitive":
        name = ps[0]
        assert isinstance(name, m.Named)
        return {"op": "primitive", "parameters": [{"op": name.name, "parameters": [param(x) for x in ps[1:]]}]}
    if op.op in ("extract", "extract_VL"):
        target = ps[0]
        if isinstance(target, m.HeaderRef):
            first: Any = {"type": "regular", "value": target.name}
        elif isinstance(target, m.StackRef):
            first = {"type": "stack", "value": target.name}
        else:
            assert isinstance(target, m.UnionStackField)
            first = {"type": "union_stack", "value": [target.stack, target.member]}
        rest = [{"type": "expression", "value": value(x)} for x in ps[1:]]  # extract_VL's length
        return {"op": op.op, "parameters": [first] + rest}
    if op.op == "verify":  # its condition wrapped once, as p4c writes it: wrapped twice, simple_switch crashes on it
        return {"op": op.op, "parameters": [value(ps[0]), param(ps[1])]}
    return {"op": op.op, "parameters": [param(x) for x in ps]}


def _transition(t: m.Transition, nbytes: int) -> dict[str, Any]:
    """BMv2 wants values and masks exactly as wide as the byte-padded key."""
    def hx(x: int) -> str:
        return "0x" + x.to_bytes(nbytes, "big").hex()

    if t.kind == "default":
        return {"type": "default", "value": None, "mask": None, "next_state": t.next_state}
    v = t.vset if t.kind == "parse_vset" else hx(t.value or 0)
    return {"type": t.kind, "value": v, "mask": None if t.mask is None else hx(t.mask), "next_state": t.next_state}


def _key_bytes(p: m.Program, keys: list[m.Value]) -> int:
    from p4target.lowered.schema import field_width

    total = 0
    for k in keys:
        if isinstance(k, m.Field):
            width = field_width(p, k)
        elif isinstance(k, m.Lookahead):
            width = k.width
        elif isinstance(k, m.StackField):
            stack = next(s for s in p.header_stacks if s.name == k.stack)
            width = next(f.width or 0 for f in p.header_type(stack.header_type).fields if f.name == k.field)
        else:
            width = 0
        total += (width + 7) // 8
    return total


def _match_value(v: m.MatchValue, width: int) -> dict[str, Any]:
    nbytes = max((width + 7) // 8, 1)

    def hx(x: int | None) -> str:
        return "0x" + (x or 0).to_bytes(nbytes, "big").hex()

    out: dict[str, Any] = {"match_type": v.match_type}
    if v.match_type == "valid":
        out["key"] = bool(v.key)
    elif v.match_type == "lpm":
        out.update(key=hx(v.key), prefix_length=v.prefix_length or 0)
    elif v.match_type in ("ternary", "optional"):
        out.update(match_type="ternary", key=hx(v.key), mask=hx(v.mask))
    elif v.match_type == "range":
        out.update(start=hx(v.start), end=hx(v.end))
    else:
        out["key"] = hx(v.key)
    return out


def _table(p: m.Program, t: m.Table) -> dict[str, Any]:
    widths = [_key_width(p, k) for k in t.key]
    out: dict[str, Any] = {
        "name": t.name, "id": t.id, "key": [{"match_type": "ternary" if k.match_type == "optional" else k.match_type,
                                              "name": k.name, "target": _key_target(k),
                                              "mask": None if k.mask is None else _hex(k.mask)} for k in t.key],
        "match_type": t.match_type, "type": t.type, "max_size": t.max_size, "with_counters": t.with_counters,
        "support_timeout": t.support_timeout, "direct_meters": t.direct_meters, "action_ids": t.action_ids,
        "actions": t.actions, "base_default_next": t.base_default_next, "next_tables": t.next_tables,
    }
    if t.action_profile is not None:
        out["action_profile"] = t.action_profile
    if t.default_entry is not None:
        d = t.default_entry
        out["default_entry"] = {"action_id": d.action_id, "action_const": d.action_const,
                                "action_data": [_hex(x) for x in d.action_data], "action_entry_const": d.action_entry_const}
    if t.entries:
        lowest = min(e.priority for e in t.entries)
        out["entries"] = [{"match_key": [_match_value(v, w) for v, w in zip(e.match_key, widths)],
                           "action_entry": {"action_id": e.action_entry.action_id,
                                            "action_data": [_hex(x) for x in e.action_entry.action_data]},
                           "priority": e.priority - lowest + 1} for e in t.entries]
    return out


def _key_target(k: m.KeyElement) -> Any:
    return k.target.name if isinstance(k.target, m.HeaderRef) else [k.target.header, k.target.field]


def _key_width(p: m.Program, k: m.KeyElement) -> int:
    from p4target.lowered.schema import key_width

    return key_width(p, k)


def _header_type(t: m.HeaderType) -> dict[str, Any]:
    """BMv2 wants whole bytes: a metadata type's odd bits are padded, as p4c pads them."""
    fields: list[list[Any]] = [[f.name, "*"] if f.width is None else [f.name, f.width, f.signed] for f in t.fields]
    odd = sum(f.width or 0 for f in t.fields) % 8
    if odd and t.max_length is None:
        fields.append(["_padding", 8 - odd, False])
    return {"name": t.name, "id": t.id, "fields": fields,
            **({"max_length": t.max_length} if t.max_length is not None else {})}


def program(p: m.Program) -> dict[str, Any]:
    """The whole program as a BMv2 JSON document."""
    return {
        "__meta__": {"version": FORMAT_VERSION, "compiler": "aggnet"},
        "header_types": [_header_type(t) for t in p.header_types],
        "headers": [{"name": h.name, "id": h.id, "header_type": h.header_type, "metadata": h.metadata,
                     "pi_omit": True} for h in p.headers],
        "header_stacks": [{"name": s.name, "id": s.id, "header_type": s.header_type, "size": len(s.header_ids),
                           "header_ids": s.header_ids} for s in p.header_stacks],
        "header_union_types": [{"name": u.name, "id": u.id, "headers": [list(x) for x in u.headers]}
                               for u in p.header_union_types],
        "header_unions": [{"name": u.name, "id": u.id, "union_type": u.union_type, "header_ids": u.header_ids}
                          for u in p.header_unions],
        "header_union_stacks": [{"name": s.name, "id": s.id, "union_type": s.union_type, "size": len(s.header_union_ids),
                                 "header_union_ids": s.header_union_ids} for s in p.header_union_stacks],
        "field_lists": [{"id": f.id, "name": f.name, "elements": [value(x) for x in f.elements]}
                        for f in p.field_lists],
        "errors": [[name, n] for name, n in p.errors],
        "enums": [{"name": name, "entries": [[k, v] for k, v in entries.items()]} for name, entries in p.enums.items()],
        "parsers": [{"name": ps.name, "id": ps.id, "init_state": ps.init_state, "parse_states": [
            {"name": s.name, "id": s.id, "parser_ops": [_parser_op(op) for op in s.parser_ops],
             "transition_key": [value(k) for k in s.transition_key],
             "transitions": [_transition(t, _key_bytes(p, s.transition_key)) for t in s.transitions]}
            for s in ps.parse_states]} for ps in p.parsers],
        "parse_vsets": [{"name": v.name, "id": v.id, "compressed_bitwidth": v.compressed_bitwidth,
                         "max_size": v.max_size} for v in p.parse_vsets],
        "deparsers": [{"name": d.name, "id": d.id, "order": d.order, "primitives": [_primitive(x) for x in d.primitives]}
                      for d in p.deparsers],
        "meter_arrays": [{"name": a.name, "id": a.id, "is_direct": a.is_direct, "size": a.size, "rate_count": a.rate_count,
                          "type": a.type, **({"binding": a.binding} if a.binding else {}),
                          **({"result_target": [a.result_target.header, a.result_target.field]}
                             if a.result_target else {})} for a in p.meter_arrays],
        "counter_arrays": [{"name": a.name, "id": a.id, "is_direct": a.is_direct, "size": a.size,
                            **({"binding": a.binding} if a.binding else {})} for a in p.counter_arrays],
        "register_arrays": [{"name": a.name, "id": a.id, "size": a.size, "bitwidth": a.bitwidth}
                            for a in p.register_arrays],
        "calculations": [{"name": c.name, "id": c.id, "algo": c.algo, "input": [value(x) for x in c.input]}
                         for c in p.calculations],
        "learn_lists": [{"id": ll.id, "name": ll.name, "elements": [value(x) for x in ll.elements]}
                        for ll in p.learn_lists],
        "actions": [{"name": a.name, "id": a.id, "runtime_data": [{"name": n, "bitwidth": w} for n, w in a.runtime_data],
                     "primitives": _primitives(a.primitives)} for a in p.actions],
        "pipelines": [{"name": pl.name, "id": pl.id, "init_table": pl.init_table,
                       "action_profiles": [{"name": ap.name, "id": ap.id, "max_size": ap.max_size,
                                            **({"selector": {"algo": ap.selector.algo,
                                                             "input": [value(x) for x in ap.selector.input]}}
                                               if ap.selector else {})} for ap in pl.action_profiles],
                       "tables": [_table(p, t) for t in pl.tables],
                       "conditionals": [{"name": c.name, "id": c.id, "expression": value(c.expression),
                                         "true_next": c.true_next, "false_next": c.false_next}
                                        for c in pl.conditionals]} for pl in p.pipelines],
        "checksums": [{"name": c.name, "id": c.id, "target": [c.target.header, c.target.field], "type": c.type,
                       "calculation": c.calculation, "verify": c.verify, "update": c.update,
                       "if_cond": value(c.if_cond)} for c in p.checksums],
        "force_arith": [],
        "extern_instances": [{"name": e.name, "id": e.id, "type": e.type, "attribute_values": [
            {"name": k, **value(v)} for k, v in e.attribute_values.items()]} for e in p.extern_instances],
        "field_aliases": [[k, [f.header, f.field]] for k, f in p.field_aliases.items()],
        "program": p.source,
    }


def dumps(p: m.Program) -> str:
    return json.dumps(program(p), indent=1)
