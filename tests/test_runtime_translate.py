"""Translator unit tests: P4Runtime entities against a real State, with a hand-built P4Info."""
import grpc
import pytest
from finsy.proto import p4i, p4r
from google.protobuf import text_format

from p4target import state as st
from p4target.runtime.errors import RuntimeStatus
from p4target.runtime.translate import DELETE, INSERT, MODIFY, Translator

P4INFO = """
tables { preamble { id: 100 name: "c.lpm" alias: "lpm" }
  match_fields { id: 1 name: "dst" bitwidth: 32 match_type: LPM }
  action_refs { id: 10 } action_refs { id: 11 } size: 4 }
tables { preamble { id: 101 name: "c.acl" alias: "acl" }
  match_fields { id: 1 name: "etype" bitwidth: 16 match_type: TERNARY }
  match_fields { id: 2 name: "proto" bitwidth: 8 match_type: OPTIONAL }
  match_fields { id: 3 name: "port" bitwidth: 9 match_type: RANGE }
  action_refs { id: 11 } direct_resource_ids: 300 size: 16 }
tables { preamble { id: 102 name: "c.l2" alias: "l2" }
  match_fields { id: 1 name: "mac" bitwidth: 48 match_type: EXACT }
  action_refs { id: 10 } action_refs { id: 11 scope: DEFAULT_ONLY } direct_resource_ids: 600 size: 16 }
actions { preamble { id: 10 name: "c.fwd" alias: "fwd" } params { id: 1 name: "port" bitwidth: 9 } }
actions { preamble { id: 11 name: "c.drop" alias: "drop" } }
counters { preamble { id: 200 name: "c.ports" alias: "ports" } spec { unit: BOTH } size: 4 }
direct_counters { preamble { id: 300 name: "c.acl_counter" } spec { unit: BOTH } direct_table_id: 101 }
registers { preamble { id: 400 name: "c.reg" alias: "reg" }
  type_spec { bitstring { bit { bitwidth: 16 } } } size: 3 }
meters { preamble { id: 500 name: "c.m" alias: "m" } spec { unit: PACKETS } size: 2 }
direct_meters { preamble { id: 600 name: "c.dm" alias: "dm" } spec { unit: BYTES } direct_table_id: 102 }
"""


def make() -> Translator:
    schema = st.ProgramSchema(
        actions={"c.fwd": st.ActionSchema("c.fwd", (("port", 9),)), "c.drop": st.ActionSchema("c.drop")},
        tables={
            "c.lpm": st.TableSchema("c.lpm", (st.KeyField("dst", 32, "lpm"),), ("c.fwd", "c.drop"),
                                    default_action="c.drop", size=4),
            "c.acl": st.TableSchema("c.acl", (st.KeyField("etype", 16, "ternary"), st.KeyField("proto", 8, "optional"),
                                              st.KeyField("port", 9, "range")), ("c.drop",),
                                    default_action="c.drop", size=16, direct_counter="c.acl_counter"),
            "c.l2": st.TableSchema("c.l2", (st.KeyField("mac", 48, "exact"),), ("c.fwd", "c.drop"),
                                   default_action="c.drop", default_only=frozenset({"c.drop"}), size=16,
                                   direct_meter="c.dm"),
        },
        registers={"c.reg": st.RegisterSchema("c.reg", 16, 3)},
        counters={"c.ports": st.CounterSchema("c.ports", 4)},
        direct_counters={"c.acl_counter": st.DirectCounterSchema("c.acl_counter", "c.acl")},
        meters={"c.m": st.MeterSchema("c.m", 2, "packets")},
        direct_meters={"c.dm": st.DirectMeterSchema("c.dm", "c.l2")},
    )
    return Translator(text_format.Parse(P4INFO, p4i.P4Info()), st.State(schema))


def entity(text: str) -> p4r.Entity:
    return text_format.Parse(text, p4r.Entity())


