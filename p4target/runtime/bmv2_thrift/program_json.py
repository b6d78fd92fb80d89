"""The BMv2 JSON that `simple_switch_CLI` asks for (`bm_get_config`), made from a ProgramSchema.

Without `--json`, the CLI learns the program from the switch: tables (keys with match kinds and
widths, actions, implementation), actions with their runtime data, action profiles, counters,
meters, registers and parser value sets. This builds only what its loader reads, from what the
State knows; it stands in for serializing the real p4c-BMv2 program until the switch keeps one,
and is the one place to replace then. Shapes the CLI needs that the schema does not have:
- a key's width comes from a header type: each key `a.b.c` becomes field `c` of a header
  instance `a.b` (one synthetic header type per instance), so the CLI shows the key's name;
- `optional` keys are `ternary` (as p4c emits them); a table's match_type is its widest key kind.
"""
from __future__ import annotations

from typing import Any

from p4target import state as st

_KIND_ORDER = ("exact", "lpm", "ternary", "range")  # a table's match_type: the last of its keys' kinds


def key_match_type(key: st.KeyField) -> str:
    """The BMv2 match type the CLI sees for a key (and sends match params of)."""
    return "ternary" if key.match_kind == "optional" else key.match_kind


def _key_target(name: str) -> tuple[str, str]:
    header, _, field = name.rpartition(".")
    return header, field


def bmv2_json(schema: st.ProgramSchema) -> dict[str, Any]:
    """The BMv2 JSON of `schema`, as far as the runtime CLI reads it (ids: declaration order)."""
    headers: dict[str, dict[str, int]] = {}
    tables = []
    for tid, table in enumerate(schema.tables.values()):
        keys = []
        for key in table.keys:
            header, field = _key_target(key.name)
            headers.setdefault(header, {}).setdefault(field, key.bitwidth)
            keys.append({"match_type": key_match_type(key), "target": [header, field], "mask": None,
                         "name": key.name})
        kinds = [_KIND_ORDER.index(k["match_type"]) for k in keys]
        kind = "indirect" if table.implementation else "simple"
        if table.implementation and schema.action_profiles[table.implementation].with_selector:
            kind = "indirect_ws"
        entry: dict[str, Any] = {
            "name": table.name, "id": tid, "match_type": _KIND_ORDER[max(kinds, default=0)], "type": kind,
            "max_size": table.size, "support_timeout": table.support_timeout,
            "with_counters": table.direct_counter is not None,
            "direct_meters": table.direct_meter, "key": keys, "actions": list(table.actions),
            "action_ids": [list(schema.actions).index(a) for a in table.actions]}
        if table.implementation:
            entry["action_profile"] = table.implementation
        tables.append(entry)
    profiles = []
    for pid, prof in enumerate(schema.action_profiles.values()):
        profile: dict[str, Any] = {"name": prof.name, "id": pid, "max_size": prof.size}
        if prof.with_selector:
            profile["selector"] = {"algo": "crc16", "input": []}
        profiles.append(profile)
    direct_counters = [{"name": c.name, "is_direct": True, "binding": c.table}
                       for c in schema.direct_counters.values()]
    counters = [{"name": c.name, "is_direct": False, "size": c.size} for c in schema.counters.values()]
    direct_meters = [{"name": m.name, "is_direct": True, "binding": m.table, "type": m.type, "rate_count": 2}
                     for m in schema.direct_meters.values()]
    meters = [{"name": m.name, "is_direct": False, "size": m.size, "type": m.type, "rate_count": 2}
              for m in schema.meters.values()]
    return {
        "program": "aggnet-switch", "__meta__": {"version": [2, 23], "compiler": "aggnet (from the P4Runtime schema)"},
        "header_types": [{"name": f"{h}_t", "id": i, "fields": [[f, w, False] for f, w in fields.items()]}
                         for i, (h, fields) in enumerate(headers.items())],
        "headers": [{"name": h, "id": i, "header_type": f"{h}_t", "metadata": False}
                    for i, h in enumerate(headers)],
        "actions": [{"name": a.name, "id": i, "runtime_data": [{"name": n, "bitwidth": w} for n, w in a.params],
                     "primitives": []} for i, a in enumerate(schema.actions.values())],
        "pipelines": [{"name": "ingress", "id": 0, "init_table": None, "tables": tables,
                       "action_profiles": profiles, "conditionals": []}],
        "counter_arrays": [dict(c, id=i) for i, c in enumerate(counters + direct_counters)],
        "meter_arrays": [dict(m, id=i) for i, m in enumerate(meters + direct_meters)],
        "register_arrays": [{"name": r.name, "id": i, "size": r.size, "bitwidth": r.bitwidth}
                            for i, r in enumerate(schema.registers.values())],
        "parse_vsets": [{"name": v.name, "id": i, "compressed_bitwidth": sum(v.bitwidths), "max_size": v.size}
                        for i, v in enumerate(schema.value_sets.values())],
        "calculations": [], "learn_lists": [],
    }
