"""What the control plane can address in a program: IR -> state.ProgramSchema.

Names are the P4Info control-plane names (`control_plane_name` of tables, actions and
extern instances, the key element names), so the State, P4Info and STF agree.
"""
from __future__ import annotations

from p4target import state as st
from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.lowered.from_ir.common import digest_name, table_actions
from p4target.p4info import constant_value, supports_timeout

__all__ = ["build_schema", "digest_name", "match_keys", "table_actions"]

ERROR_KEY_BITS = 32  # an `error` table key (P4Info gives it no width) holds the error's number


def _fail(msg: str, loc: ir.Loc) -> P4Error:
    return P4Error(msg, loc.file, loc.line, loc.col)


def _const(e: ir.Expr, width: int) -> int:
    """A folded constant as the unsigned value the control plane sees."""
    return constant_value(e) & ((1 << width) - 1)


def _binding_params(b: ir.ActionBinding) -> dict[str, int]:
    data = b.action.data_params
    if len(b.args) < len(data):
        raise _fail(f"action {b.action.name} needs {len(data)} arguments", b.loc)
    args = b.args[len(b.args) - len(data):]  # directional args (if any) come first
    return {p.name: _const(a, ir.width_of(p.type)) for p, a in zip(data, args)}


def _prefix_len(mask: int, width: int, loc: ir.Loc) -> int:
    plen = bin(mask).count("1")
    if mask != ((1 << plen) - 1) << (width - plen):
        raise _fail(f"lpm mask {mask:#x} is not a prefix", loc)
    return plen


def _entry_match(key: ir.KeyElement, ks: ir.KeySet) -> st.Match | None:
    """One const-entry keyset as a state match spec (None = wildcard)."""
    w = key.width
    kind = key.match_kind
    if isinstance(ks, ir.KsDefault):
        return None
    if isinstance(ks, ir.KsValue):
        v = _const(ks.value, w)
        return {"exact": st.Exact(v), "lpm": st.Lpm(v, w), "ternary": st.Ternary(v, (1 << w) - 1),
                "range": st.Range(v, v), "optional": st.Optional(v)}[kind]
    if isinstance(ks, ir.KsMask) and kind in ("ternary", "lpm"):
        m = _const(ks.mask, w)
        v = _const(ks.value, w) & m
        return st.Ternary(v, m) if kind == "ternary" else st.Lpm(v, _prefix_len(m, w, ks.loc))
    if isinstance(ks, ir.KsRange) and kind == "range":
        return st.Range(_const(ks.lo, w), _const(ks.hi, w))
    raise _fail(f"this keyset is not valid for a {kind} key", getattr(ks, "loc", key.loc))


def match_keys(t: ir.Table) -> list[ir.KeyElement]:
    """The keys the control plane matches on: all but `selector` ones (those feed the action selector's hash)."""
    return [k for k in t.keys if k.match_kind != "selector"]


def _table(program: ir.Program, t: ir.Table) -> st.TableSchema:
    keys_ir = match_keys(t)
    for k in keys_ir:
        if k.match_kind not in st.MATCH_KINDS:
            raise _fail(f"match kind {k.match_kind} is not supported by the embedded target", k.loc)
    keys = tuple(st.KeyField(k.name, k.width or ERROR_KEY_BITS, k.match_kind) for k in keys_ir)
    refs = table_actions(program, t)
    if t.implementation is not None and t.entries:
        raise _fail(f"unsupported: entries in table {t.name}, which has an action profile", t.loc)
    default = t.default_action
    entries = []
    for e in t.entries:
        match = {}
        for k, ks in zip(t.keys, e.keys):
            if k.match_kind == "selector":
                continue
            m = _entry_match(k, ks)
            if m is not None:
                match[k.name] = m
        entries.append(st.TableEntry(match, e.action.action.control_plane_name, _binding_params(e.action),
                                     e.priority or 0))
    return st.TableSchema(
        name=t.control_plane_name,
        keys=keys,
        actions=tuple(a.control_plane_name for a, _ in refs),
        default_action=default.action.control_plane_name if default else "NoAction",
        default_params=_binding_params(default) if default else {},
        const_default=t.default_action_const,
        size=t.size if t.size is not None else 1024,
        entries=entries,
        const_entries=t.entries_const,
        direct_counter=t.direct_counter.control_plane_name if t.direct_counter else None,
        direct_meter=t.direct_meter.control_plane_name if t.direct_meter else None,
        default_only=frozenset(a.control_plane_name for a, an in refs if an.has("defaultonly")),
        table_only=frozenset(a.control_plane_name for a, an in refs if an.has("tableonly")),
        support_timeout=supports_timeout(t),
        implementation=t.implementation.control_plane_name if t.implementation else None,
    )


def _action_profile(program: ir.Program, inst: ir.ExternInstance, tables: list[ir.Table]) -> st.ActionProfileSchema:
    """An action profile/selector and what its members may run: its tables' actions but @defaultonly ones."""
    actions: dict[str, None] = {}
    for t in tables:
        for a, ref_annotations in table_actions(program, t):
            if not ref_annotations.has("defaultonly"):
                actions.setdefault(a.control_plane_name)
    selector = inst.extern == "action_selector"
    return st.ActionProfileSchema(inst.control_plane_name, inst.size or 0, tuple(actions), selector,
                                  (inst.annotations.get_int("max_group_size") or 0) if selector else 0)


def build_schema(program: ir.Program) -> st.ProgramSchema:
    """Every table, action, register, counter and direct counter of `program`, by name."""
    schema = st.ProgramSchema()
    for a in program.all_actions():
        params = tuple((p.name, ir.width_of(p.type)) for p in a.data_params)
        schema.actions[a.control_plane_name] = st.ActionSchema(a.control_plane_name, params)
    tables = list(program.all_tables())
    for t in tables:
        ts = _table(program, t)
        schema.tables[ts.name] = ts
        if t.direct_counter is not None:
            name = t.direct_counter.control_plane_name
            schema.direct_counters[name] = st.DirectCounterSchema(name, ts.name, t.direct_counter.kind or "packets_and_bytes")
        if t.direct_meter is not None:
            name = t.direct_meter.control_plane_name
            schema.direct_meters[name] = st.DirectMeterSchema(name, ts.name, t.direct_meter.kind or "bytes")
    profiles = {id(t.implementation): t.implementation for t in tables if t.implementation is not None}
    for inst in profiles.values():
        users = [t for t in tables if t.implementation is inst]
        schema.action_profiles[inst.control_plane_name] = _action_profile(program, inst, users)
    for inst in program.all_instances():
        name = inst.control_plane_name
        if inst.extern == "register":
            schema.registers[name] = st.RegisterSchema(name, ir.width_of(inst.type_args[0]), inst.size or 0)
        elif inst.extern == "counter":
            schema.counters[name] = st.CounterSchema(name, inst.size or 0, inst.kind or "packets_and_bytes")
        elif inst.extern == "meter":
            schema.meters[name] = st.MeterSchema(name, inst.size or 0, inst.kind or "bytes")
    for vs in program.value_sets():
        name = vs.control_plane_name
        schema.value_sets[name] = st.ValueSetSchema(name, tuple(ir.width_of(f.type) for f in vs.fields), vs.size)
    return schema