def lpm_entry(value: bytes, plen: int, port: bytes = b"\x02") -> p4r.Entity:
    e = p4r.Entity()
    te = e.table_entry
    te.table_id = 100
    te.match.add(field_id=1).lpm.CopyFrom(p4r.FieldMatch.LPM(value=value, prefix_len=plen))
    te.action.action.action_id = 10
    te.action.action.params.add(param_id=1, value=port)
    return e


def code_of(fn, *args) -> grpc.StatusCode:
    with pytest.raises(RuntimeStatus) as err:
        fn(*args)
    return err.value.code


def test_insert_read_modify_delete_lpm_entry_canonical_on_read():
    t = make()
    t.apply(INSERT, lpm_entry(b"\x00\x0a\x00\x01\x00", 24))  # zero-padded input is accepted
    [read] = list(t.read(entity("table_entry { table_id: 100 }")))
    fm = read.table_entry.match[0]
    assert fm.lpm.value == b"\x0a\x00\x01\x00" and fm.lpm.prefix_len == 24
    assert read.table_entry.action.action.params[0].value == b"\x02"
    assert t.state.table("c.lpm").lookup((0x0A000105,)).params == {"port": 2}
    t.apply(MODIFY, lpm_entry(b"\x0a\x00\x01\x00", 24, b"\x01\x00"))
    assert t.state.table("c.lpm").lookup((0x0A000105,)).params == {"port": 256}
    assert code_of(t.apply, INSERT, lpm_entry(b"\x0a\x00\x01\x00", 24)) == grpc.StatusCode.ALREADY_EXISTS
    t.apply(DELETE, lpm_entry(b"\x0a\x00\x01\x00", 24))
    assert list(t.read(entity("table_entry { table_id: 100 }"))) == []
    assert code_of(t.apply, DELETE, lpm_entry(b"\x0a\x00\x01\x00", 24)) == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize("bad, words", [
    (lpm_entry(b"\x0a\x00\x01\x00", 33), "prefix length"),
    (lpm_entry(b"\x0a\x00\x01\x05", 24), "beyond /24"),
    (lpm_entry(b"\x0a\x00\x01\x00", 0), "must be omitted"),
    (lpm_entry(b"\x01\x0a\x00\x01\x00", 24), "does not fit in 32 bits"),
    (lpm_entry(b"\x0a\x00\x01\x00", 24, b"\x02\x00"), "does not fit in 9 bits"),
    (entity("table_entry { table_id: 999 }"), "unknown table id 999"),
    (entity("table_entry { table_id: 100 match { field_id: 7 lpm { value: '\\001' prefix_len: 8 } }"
            " action { action { action_id: 11 } } }"), "unknown match field id 7"),
    (entity("table_entry { table_id: 100 match { field_id: 1 exact { value: '\\001' } }"
            " action { action { action_id: 11 } } }"), "expected a lpm match"),
    (entity("table_entry { table_id: 102 match { field_id: 1 exact { value: '\\001' } }"
            " action { action { action_id: 11 } } }"), "@defaultonly"),
    (entity("table_entry { table_id: 102 action { action { action_id: 11 } } }"), "exact match field mac is missing"),
    (entity("table_entry { table_id: 101 match { field_id: 1 ternary { value: '\\010' mask: '\\377\\377' } }"
            " action { action { action_id: 11 } } }"), "priority"),
    (entity("table_entry { table_id: 101 match { field_id: 1 ternary { value: '\\010' mask: '\\000' } }"
            " action { action { action_id: 11 } } priority: 1 }"), "mask 0"),
    (entity("table_entry { table_id: 100 match { field_id: 1 lpm { value: '\\001' prefix_len: 8 } }"
            " action { action { action_id: 10 } } }"), "missing parameter port"),
])
def test_entries_that_do_not_match_the_p4info_are_invalid_argument(bad, words):
    t = make()
    with pytest.raises(RuntimeStatus) as err:
        t.apply(INSERT, bad)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert words in err.value.message
    assert all(len(table) == 0 for table in t.state.iter_tables())


