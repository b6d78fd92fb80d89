"""The parser unroller (p4target/frontend/passes/unroll.py): with p4c's --loopsUnroll in the source, a parser
loop over a header stack at a variable index becomes one state per index value, as p4c writes it.

Behaviour against simple_switch on p4c's JSON: tests/data/stf/parser_unroll.stf (test_bmv2_differential.py).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from p4target.errors import P4Error
from p4target.frontend import ir, load_source
from p4target.frontend.passes.unroll import MAX_STATES
from p4target.frontend.passes.walk import walk
from p4target.load import pipeline
from p4target.lowered.from_ir import lower_program

REPO = Path(__file__).resolve().parent.parent

TEMPLATE = """#include <core.p4>
#include <v1model.p4>
%(option)s
header h_t { bit<8> v; }
struct H { h_t first; h_t[3] s; h_t after; }
struct M { bit<32> n; }
parser P(packet_in pk, out H hdr, inout M meta, inout standard_metadata_t sm) {
    %(locals)s
    state start { pk.extract(hdr.first); %(init)s transition loop; }
    state loop {
        %(loop)s
        transition select(%(key)s) { 0: done; default: loop; }
    }
    state done { pk.extract(hdr.after); transition accept; }
}
control V(inout H hdr, inout M meta) { apply { } }
control I(inout H hdr, inout M meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout H hdr, inout M meta, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M meta) { apply { } }
control D(packet_out pk, in H hdr) { apply { pk.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
OPTION = '@command_line("--loopsUnroll")'
LOCAL_LOOP = dict(locals="int<32> i;", init="i = 0;", loop="pk.extract(hdr.s[i]); i = (int<32>)((int)i + 1);",
                  key="hdr.s[i - 1].v")


def load(option: str = OPTION, **parts: str) -> ir.Program:
    return load_source(TEMPLATE % dict(LOCAL_LOOP, option=option, **parts), "t.p4")


def extracts(state: ir.ParserState) -> list[str]:
    """What each extract in the state writes, as P4 text (`hdr.s[1]`)."""
    def text(e: ir.Expr) -> str:
        if isinstance(e, ir.ArrayIndex):
            return f"{text(e.expr)}[{e.index.value if isinstance(e.index, ir.Constant) else '?'}]"
        return f"{text(e.expr)}.{e.member}" if isinstance(e, ir.Member) else getattr(e, "name", "?")
    return [text(n.args[0]) for n in walk(state.body) if isinstance(n, ir.ExternMethodCall) and n.method == "extract"]


def test_one_copy_per_index_value_with_constant_indexes():
    """p4c's shape: loop, loop1, loop2 extract s[0], s[1], s[2]; loop3 (index 3) only goes to stateOutOfBound;
    `done`, where the index is no longer read, is one state; `(int)i` counted 0, 1, 2 while i is still written
    with BMv2's value (1)."""
    states = load().parsers["P"].states
    assert list(states) == ["start", "loop", "done", "loop1", "loop2", "loop3", "stateOutOfBound"]
    assert [extracts(states[n]) for n in ("loop", "loop1", "loop2", "loop3")] == [["hdr.s[0]"], ["hdr.s[1]"], ["hdr.s[2]"], []]
    loop1 = states["loop1"]
    assert isinstance(loop1.transition, ir.SelectTransition)
    key = loop1.transition.keys[0]
    assert isinstance(key, ir.Member) and isinstance(key.expr, ir.ArrayIndex) and key.expr.index.value == 1
    assert [c.next for c in loop1.transition.cases] == ["done", "loop2"]
    assign = loop1.body[1]
    assert isinstance(assign, ir.Assign) and isinstance(assign.rhs, ir.Constant) and assign.rhs.value == 1
    loop3 = states["loop3"]
    assert loop3.body == [] and isinstance(loop3.transition, ir.DirectTransition) and loop3.transition.next == "stateOutOfBound"
    verify = states["stateOutOfBound"].body[0]
    assert isinstance(verify, ir.MethodCallStmt) and isinstance(verify.call, ir.ExternFunctionCall)
    assert [getattr(a, "member", getattr(a, "value", None)) for a in verify.call.args] == [False, "StackOutOfBounds"]


def test_a_struct_field_index_unrolls_and_runs():
    """p4c's interpreter knows a metadata field it set (meta.n = 0) as well as a local; past the stack the packet
    still leaves, with the parser error and what was extracted before it."""
    program = load(locals="", init="meta.n = 0;", loop="pk.extract(hdr.s[meta.n]); meta.n = meta.n + 1;",
                   key="hdr.s[meta.n - 1].v")
    states = program.parsers["P"].states
    assert [extracts(states[n]) for n in ("loop", "loop1", "loop2", "done")] == [["hdr.s[0]"], ["hdr.s[1]"], ["hdr.s[2]"], ["hdr.after"]]
    switch = pipeline(program, "python")
    assert switch.process(0, bytes([9, 1, 0, 7])) == [(1, bytes([9, 1, 0, 7]))]
    assert switch.process(0, bytes([9, 1, 2, 3, 4, 5])) == [(1, bytes([9, 1, 2, 3, 4, 5]))]


def test_parsers_stay_as_they_are_without_the_option_or_a_variable_index():
    """Without --loopsUnroll the extract stays at a run-time index, which BMv2 lacks: refused at its line. With it,
    a loop over `.next` (BMv2 runs it as it is) is left alone."""
    with pytest.raises(P4Error) as e:
        lower_program(load(option=""))
    assert e.value.line == 11 and "run-time index" in str(e.value)
    states = load(locals="", init="", loop="pk.extract(hdr.s.next);", key="hdr.s.last.v").parsers["P"].states
    assert list(states) == ["start", "loop", "done"]


def test_an_index_that_stays_unknown_keeps_its_error():
    with pytest.raises(P4Error) as e:
        lower_program(load(init="i = (int<32>)(bit<32>)hdr.first.v;"))
    assert e.value.line == 11 and "run-time index" in str(e.value)


def test_an_index_taking_ever_new_values_is_refused_at_its_state():
    """i grows without end while i & 1 stays in the stack: one more copy per value, until the bound."""
    with pytest.raises(P4Error) as e:
        load(locals="bit<32> i;", loop="pk.extract(hdr.s[i & 1]); i = i + 1;", key="hdr.s[(i - 1) & 1].v")
    assert e.value.line == 10 and f"more than {MAX_STATES} states" in str(e.value)


def test_dump_after_unroll_shows_the_copies():
    """`aggnet p4 compile --dump-after unroll`, as a user inspects the pass."""
    program = REPO / "tests" / "data" / "stf" / "parser_unroll.p4"
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "aggnet"), "p4", "compile", str(program), "--dump-after", "unroll"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for n in range(3):
        assert f"pkt.extract<hop_t>(hdr.hops[32w{n}]);" in proc.stdout
    assert "state parse_hop3 {\n        transition stateOutOfBound;\n    }" in proc.stdout


def test_an_index_updated_before_the_extract():
    """The state reads i in `i = i + 1` before the extract: each pass through it is a copy of its own."""
    states = load(init="i = -1;", loop="i = i + 1; pk.extract(hdr.s[i]);", key="hdr.s[i].v").parsers["P"].states
    assert [extracts(states[n]) for n in ("loop", "loop1", "loop2", "loop3")] == [["hdr.s[0]"], ["hdr.s[1]"], ["hdr.s[2]"], []]
