"""State: table writes, validation and lookup semantics (P4Runtime rules)."""
import pytest

from p4target import state as st


def schema(keys, actions=("MyIngress.fwd", "NoAction"), **table_kw) -> st.ProgramSchema:
    s = st.ProgramSchema()
    s.actions["MyIngress.fwd"] = st.ActionSchema("MyIngress.fwd", (("port", 9),))
    s.actions["NoAction"] = st.ActionSchema("NoAction")
    s.actions["MyIngress.other"] = st.ActionSchema("MyIngress.other")
    s.tables["MyIngress.t"] = st.TableSchema("MyIngress.t", tuple(keys), tuple(actions), **table_kw)
    return s


LPM = [st.KeyField("hdr.ipv4.dstAddr", 32, "lpm")]


def fwd(match, port, priority=0):
    return st.TableEntry(match, "MyIngress.fwd", {"port": port}, priority)


def test_lpm_longest_prefix_wins_and_default_on_miss():
    s = st.State(schema(LPM))
    t = s.table("MyIngress.t")
    s.insert_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)}, 1))
    s.insert_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000100, 24)}, 2))
    s.insert_entry("MyIngress.t", fwd({}, 3))  # /0 default route
    assert t.lookup((0x0A000105,)).params == {"port": 2}
    assert t.lookup((0x0A020304,)).params == {"port": 1}
    assert t.lookup((0x0B000001,)).params == {"port": 3}
    s.delete_entry("MyIngress.t", fwd({}, 0))
    assert t.lookup((0x0B000001,)) is None
    assert s.get_default("MyIngress.t").action == "NoAction"


def test_exact_multi_key_and_args_in_param_order():
    keys = [st.KeyField("a", 8, "exact"), st.KeyField("b", 16, "exact")]
    s = st.State(schema(keys))
    s.insert_entry("MyIngress.t", fwd({"a": st.Exact(1), "b": st.Exact(2)}, 7))
    e = s.table("MyIngress.t").lookup((1, 2))
    assert e.args == (7,)
    assert s.table("MyIngress.t").lookup((2, 1)) is None


def test_ternary_highest_priority_wins():
    keys = [st.KeyField("k", 8, "ternary")]
    s = st.State(schema(keys))
    s.insert_entry("MyIngress.t", fwd({"k": st.Ternary(0x10, 0xF0)}, 1, priority=10))
    s.insert_entry("MyIngress.t", fwd({"k": st.Ternary(0x12, 0xFF)}, 2, priority=20))
    s.insert_entry("MyIngress.t", fwd({}, 3, priority=1))
    t = s.table("MyIngress.t")
    assert t.lookup((0x12,)).args == (2,)
    assert t.lookup((0x13,)).args == (1,)
    assert t.lookup((0x23,)).args == (3,)


def test_range_and_optional():
    keys = [st.KeyField("r", 16, "range"), st.KeyField("o", 8, "optional")]
    s = st.State(schema(keys))
    s.insert_entry("MyIngress.t", fwd({"r": st.Range(100, 200), "o": st.Optional(5)}, 1, priority=5))
    s.insert_entry("MyIngress.t", fwd({"r": st.Range(150, 300)}, 2, priority=3))
    t = s.table("MyIngress.t")
    assert t.lookup((150, 5)).args == (1,)
    assert t.lookup((150, 6)).args == (2,)
    assert t.lookup((99, 5)) is None


@pytest.mark.parametrize("entry, error, text", [
    (fwd({"nope": st.Lpm(0, 8)}, 1), st.InvalidArgument, "no key field"),
    (fwd({"hdr.ipv4.dstAddr": st.Lpm(1 << 32, 8)}, 1), st.InvalidArgument, "does not fit in 32 bits"),
    (fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 33)}, 1), st.InvalidArgument, "prefix length 33"),
    (fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000001, 8)}, 1), st.InvalidArgument, "bits set beyond /8"),
    (fwd({"hdr.ipv4.dstAddr": st.Exact(1)}, 1), st.InvalidArgument, "given a Exact match"),
    (fwd({}, 512), st.InvalidArgument, "param port"),
    (st.TableEntry({}, "MyIngress.fwd", {}), st.InvalidArgument, "missing parameter 'port'"),
    (st.TableEntry({}, "MyIngress.fwd", {"port": 1, "x": 2}), st.InvalidArgument, "no parameter 'x'"),
    (st.TableEntry({}, "MyIngress.other"), st.InvalidArgument, "not in the table's actions"),
    (st.TableEntry({}, "Bogus"), st.InvalidArgument, "unknown action"),
    (fwd({}, 1, priority=3), st.InvalidArgument, "priority must be 0"),
])
def test_invalid_writes_are_rejected_and_change_nothing(entry, error, text):
    s = st.State(schema(LPM))
    s.insert_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)}, 1))
    with pytest.raises(error, match=text):
        s.insert_entry("MyIngress.t", entry)
    assert len(s.table("MyIngress.t")) == 1
    assert s.table("MyIngress.t").lookup((0x0A000001,)).args == (1,)