def test_ternary_optional_range_with_priority_and_direct_counter():
    t = make()
    t.apply(INSERT, entity("table_entry { table_id: 101 priority: 10"
                           " match { field_id: 1 ternary { value: '\\010\\000' mask: '\\377\\377' } }"
                           " match { field_id: 2 optional { value: '\\021' } }"
                           " match { field_id: 3 range { low: '\\001' high: '\\004' } }"
                           " action { action { action_id: 11 } } }"))
    table = t.state.table("c.acl")
    hit = table.lookup((0x0800, 17, 3))
    assert hit is not None and hit.priority == 10
    assert table.lookup((0x0800, 6, 3)) is None and table.lookup((0x0800, 17, 5)) is None
    hit.packets, hit.bytes = 3, 300
    [dc] = list(t.read(entity("direct_counter_entry { table_entry { table_id: 101 } }")))
    assert (dc.direct_counter_entry.data.packet_count, dc.direct_counter_entry.data.byte_count) == (3, 300)
    [te] = list(t.read(entity("table_entry { table_id: 101 counter_data { } }")))
    assert te.table_entry.counter_data.packet_count == 3
    assert te.table_entry.match[2].range.high == b"\x04"
    dc.direct_counter_entry.data.packet_count = 0
    t.apply(MODIFY, dc)
    assert hit.packets == 0 and hit.bytes == 300


def test_default_action_modify_and_reset():
    t = make()
    t.apply(MODIFY, entity("table_entry { table_id: 100 is_default_action: true"
                           " action { action { action_id: 10 params { param_id: 1 value: '\\007' } } } }"))
    assert t.state.get_default("c.lpm").params == {"port": 7}
    [read] = list(t.read(entity("table_entry { table_id: 100 is_default_action: true }")))
    assert read.table_entry.is_default_action and read.table_entry.action.action.action_id == 10
    assert code_of(t.apply, INSERT, entity("table_entry { table_id: 100 is_default_action: true"
                                           " action { action { action_id: 11 } } }")) == grpc.StatusCode.INVALID_ARGUMENT
    t.apply(MODIFY, entity("table_entry { table_id: 100 is_default_action: true }"))  # no action: reset
    assert t.state.get_default("c.lpm").action == "c.drop"


def test_counters_and_registers_wildcards_and_writes():
    t = make()
    t.state.counters["c.ports"].packets[2] = 5
    cells = list(t.read(entity("counter_entry { counter_id: 200 }")))
    assert [c.counter_entry.data.packet_count for c in cells] == [0, 0, 5, 0]
    assert len(list(t.read(entity("counter_entry { }")))) == 4  # counter_id 0: all counters
    t.apply(MODIFY, entity("counter_entry { counter_id: 200 index { index: 2 } data { packet_count: 1 byte_count: 9 } }"))
    assert t.state.counter_read("c.ports", 2) == (1, 9)
    t.apply(MODIFY, entity("register_entry { register_id: 400 index { index: 1 } data { bitstring: '\\377\\377' } }"))
    regs = list(t.read(entity("register_entry { register_id: 400 }")))
    assert [r.register_entry.data.bitstring for r in regs] == [b"\x00", b"\xff\xff", b"\x00"]
    assert code_of(t.apply, MODIFY, entity("register_entry { register_id: 400 index { index: 3 } data { bitstring: '\\001' } }")) \
        == grpc.StatusCode.OUT_OF_RANGE  # past the end: the spec's code, not INVALID_ARGUMENT
    assert code_of(t.apply, MODIFY, entity("counter_entry { counter_id: 200 index { index: 4 } }")) \
        == grpc.StatusCode.OUT_OF_RANGE
    assert code_of(lambda e: list(t.read(e)), entity("counter_entry { counter_id: 200 index { index: 4 } }")) \
        == grpc.StatusCode.OUT_OF_RANGE
    assert code_of(t.apply, MODIFY, entity("register_entry { register_id: 400 index { index: 0 }"
                                           " data { bitstring: '\\001\\000\\000' } }")) \
        == grpc.StatusCode.INVALID_ARGUMENT
    assert code_of(t.apply, INSERT, entity("register_entry { register_id: 400 index { index: 0 } data { bitstring: '\\001' } }")) \
        == grpc.StatusCode.INVALID_ARGUMENT
    t.apply(MODIFY, entity("register_entry { register_id: 400 data { bitstring: '\\011' } }"))  # no index: all cells
    assert t.state.registers["c.reg"].values == [9, 9, 9]


