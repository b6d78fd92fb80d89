"""P4Info built from real programs: equal to p4c's published output, and complete for v1model.

tests/data/p4info/basic_routing.p4 has the control-plane surface of p4c's
testdata/p4_16_samples/basic_routing-bmv2.p4; basic_routing.p4info.txtpb is the P4Info
p4c publishes for it (testdata/p4_16_samples_outputs). control_plane.p4 has one of every
object kind v1model puts in P4Info.
"""
import os
import subprocess
import sys

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from p4target.errors import P4Error
from p4target.frontend import load_program, load_source
from p4target.p4info import (
    ACTION,
    CONTROLLER_HEADER,
    COUNTER,
    DIGEST,
    DIRECT_COUNTER,
    DIRECT_METER,
    METER,
    REGISTER,
    TABLE,
    P4InfoIndex,
    build_p4info,
    jenkins_hash,
    p4info_text,
)

DATA = os.path.join(os.path.dirname(__file__), "data", "p4info")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hashed(prefix: int, name: str) -> int:
    return (prefix << 24) | (jenkins_hash(name) & 0xFFFFFF)


@pytest.fixture(scope="module")
def control_plane():
    return build_p4info(load_program(os.path.join(DATA, "control_plane.p4")))


def test_basic_routing_equals_p4c_published_p4info():
    info = build_p4info(load_program(os.path.join(DATA, "basic_routing.p4")))
    with open(os.path.join(DATA, "basic_routing.p4info.txtpb")) as f:
        expected = text_format.Parse(f.read(), p4i.P4Info())
    assert text_format.MessageToString(info) == text_format.MessageToString(expected)


def test_text_output_round_trips():
    info = build_p4info(load_program(os.path.join(DATA, "basic_routing.p4")))
    text = p4info_text(info)
    assert text.startswith("# proto-file: p4/config/v1/p4info.proto\n")
    assert text_format.Parse(text, p4i.P4Info()) == info


def test_tables(control_plane):
    idx = P4InfoIndex(control_plane)
    assert [t.preamble.name for t in control_plane.tables] == [
        "CpIngress.dmac", "CpIngress.smac", "CpIngress.ports", "CpIngress.policer",
        "CpEgress.eg_stats"]  # @hidden and never applied tables left out, as p4c does
    dmac = idx.table("dmac")
    assert dmac.preamble.id == (TABLE << 24) | 100
    assert [(m.id, m.name, m.bitwidth, p4i.MatchField.MatchType.Name(m.match_type)) for m in dmac.match_fields] == [
        (1, "dst", 48, "EXACT"), (2, "hdr.ethernet.etherType", 16, "TERNARY")]
    refs = [(idx.name(r.id), p4i.ActionRef.Scope.Name(r.scope), list(r.annotations)) for r in dmac.action_refs]
    assert refs == [("CpIngress.forward", "TABLE_AND_DEFAULT", []),
                    ("global_flood", "TABLE_ONLY", ["@tableonly"]),
                    ("CpIngress.drop", "DEFAULT_ONLY", ["@defaultonly"])]
    assert dmac.const_default_action_id == idx.action("CpIngress.drop").preamble.id
    assert list(dmac.direct_resource_ids) == [idx.direct_counter("mac_hits").preamble.id]
    assert dmac.size == 256 and not dmac.is_const_table

    smac = idx.table("CpIngress.smac")
    assert [idx.name(r.id) for r in smac.action_refs] == ["CpIngress.learn", "NoAction"]  # no implicit extra
    assert smac.size == 1024 and smac.const_default_action_id == 0
    ports = idx.table("ports")
    assert ports.is_const_table and ports.has_initial_entries


def test_actions(control_plane):
    assert [a.preamble.name for a in control_plane.actions] == [
        "NoAction", "CpIngress.drop", "CpIngress.forward", "CpIngress.learn", "global_flood", "CpIngress.police",
        "CpEgress.count_it"]
    idx = P4InfoIndex(control_plane)
    forward = idx.action("forward")
    assert forward.preamble.id == 0x01000042
    # p4c: @id wins; the others take their position (tag is 2nd), moved past ids already taken
    assert [(p.id, p.name, p.bitwidth) for p in forward.params] == [(5, "port", 9), (2, "tag", 8)]
    assert idx.param("forward", "tag").id == 2 and idx.param(0x01000042, 5).name == "port"
    assert idx.action("global_flood").preamble.id == hashed(ACTION, "global_flood")
    assert list(idx.action("NoAction").preamble.annotations) == ['@noWarn("unused")']