def test_exists_notfound_full_and_modify_keeps_counters():
    s = st.State(schema(LPM, size=2))
    e = fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)}, 1)
    s.insert_entry("MyIngress.t", e)
    with pytest.raises(st.AlreadyExists):
        s.insert_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)}, 2))
    with pytest.raises(st.NotFound):
        s.modify_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0B000000, 8)}, 2))
    with pytest.raises(st.NotFound):
        s.delete_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0B000000, 8)}, 2))
    s.insert_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0B000000, 8)}, 2))
    with pytest.raises(st.ResourceExhausted):
        s.insert_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0C000000, 8)}, 3))
    e.packets = 5
    s.modify_entry("MyIngress.t", fwd({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)}, 9))
    found = s.table("MyIngress.t").find({"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)})
    assert found.args == (9,) and found.packets == 5
    assert st.AlreadyExists.code == "ALREADY_EXISTS" and st.ResourceExhausted.code == "RESOURCE_EXHAUSTED"


def test_default_action_rules():
    s = st.State(schema(LPM, default_action="NoAction"))
    s.set_default("MyIngress.t", "MyIngress.fwd", {"port": 4})
    assert s.get_default("MyIngress.t").args == (4,)
    with pytest.raises(st.InvalidArgument):
        s.set_default("MyIngress.t", "MyIngress.other")
    s.reset_default("MyIngress.t")
    assert s.get_default("MyIngress.t").action == "NoAction"
    const = st.State(schema(LPM, const_default=True))
    with pytest.raises(st.PermissionDenied):
        const.set_default("MyIngress.t", "MyIngress.fwd", {"port": 1})


def test_const_entries_are_installed_in_priority_order_and_immutable():
    keys = [st.KeyField("k", 8, "ternary")]
    entries = [fwd({"k": st.Ternary(0x01, 0x0F)}, 1), fwd({}, 2)]
    s = st.State(schema(keys, entries=entries, const_entries=True))
    t = s.table("MyIngress.t")
    assert t.lookup((0x11,)).args == (1,)  # first entry wins although both match
    assert t.lookup((0x12,)).args == (2,)
    with pytest.raises(st.PermissionDenied):
        s.insert_entry("MyIngress.t", fwd({"k": st.Ternary(0, 1)}, 3, priority=9))


def test_registers_counters_pre_and_digests():
    sc = schema(LPM)
    sc.registers["MyIngress.r"] = st.RegisterSchema("MyIngress.r", 8, 4)
    sc.counters["MyIngress.c"] = st.CounterSchema("MyIngress.c", 2, "packets")
    s = st.State(sc)
    s.register_write("MyIngress.r", 3, 255)
    assert s.register_read("MyIngress.r", 3) == 255
    with pytest.raises(st.InvalidArgument, match="does not fit in 8 bits"):
        s.register_write("MyIngress.r", 0, 256)
    with pytest.raises(st.OutOfRange, match="out of range"):
        s.register_read("MyIngress.r", 4)
    with pytest.raises(st.InvalidArgument, match="unknown register"):
        s.register_read("nope", 0)
    s.counter_write("MyIngress.c", 1, 3, 300)
    assert s.counter_read("MyIngress.c", 1) == (3, 300)
    s.mc_group_insert(1, [(1, 0), (2, 0)])
    with pytest.raises(st.AlreadyExists):
        s.mc_group_insert(1, [(3, 0)])
    s.mc_group_modify(1, [(3, 7)])
    assert s.multicast_groups[1] == [(3, 7)]
    s.mc_group_delete(1)
    with pytest.raises(st.NotFound):
        s.mc_group_delete(1)
    s.clone_session_insert(5, [(4, 1)], packet_length=64)
    assert s.clone_sessions[5].packet_length == 64
    queue = s.digests
    queue.append(("learn_t", (1, 2)))
    assert s.drain_digests() == [("learn_t", (1, 2))]
    assert s.digests is queue and not queue