def test_multicast_and_clone_sessions():
    t = make()
    t.apply(INSERT, entity("packet_replication_engine_entry { multicast_group_entry { multicast_group_id: 1"
                           " replicas { egress_port: 1 instance: 1 } replicas { port: '\\002' instance: 1 } } }"))
    assert t.state.multicast_groups[1] == [(1, 1), (2, 1)]
    assert code_of(t.apply, INSERT, entity("packet_replication_engine_entry { multicast_group_entry {"
                                           " multicast_group_id: 1 } }")) == grpc.StatusCode.ALREADY_EXISTS
    t.apply(INSERT, entity("packet_replication_engine_entry { clone_session_entry { session_id: 5"
                           " replicas { egress_port: 3 } packet_length_bytes: 64 } }"))
    [group] = list(t.read(entity("packet_replication_engine_entry { multicast_group_entry { } }")))
    replicas = group.packet_replication_engine_entry.multicast_group_entry.replicas
    # each replica reads back in the field it was written in, so the read entity can be written back
    assert [r.WhichOneof("port_kind") for r in replicas] == ["egress_port", "port"]
    assert (replicas[0].egress_port, replicas[1].port) == (1, b"\x02")
    t.apply(MODIFY, group)
    assert list(t.read(entity("packet_replication_engine_entry { multicast_group_entry { } }"))) == [group]
    [clone] = list(t.read(entity("packet_replication_engine_entry { clone_session_entry { session_id: 5 } }")))
    assert clone.packet_replication_engine_entry.clone_session_entry.packet_length_bytes == 64
    assert clone.packet_replication_engine_entry.clone_session_entry.replicas[0].egress_port == 3
    t.apply(MODIFY, clone)
    t.apply(DELETE, entity("packet_replication_engine_entry { multicast_group_entry { multicast_group_id: 1 } }"))
    assert code_of(t.apply, DELETE, entity("packet_replication_engine_entry { multicast_group_entry {"
                                           " multicast_group_id: 1 } }")) == grpc.StatusCode.NOT_FOUND


def test_inverse_undoes_delete_with_counters():
    t = make()
    t.apply(INSERT, lpm_entry(b"\x0a\x00\x00\x00", 8))
    update = p4r.Update(type=DELETE, entity=lpm_entry(b"\x0a\x00\x00\x00", 8))
    undo = t.inverse(update)
    t.apply(update.type, update.entity)
    assert len(t.state.table("c.lpm")) == 0
    for kind, e in undo:
        t.apply(kind, e)
    assert t.state.table("c.lpm").lookup((0x0A010203,)).params == {"port": 2}


def test_read_of_an_absent_entry_is_empty_but_a_malformed_key_is_invalid():
    """A read request is a filter (spec, Read RPC): no match -> no entities, not NOT_FOUND."""
    t = make()
    t.apply(INSERT, lpm_entry(b"\x0a\x00\x01\x00", 24))
    present = entity("table_entry { table_id: 100 match { field_id: 1 lpm { value: '\\n\\000\\001\\000' prefix_len: 24 } } }")
    absent = entity("table_entry { table_id: 100 match { field_id: 1 lpm { value: '\\n\\000\\002\\000' prefix_len: 24 } } }")
    [found] = list(t.read(present))
    assert found.table_entry.match[0].lpm.prefix_len == 24
    assert list(t.read(absent)) == []
    assert list(t.read(entity("direct_counter_entry { table_entry { table_id: 101 match { field_id: 1"
                              " ternary { value: '\\010' mask: '\\377' } } priority: 3 } }"))) == []
    malformed = entity("table_entry { table_id: 100 match { field_id: 1 lpm { value: '\\n\\000\\002\\001' prefix_len: 24 } } }")
    assert code_of(lambda e: list(t.read(e)), malformed) == grpc.StatusCode.INVALID_ARGUMENT


