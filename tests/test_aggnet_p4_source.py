"""aggnet.p4 as source: generated lane files are current, both variants load, the STF test passes."""
import importlib.util
import os
import shutil
import subprocess

import pytest

from p4target.frontend import load_program
from p4target.interp.schema import build_schema
from p4target.stf import run_stf_file

ROOT = os.path.join(os.path.dirname(__file__), "..")
P4SRC = os.path.join(ROOT, "p4src")
DATA = os.path.join(os.path.dirname(__file__), "data", "aggnet")


def gen_lanes():
    spec = importlib.util.spec_from_file_location("gen_lanes", os.path.join(P4SRC, "gen_lanes.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("lanes", [32, 64, 128])
def test_generated_lane_files_are_current(lanes):
    with open(os.path.join(P4SRC, f"aggnet_lanes{lanes}.p4")) as f:
        assert f.read() == gen_lanes().render(lanes), "run: python p4src/gen_lanes.py"


@pytest.mark.parametrize("name, lanes", [("aggnet.p4", 32), ("aggnet_l64.p4", 64), ("aggnet_l128.p4", 128)])
def test_program_declares_the_documented_control_plane(name, lanes):
    schema = build_schema(load_program(os.path.join(P4SRC, name)))
    assert set(schema.tables) == {"AggIngress.ipv4_lpm", "AggIngress.agg_job", "AggIngress.agg_child",
                                  "AggEgress.agg_host"}
    assert schema.registers["AggIngress.agg_values"].size == 1024 * 2 * lanes
    assert schema.registers["AggIngress.agg_bitmap"].bitwidth == 32
    per_job = {f"AggIngress.agg_{n}" for n in
               ("received", "aggregated", "completed", "duplicates", "retx_answered", "overflows")}
    assert per_job | {"AggIngress.port_rx", "AggEgress.port_tx"} == set(schema.counters)
    assert schema.counters["AggIngress.port_rx"].type == "packets_and_bytes"
    assert [p for p, _ in schema.actions["AggIngress.set_job"].params] == [
        "slot_base", "slot_count", "children", "aggregate", "is_root", "parent_port", "mcast_grp"]


def test_stf_star_of_two():
    result = run_stf_file(os.path.join(P4SRC, "aggnet.p4"), os.path.join(DATA, "star2.stf"))
    assert result.failures == [] and (result.packets_in, result.packets_out) == (4, 3)


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not on PATH")
@pytest.mark.parametrize("name", ["aggnet.p4", "aggnet_l64.p4", "aggnet_l128.p4"])
def test_p4c_bmv2_accepts_it(name, tmp_path):
    out = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path),
                          os.path.join(P4SRC, name)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


def test_wire_constants_match_the_host_codec():
    from hosts import codec

    with open(os.path.join(P4SRC, "aggnet.p4")) as f:
        source = f.read()
    assert f"const bit<16> AGG_PORT = {codec.AGG_PORT};" in source
    assert "#define AGG_LANES 32" in source and "#define AGG_VALUE_BITS 1024" in source
