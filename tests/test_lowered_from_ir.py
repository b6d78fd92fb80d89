"""Our front end's programs lowered into the lowered form (p4target/lowered/from_ir.py), as p4c lowers them.

- Every corpus program (../shared/p4c-corpus) passes its STF test through our lowering on the engine that
  runs p4c's JSON, and again after a round trip through BMv2 JSON (`aggnet p4 compile --bmv2-json`, read
  back by the loader that reads p4c's).
- What the lowering does not handle yet is one line naming the construct and where it is, exit 2.
(tests/test_bmv2_differential.py runs the lowering's JSON on simple_switch itself.)
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import corpus
import pytest

from p4target import load
from p4target.errors import P4Error
from p4target.frontend import load_program
from p4target.lowered import bmv2_json, to_json
from p4target.lowered.from_ir import lower_program
from p4target.stf import StfRunner, parse_stf

REPO = Path(__file__).resolve().parent.parent
CORPUS = corpus.CORPUS


def run_stf(program, name: str) -> None:
    stf = CORPUS / f"{name}.stf"
    result = StfRunner(load.pipeline(program, "python"), str(stf)).run(parse_stf(stf.read_text(), str(stf)))
    assert result.passed, result.report(name)


@pytest.mark.parametrize("name", corpus.params())
def test_corpus_program_passes_through_our_lowering(name):
    lowered = lower_program(load_program(str(CORPUS / f"{name}.p4")))
    run_stf(lowered, name)
    run_stf(bmv2_json.loads(to_json.dumps(lowered), f"{name}.json"), name)  # and as BMv2 JSON, read back


def test_compile_writes_bmv2_json_the_loader_reads(tmp_path):
    out = tmp_path / "aggnet.json"
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "compile", str(REPO / "p4src" / "aggnet.p4"),
                           "--bmv2-json", str(out)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "BMv2 JSON written" in done.stdout, done.stdout + done.stderr
    doc = json.loads(out.read_text())
    assert doc["__meta__"]["version"][0] == 2
    tables = {t["name"] for pl in doc["pipelines"] for t in pl["tables"]}
    assert {"AggIngress.agg_job", "AggIngress.ipv4_lpm"} <= tables
    program = bmv2_json.load_file(str(out))
    assert {r.name for r in program.register_arrays} >= {"AggIngress.agg_values", "AggIngress.agg_bitmap"}


RUNTIME_LOOP = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct H { h_t h; }
struct M { bit<8> x; }
parser P(packet_in pk, out H hdr, inout M m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
control V(inout H hdr, inout M m) { apply {} }
control I(inout H hdr, inout M m, inout standard_metadata_t sm) {
    apply {
        for (bit<8> i = 0; i < hdr.h.a; i = i + 1) { m.x = m.x + i; }
    }
}
control E(inout H hdr, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H hdr, inout M m) { apply {} }
control D(packet_out pk, in H hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_what_is_not_lowered_yet_is_one_line_naming_it(tmp_path):
    program = tmp_path / "runtime_loop.p4"  # p4c 1.2.5.16 compiles it (its JSON runs the body once); we lower such
    # a loop in an action only
    program.write_text(RUNTIME_LOOP)
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "compile", str(program), "--bmv2-json",
                           str(tmp_path / "out.json")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines() == [
        f"{program}:13:28: error: unsupported: for loop condition i < hdr.h.a is not known at compile time (outside "
        "an action BMv2 runs no loops: only loops with a constant trip count unroll)"]
    assert not (tmp_path / "out.json").exists()


def test_reading_a_stacks_next_element_is_refused_at_its_line(tmp_path):
    """p4c refuses `transition select(hs.next.a)` (next field read); BMv2's JSON cannot say it either."""
    program = tmp_path / "next_read.p4"
    program.write_text(RUNTIME_LOOP.replace("struct H { h_t h; }", "struct H { h_t h; h_t[2] hs; }").replace(
        "for (bit<8> i = 0; i < hdr.h.a; i = i + 1) { m.x = m.x + i; }", "m.x = 1;").replace(
        "state start { pk.extract(hdr.h); transition accept; }",
        "state start { pk.extract(hdr.hs.next); transition select(hdr.hs.next.a) { default: accept; } }"))
    with pytest.raises(P4Error, match=r"next_read.p4:8:\d+: error: next field read"):
        lower_program(load_program(str(program)))