def test_meter_cells_modify_read_and_reset():
    t = make()
    config = "config { cir: 10 cburst: 5 pir: 20 pburst: 10 }"
    t.apply(MODIFY, entity(f"meter_entry {{ meter_id: 500 index {{ index: 1 }} {config} }}"))
    assert t.state.meter_get("c.m", 1) == st.MeterConfig(10, 5, 20, 10)
    cells = list(t.read(entity("meter_entry { meter_id: 500 }")))  # index unset: every cell
    assert [c.meter_entry.HasField("config") for c in cells] == [False, True]
    assert cells[1] == entity(f"meter_entry {{ meter_id: 500 index {{ index: 1 }} {config} }}")
    t.apply(MODIFY, entity("meter_entry { meter_id: 500 index { index: 1 } }"))  # no config: back to unconfigured
    assert t.state.meter_get("c.m", 1) is None
    assert code_of(t.apply, INSERT, entity(f"meter_entry {{ meter_id: 500 index {{ index: 0 }} {config} }}")) \
        == grpc.StatusCode.INVALID_ARGUMENT  # cells exist already: MODIFY only
    assert code_of(t.apply, MODIFY, entity(f"meter_entry {{ meter_id: 500 index {{ index: 2 }} {config} }}")) \
        == grpc.StatusCode.OUT_OF_RANGE
    assert code_of(t.apply, MODIFY, entity("meter_entry { meter_id: 500 config { cir: 9 pir: 1 } }")) \
        == grpc.StatusCode.INVALID_ARGUMENT  # pir < cir
    assert t.state.meter_get("c.m", 0) is None


def test_direct_meter_config_through_table_entries_and_direct_meter_entries():
    t = make()
    config = "config { cir: 100 cburst: 10 pir: 200 pburst: 20 }"
    t.apply(INSERT, entity("table_entry { table_id: 102 match { field_id: 1 exact { value: '\\001' } }"
                           " action { action { action_id: 10 params { param_id: 1 value: '\\002' } } }"
                           " meter_config { cir: 1 cburst: 2 pir: 3 pburst: 4 } }"))
    t.apply(INSERT, entity("table_entry { table_id: 102 match { field_id: 1 exact { value: '\\002' } }"
                           " action { action { action_id: 10 params { param_id: 1 value: '\\002' } } } }"))
    plain, with_meter = (list(t.read(entity(f"table_entry {{ table_id: 102 {m} }}"))) for m in ("", "meter_config { }"))
    assert not any(e.table_entry.HasField("meter_config") for e in plain)  # only when the read asks for it
    assert [e.table_entry.meter_config.pir for e in with_meter] == [3, 0]
    t.apply(MODIFY, entity("direct_meter_entry { table_entry { table_id: 102 match { field_id: 1 exact { value: '\\002' } } }"
                           f" {config} }}"))
    cells = list(t.read(entity("direct_meter_entry { }")))  # every table with a direct meter
    assert [c.direct_meter_entry.config.cir for c in cells] == [1, 100]
    assert not cells[0].direct_meter_entry.table_entry.HasField("action")
    missing = entity("direct_meter_entry { table_entry { table_id: 102 match { field_id: 1 exact { value: '\\003' } } }"
                     f" {config} }}")
    assert code_of(t.apply, MODIFY, missing) == grpc.StatusCode.NOT_FOUND
    assert code_of(t.apply, MODIFY, entity(f"direct_meter_entry {{ table_entry {{ table_id: 100 }} {config} }}")) \
        == grpc.StatusCode.INVALID_ARGUMENT  # c.lpm has no direct meter


def test_wildcard_reads_of_kinds_without_objects_answer_nothing():
    t = make()
    for kind in ("action_profile_member", "action_profile_group", "value_set_entry", "extern_entry"):
        assert list(t.read(entity(f"{kind} {{ }}"))) == [], kind
    assert code_of(lambda e: list(t.read(e)), entity("value_set_entry { value_set_id: 7 }")) == grpc.StatusCode.INVALID_ARGUMENT
