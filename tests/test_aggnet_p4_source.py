"""aggnet.p4 as source: generated files are current, every lane count loads and matches the wire
format, p4c's BMv2 back end accepts every program without warnings, the STF test passes."""
import importlib.util
import os
import shutil
import subprocess

import pytest

from p4target.frontend import load_program
from p4target.lowered.from_ir import lower_program
from p4target.lowered.schema import build_schema
from p4target.stf import run_stf_file
from protocol import wire

ROOT = os.path.join(os.path.dirname(__file__), "..")
P4SRC = os.path.join(ROOT, "p4src")
DATA = os.path.join(os.path.dirname(__file__), "data", "aggnet")


def gen_lanes():
    spec = importlib.util.spec_from_file_location("gen_lanes", os.path.join(P4SRC, "gen_lanes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_current():
    for name, text in gen_lanes().generated().items():
        with open(os.path.join(P4SRC, name)) as f:
            assert f.read() == text, f"{name} is stale: run .venv/bin/python p4src/gen_lanes.py"


@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_program_declares_the_wire_format_and_the_documented_control_plane(lanes):
    program = load_program(os.path.join(P4SRC, wire.program_name(lanes)))
    agg = program.types["agg_t"]
    assert [(f.name, f.type.width) for f in agg.fields] == wire.p4_fields()
    values = program.types["agg_values_t"]
    assert [(f.name, f.type.width) for f in values.fields] == [(wire.lane_field(k), 32) for k in range(lanes)]
    assert program.constants["AGG_PORT"].value.value == wire.AGG_PORT
    schema = build_schema(lower_program(program))
    control_plane_tables = {t for t in schema.tables if not t.startswith("tbl_")}  # tbl_*: the lowering's keyless ones
    assert control_plane_tables == {"AggIngress.ipv4_lpm", "AggIngress.agg_job", "AggIngress.agg_child",
                                    "AggEgress.agg_host", "AggEgress.ecn_mark"}
    assert schema.registers["AggIngress.agg_values"].size == 1024 * 2 * lanes
    assert schema.registers["AggIngress.agg_bitmap"].bitwidth == 32
    per_job = {f"AggIngress.agg_{n}" for n in
               ("received", "aggregated", "completed", "duplicates", "retx_answered", "overflows", "spilled")}
    assert per_job | {"AggIngress.port_rx", "AggEgress.port_tx", "AggEgress.ecn_marked"} == set(schema.counters)
    assert schema.counters["AggIngress.port_rx"].type == "packets_and_bytes"
    assert [p for p, _ in schema.actions["AggIngress.set_job"].params] == [
        "slot_base", "slot_count", "children", "aggregate", "is_root", "parent_port", "mcast_grp"]
    assert [p for p, _ in schema.actions["AggIngress.set_shared_job"].params] == [
        "slot_base", "slot_count", "children", "mcast_grp"]


def test_the_largest_packet_fills_the_mtu():
    assert 20 + 8 + wire.packet_bytes(max(wire.LANE_COUNTS)) <= wire.IPV4_MTU
    assert 20 + 8 + wire.packet_bytes(max(wire.LANE_COUNTS)) + wire.LANE_BYTES > wire.IPV4_MTU


def test_an_unsupported_lane_count_is_a_one_line_error(tmp_path):
    prog = tmp_path / "aggnet_l48.p4"
    prog.write_text(f'#define AGG_LANES 48\n#include "{os.path.abspath(os.path.join(P4SRC, "aggnet.p4"))}"\n')
    out = subprocess.run([os.path.join(ROOT, ".venv", "bin", "aggnet"), "p4", "compile", str(prog),
                          "--p4info", str(tmp_path / "x.txtpb")], capture_output=True, text=True)
    assert out.returncode == 2
    assert out.stderr.strip().endswith('error: #error "AGG_LANES must be one of 32, 64, 128, 256, 364"')
    assert len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("engine", ["python", "native"])
def test_stf_star_of_two(engine):
    result = run_stf_file(os.path.join(P4SRC, "aggnet.p4"), os.path.join(DATA, "star2.stf"), engine)
    assert result.failures == [] and (result.packets_in, result.packets_out) == (4, 3)


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not on PATH (source /opt/p4ref/env.sh)")
@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_p4c_bmv2_accepts_it_without_warnings(lanes, p4c_compiler):
    output = p4c_compiler.compiled(os.path.join(P4SRC, wire.program_name(lanes))).output  # CompileError if refused
    assert "warning" not in output.lower(), output