def test_externs(control_plane):
    idx = P4InfoIndex(control_plane)
    unit = p4i.CounterSpec.Unit.Name
    assert [(c.preamble.name, unit(c.spec.unit), c.size) for c in control_plane.counters] == [
        ("CpIngress.port_packets", "PACKETS", 64), ("CpIngress.port_bytes", "BYTES", 64)]
    assert idx.counter("port_bytes").preamble.doc.brief == "bytes per port"
    assert idx.counter("port_packets").preamble.id == hashed(COUNTER, "CpIngress.port_packets")
    (dc,) = control_plane.direct_counters
    assert (dc.preamble.name, unit(dc.spec.unit), dc.direct_table_id) == (
        "CpIngress.mac_hits", "BOTH", (TABLE << 24) | 100)
    assert dc.preamble.id == hashed(DIRECT_COUNTER, "CpIngress.mac_hits")
    regs = {r.preamble.name: r for r in control_plane.registers}
    assert set(regs) == {"CpIngress.signed_reg", "CpEgress.seen"}
    assert regs["CpIngress.signed_reg"].type_spec.bitstring.int.bitwidth == 16
    assert regs["CpIngress.signed_reg"].size == 128
    assert regs["CpEgress.seen"].type_spec.bitstring.bit.bitwidth == 32
    assert regs["CpEgress.seen"].preamble.id == hashed(REGISTER, "CpEgress.seen")
    meter_unit = p4i.MeterSpec.Unit.Name
    (m,) = control_plane.meters
    assert (m.preamble.name, meter_unit(m.spec.unit), m.size) == ("CpIngress.rate", "BYTES", 32)
    assert m.preamble.id == hashed(METER, "CpIngress.rate")
    (dm,) = control_plane.direct_meters
    policer = idx.table("policer")
    assert (dm.preamble.name, meter_unit(dm.spec.unit), dm.direct_table_id) == (
        "CpIngress.policer_meter", "PACKETS", policer.preamble.id)
    assert list(policer.direct_resource_ids) == [hashed(DIRECT_METER, "CpIngress.policer_meter")]


