"""State: table indexes updated in place by writes agree with a brute-force matcher.

Random insert/delete/modify sequences on exact, lpm (one and several keys), ternary,
range and multi-lpm tables; after every step each probe key must hit exactly the entry
a linear scan by P4 semantics picks (longest prefix; highest priority, earliest
inserted on ties).
"""
import random

import pytest

from p4target import state as st

ACTIONS = {"fwd": st.ActionSchema("fwd", (("port", 9),)), "NoAction": st.ActionSchema("NoAction")}


def make_table(keys, size=100_000) -> st.Table:
    return st.Table(st.TableSchema("T", tuple(keys), ("fwd", "NoAction"), size=size), ACTIONS)


def field_matches(spec, value: int, width: int) -> bool:
    if spec is None:
        return True
    if isinstance(spec, (st.Exact, st.Optional)):
        return value == spec.value
    if isinstance(spec, st.Lpm):
        mask = ((1 << spec.prefix_len) - 1) << (width - spec.prefix_len)
        return value & mask == spec.value
    if isinstance(spec, st.Ternary):
        return value & spec.mask == spec.value
    return spec.low <= value <= spec.high


def reference(keys, live: list[st.TableEntry], probe: tuple) -> st.TableEntry | None:
    """The entry P4 semantics select, by a linear scan over `live` (in insertion order)."""
    hits = [e for e in live
            if all(field_matches(e.match.get(k.name), v, k.bitwidth) for k, v in zip(keys, probe))]
    if not hits:
        return None
    if any(k.match_kind in ("ternary", "range", "optional") for k in keys) or \
            sum(k.match_kind == "lpm" for k in keys) > 1:
        best = max(e.priority for e in hits)
        return next(e for e in hits if e.priority == best)  # earliest inserted among the best
    lpm = [k for k in keys if k.match_kind == "lpm"]
    if lpm:
        return max(hits, key=lambda e: e.match[lpm[0].name].prefix_len if lpm[0].name in e.match else 0)
    return hits[0]


def random_spec(rng: random.Random, key: st.KeyField, values: list[int]):
    """A match for one field drawn from a small value pool, so entries overlap a lot."""
    w, v = key.bitwidth, rng.choice(values)
    kind = key.match_kind
    if kind == "exact":
        return st.Exact(v)
    if kind == "optional":
        return None if rng.random() < 0.3 else st.Optional(v)
    if kind == "lpm":
        plen = rng.choice([0, 4, 8, 12, w])
        mask = ((1 << plen) - 1) << (w - plen)
        return None if plen == 0 else st.Lpm(v & mask, plen)
    if kind == "ternary":
        mask = rng.choice([0, 0xF0 << (w - 8), (1 << w) - 1, 0x0F])
        return None if mask == 0 else st.Ternary(v & mask, mask)
    lo = rng.randrange(0, 1 << w)
    hi = min((1 << w) - 1, lo + rng.randrange(0, 1 << (w - 2)))
    return None if (lo, hi) == (0, (1 << w) - 1) else st.Range(lo, hi)


KEY_SETS = {
    "exact": [st.KeyField("a", 16, "exact"), st.KeyField("b", 8, "exact")],
    "lpm1": [st.KeyField("d", 16, "lpm")],
    "lpm+exact": [st.KeyField("v", 8, "exact"), st.KeyField("d", 16, "lpm")],
    "ternary+range+optional": [st.KeyField("t", 16, "ternary"), st.KeyField("r", 16, "range"),
                               st.KeyField("o", 8, "optional")],
    "two lpm": [st.KeyField("d", 16, "lpm"), st.KeyField("s", 16, "lpm")],
}


@pytest.mark.parametrize("name", sorted(KEY_SETS))
def test_random_writes_keep_lookup_equal_to_linear_scan(name):
    keys = KEY_SETS[name]
    rng = random.Random(name)
    pools = {k.name: [rng.randrange(0, 1 << k.bitwidth) for _ in range(6)] for k in keys}
    table = make_table(keys)
    live: list[st.TableEntry] = []
    probes = [tuple(rng.choice(pools[k.name]) ^ rng.choice([0, 0, 1, 0x100 % (1 << k.bitwidth)]) for k in keys)
              for _ in range(40)]
    needs_priority = table.needs_priority
    for step in range(400):
        if live and rng.random() < 0.35:
            victim = rng.choice(live)
            table.delete(st.TableEntry(dict(victim.match), "fwd", {}, victim.priority))
            live.remove(victim)
        elif live and rng.random() < 0.1:
            target = rng.choice(live)
            table.modify(st.TableEntry(dict(target.match), "fwd", {"port": step % 512}, target.priority))
            assert target.params == {"port": step % 512}
        else:
            match = {k.name: s for k in keys if (s := random_spec(rng, k, pools[k.name])) is not None}
            entry = st.TableEntry(match, "fwd", {"port": step % 512}, rng.randrange(1, 5) if needs_priority else 0)
            try:
                table.insert(entry)
                live.append(entry)
            except st.AlreadyExists:
                pass
        assert len(table) == len(live)
        for probe in probes:
            assert table.lookup(probe) is reference(keys, live, probe), (step, probe)


def test_clear_restores_program_entries_and_empty_index():
    keys = [st.KeyField("d", 16, "lpm")]
    program_entry = st.TableEntry({"d": st.Lpm(0x1200, 8)}, "fwd", {"port": 1})
    table = st.Table(st.TableSchema("T", tuple(keys), ("fwd", "NoAction"), entries=[program_entry]), ACTIONS)
    table.insert(st.TableEntry({"d": st.Lpm(0x1234, 16)}, "fwd", {"port": 2}))
    assert table.lookup((0x1234,)).params == {"port": 2}
    table.clear()
    assert len(table) == 1
    assert table.lookup((0x1234,)).params == {"port": 1}
    assert table.lookup((0x3400,)) is None


def test_failed_writes_leave_the_index_unchanged():
    keys = [st.KeyField("t", 8, "ternary")]
    table = make_table(keys, size=2)
    table.insert(st.TableEntry({"t": st.Ternary(0x10, 0xF0)}, "fwd", {"port": 1}, 5))
    with pytest.raises(st.AlreadyExists):
        table.insert(st.TableEntry({"t": st.Ternary(0x10, 0xF0)}, "fwd", {"port": 2}, 5))
    with pytest.raises(st.InvalidArgument):
        table.insert(st.TableEntry({"t": st.Ternary(0x11, 0xF0)}, "fwd", {"port": 2}, 9))  # bits outside mask
    with pytest.raises(st.NotFound):
        table.delete(st.TableEntry({"t": st.Ternary(0x20, 0xF0)}, "fwd", {}, 5))
    table.insert(st.TableEntry({"t": st.Ternary(0x20, 0xF0)}, "fwd", {"port": 3}, 1))
    with pytest.raises(st.ResourceExhausted):
        table.insert(st.TableEntry({"t": st.Ternary(0x30, 0xF0)}, "fwd", {"port": 4}, 1))
    assert [table.lookup((v,)).params["port"] if table.lookup((v,)) else None for v in (0x15, 0x25, 0x35)] == \
        [1, 3, None]
