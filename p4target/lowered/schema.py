"""What the control plane can address in a lowered program: Program -> state.ProgramSchema.

Names are the ones p4c writes into its JSON, which are P4Info's control-plane names, so the
State, P4Info and STF agree whichever front end produced the program.
"""
from __future__ import annotations

from p4target import state as st
from p4target.errors import P4Error
from p4target.extern_registry import registered
from p4target.lowered import model as m

_TABLE_MATCH_KINDS = {"exact", "lpm", "ternary", "range", "optional"}


def key_width(program: m.Program, k: m.KeyElement) -> int:
    """The width the control plane matches on: the field's (a static mask is ANDed in, as p4c's P4Info has it)."""
    if isinstance(k.target, m.HeaderRef):
        return 1
    return field_width(program, k.target)


def field_width(program: m.Program, f: m.Field) -> int:
    """A fixed-width field's width in bits (`$valid$` is 1)."""
    if f.field == "$valid$":
        return 1
    ftype = program.header_type(program.header(f.header).header_type).field(f.field)
    if ftype is None or ftype.width is None:
        raise P4Error(f"field {f.header}.{f.field} has no fixed width here", program.source)
    return ftype.width


def _match(kind: str, v: m.MatchValue, width: int) -> st.Match | None:
    if kind == "optional":  # a lowered-form extension (p4c writes ternary): mask 0 is the wildcard
        return None if v.mask == 0 else st.Optional(v.key or 0)
    if kind in ("exact", "valid"):
        return st.Exact(int(v.key or 0))
    if kind == "lpm":
        plen = v.prefix_length or 0
        host_mask = (1 << (width - plen)) - 1
        return st.Lpm((v.key or 0) & ~host_mask, plen) if plen else None
    if kind == "ternary":
        mask = v.mask if v.mask is not None else (1 << width) - 1
        return st.Ternary((v.key or 0) & mask, mask) if mask else None
    if kind == "range":
        return st.Range(v.start or 0, v.end if v.end is not None else (1 << width) - 1)
    raise P4Error(f"match type {kind} is not supported in const entries")


def _params(program: m.Program, action_id: int, data: list[int]) -> tuple[str, dict[str, int]]:
    a = program.action(action_id)
    return a.name, {name: value for (name, _), value in zip(a.runtime_data, data)}


def _table(program: m.Program, t: m.Table, counters: dict[str, m.CounterArray],
           meters: dict[str, m.MeterArray], profiles: dict[str, m.ActionProfile]) -> st.TableSchema:
    keys = []
    for k in t.key:
        kind = "exact" if k.match_type == "valid" else k.match_type
        if kind not in _TABLE_MATCH_KINDS:
            raise P4Error(f"table {t.name}: match type {k.match_type} is not supported", program.source)
        keys.append(st.KeyField(k.name, key_width(program, k), kind))
    entries = []
    prioritized = any(k.match_type in ("ternary", "range", "optional") for k in t.key)
    lowest = max((e.priority for e in t.entries), default=0)
    for e in t.entries:
        match = {}
        for k, v in zip(t.key, e.match_key):
            spec = _match(k.match_type, v, key_width(program, k))
            if spec is not None:
                match[k.name] = spec
        action, params = _params(program, e.action_entry.action_id, e.action_entry.action_data)
        # BMv2's JSON puts the highest priority first (lowest number); the State, as P4Runtime, the other way
        entries.append(st.TableEntry(match, action, params, lowest + 1 - e.priority if prioritized else 0))
    default_action, default_params = "NoAction", dict[str, int]()
    if t.default_entry is not None:
        default_action, default_params = _params(program, t.default_entry.action_id, t.default_entry.action_data)
    direct_counter = next((c.name for c in counters.values() if c.is_direct and c.binding == t.name), None)
    direct_meter = t.direct_meters
    profile = profiles.get(t.action_profile) if t.action_profile else None
    return st.TableSchema(
        name=t.name, keys=tuple(keys), actions=tuple(t.actions), default_action=default_action,
        default_params=default_params,
        const_default=bool(t.default_entry and t.default_entry.action_const),
        size=t.max_size, entries=entries, const_entries=bool(t.entries), direct_counter=direct_counter,
        direct_meter=direct_meter if direct_meter in meters else None,
        support_timeout=t.support_timeout, implementation=profile.name if profile else None,
        default_only=t.default_only, table_only=t.table_only)


def build_schema(program: m.Program) -> st.ProgramSchema:
    """Every table, action, register, counter, meter and action profile of `program`, by name."""
    schema = st.ProgramSchema()
    for a in program.actions:
        schema.actions[a.name] = st.ActionSchema(a.name, tuple(a.runtime_data))
    counters = {c.name: c for c in program.counter_arrays}
    meters = {mt.name: mt for mt in program.meter_arrays}
    profiles = {ap.name: ap for pl in program.pipelines for ap in pl.action_profiles}
    tables = [t for pl in program.pipelines for t in pl.tables]
    for t in tables:
        schema.tables[t.name] = _table(program, t, counters, meters, profiles)
    for ap in profiles.values():  # what its members may run: its tables' actions but @defaultonly ones
        actions = tuple(dict.fromkeys(a for t in tables if t.action_profile == ap.name for a in t.actions
                                      if a not in t.default_only))
        schema.action_profiles[ap.name] = st.ActionProfileSchema(ap.name, ap.max_size, actions, ap.selector is not None,
                                                                 ap.max_group_size)
    for ext in registered():  # registers, counters, meters: as their modules (p4target.externs) say
        ext.schema(program, schema)
    for vs in program.parse_vsets:
        schema.value_sets[vs.name] = st.ValueSetSchema(vs.name, value_set_widths(program, vs), vs.max_size)
    schema.digests = tuple(sorted(ll.name for ll in program.learn_lists))
    return schema


def value_set_widths(program: m.Program, vs: m.ParseVset) -> tuple[int, ...]:
    """A value set's member widths: those of the select keys matched against it (BMv2's JSON has only their sum)."""
    for parser in program.parsers:
        for s in parser.parse_states:
            if any(t.kind == "parse_vset" and t.vset == vs.name for t in s.transitions):
                widths = []
                for v in s.transition_key:
                    if isinstance(v, m.Lookahead):
                        widths.append(v.width)
                    elif isinstance(v, m.Field):
                        widths.append(field_width(program, v))
                    else:
                        raise P4Error(f"value set {vs.name}: a select key of type {type(v).__name__}", program.source)
                return tuple(widths)
    return (vs.compressed_bitwidth,)