def test_digest_and_type_info(control_plane):
    (digest,) = control_plane.digests
    assert (digest.preamble.name, digest.preamble.alias) == ("learn_t", "learn_t")
    assert digest.preamble.id == hashed(DIGEST, "learn_t")
    assert digest.type_spec.struct.name == "learn_t"
    members = control_plane.type_info.structs["learn_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("srcAddr", 48), ("port", 9)]


def test_controller_packet_metadata(control_plane):
    pin, pout = control_plane.controller_packet_metadata
    assert (pin.preamble.name, pin.preamble.alias) == ("packet_in", "packet_in")
    assert pin.preamble.id == hashed(CONTROLLER_HEADER, "cpu_in_h")  # hash of the type name, as p4c
    assert list(pin.preamble.annotations) == ['@controller_header("packet_in")']
    assert [(m.id, m.name, m.bitwidth) for m in pin.metadata] == [(1, "ingress_port", 9), (2, "_pad", 7)]
    assert pout.preamble.name == "packet_out"
    assert [(m.id, m.name) for m in pout.metadata] == [(7, "egress_port"), (2, "_pad")]
    assert P4InfoIndex(control_plane).controller_metadata("packet_out") is pout


def test_index_unknown_names_are_clear_errors(control_plane):
    idx = P4InfoIndex(control_plane)
    with pytest.raises(KeyError) as exc:
        idx.table("nosuch")
    assert str(exc.value) == "P4Info has no table 'nosuch'"
    with pytest.raises(KeyError, match="has no match field 'x'"):
        idx.match_field("dmac", "x")
    assert idx.match_field("CpIngress.dmac", "dst").id == 1


def test_index_find_and_direct_counter_of(control_plane):
    idx = P4InfoIndex(control_plane)
    dmac = idx.table("CpIngress.dmac")
    assert idx.find("tables", dmac.preamble.id) is dmac and idx.find("tables", "dmac") is dmac
    assert idx.find("tables", 12345) is None and idx.find("actions", dmac.preamble.id) is None
    assert idx.direct_counter_of(dmac.preamble.id) is idx.direct_counter("CpIngress.mac_hits")
    assert idx.direct_counter_of("dmac") is idx.direct_counter_of(dmac.preamble.id)
    assert idx.direct_counter_of("smac") is None
    with pytest.raises(KeyError, match="P4Info has no table 'nosuch'"):
        idx.direct_counter_of("nosuch")


def test_index_full_names_win_over_aliases():
    """A hand-written P4Info may give one action an alias that is another action's full name."""
    info = text_format.Parse('actions { preamble { id: 1 name: "I.a" alias: "b" } } '
                             'actions { preamble { id: 2 name: "b" alias: "bb" } }', p4i.P4Info())
    idx = P4InfoIndex(info)
    assert idx.action("b").preamble.id == 2 and idx.action("I.a").preamble.id == 1
    assert idx.action("bb").preamble.id == 2


def test_duplicate_id_is_a_p4_error():
    src = """#include <core.p4>
#include <v1model.p4>
struct h_t { } struct m_t { }
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t s) { state start { transition accept; } }
control V(inout h_t h, inout m_t m) { apply { } }
control I(inout h_t h, inout m_t m, inout standard_metadata_t s) {
    @id(3) action a() { }
    @id(3) action b() { }
    table t { actions = { a; b; } default_action = a(); }
    apply { t.apply(); }
}
control E(inout h_t h, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout h_t h, inout m_t m) { apply { } }
control D(packet_out p, in h_t h) { apply { } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
    with pytest.raises(P4Error, match=r"dup.p4:8: error: @id 3 is assigned to multiple declarations"):
        build_p4info(load_source(src, "dup.p4"))


def run_aggnet(*args, cwd=None):
    exe = os.path.join(ROOT, ".venv", "bin", "aggnet")
    return subprocess.run([exe, *args], capture_output=True, text=True, cwd=cwd or ROOT, timeout=120)


def test_cli_compile_writes_p4info(tmp_path):
    out = tmp_path / "routing.p4info.txtpb"
    proc = run_aggnet("p4", "compile", os.path.join(DATA, "basic_routing.p4"), "--p4info", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "6 tables, 8 actions" in proc.stdout
    written = text_format.Parse(out.read_text(), p4i.P4Info())
    assert P4InfoIndex(written).table("ipv4_fib_lpm").preamble.id == 42875950


def test_cli_compile_bad_program_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <v1model.p4>\ncontrol c() { apply { x = 1; } }\n")
    proc = run_aggnet("p4", "compile", str(bad), "--p4info", str(tmp_path / "o.txtpb"))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(str(bad) + ":") and ": error: " in lines[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "o.txtpb").exists()


def test_import_is_cheap():
    code = "import sys, p4target.cli, p4target.p4info, p4target.stf; print('google.protobuf' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.stdout.strip() == "False", proc.stderr


def test_tutorial_basic_shape_reproduces_published_ids():
    """lpm_forward.p4 has the names of p4lang/tutorials basic.p4; its published P4Info lists
    MyIngress.ipv4_lpm = 37375156, MyIngress.ipv4_forward = 28792405, MyIngress.drop = 25652968."""
    stf_data = os.path.join(os.path.dirname(__file__), "data", "stf")
    info = build_p4info(load_program(os.path.join(stf_data, "lpm_forward.p4")))
    (table,) = info.tables
    assert (table.preamble.id, table.preamble.name, table.preamble.alias) == (37375156, "MyIngress.ipv4_lpm", "ipv4_lpm")
    assert [(m.id, m.name, m.bitwidth, m.match_type) for m in table.match_fields] == [
        (1, "hdr.ipv4.dstAddr", 32, p4i.MatchField.LPM)]
    assert [r.id for r in table.action_refs] == [28792405, 25652968, 21257015]
    assert table.size == 1024 and table.const_default_action_id == 0
    assert [(a.preamble.id, a.preamble.name) for a in info.actions] == [
        (21257015, "NoAction"), (25652968, "MyIngress.drop"), (28792405, "MyIngress.ipv4_forward")]
    assert [(p.id, p.name, p.bitwidth) for p in info.actions[2].params] == [(1, "dstAddr", 48), (2, "port", 9)]
