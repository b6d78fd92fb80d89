"""The lowering passes (p4target/frontend/passes): each construct they remove, checked on the
lowered IR and by running packets through the result.

Programs share one shape: a 4-byte header h {a, b, c, d} is parsed, ingress runs the code
under test and sends the packet to port 1, the deparser emits h.
"""
from __future__ import annotations

import pytest

from p4target import state as st
from p4target.errors import P4Error
from p4target.frontend import ir, load_source
from p4target.frontend.passes.walk import walk
from p4target.load import pipeline
from p4target.p4info import build_p4info

TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; bit<8> c; bit<8> d; }
struct H { h_t h; h_t g; }
struct M { bit<8> m; }
%(decls)s
parser P(packet_in pk, out H hdr, inout M meta, inout standard_metadata_t sm) {
    %(parser_locals)s
    %(states)s
}
control V(inout H hdr, inout M meta) { apply { } }
control I(inout H hdr, inout M meta, inout standard_metadata_t sm) {
    %(locals)s
    apply { sm.egress_spec = 1; %(apply)s }
}
control E(inout H hdr, inout M meta, inout standard_metadata_t sm) { apply { } }
control C(inout H hdr, inout M meta) { apply { } }
control D(packet_out pk, in H hdr) { apply { pk.emit(hdr.h); pk.emit(hdr.g); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
START = "state start { pk.extract(hdr.h); transition accept; }"


def load(decls: str = "", apply: str = "", locals_: str = "", states: str = START, parser_locals: str = "") -> ir.Program:
    return load_source(TEMPLATE % dict(decls=decls, apply=apply, locals=locals_, states=states,
                                       parser_locals=parser_locals), "t.p4")


def run(program: ir.Program, data: bytes) -> bytes:
    out = pipeline(program, "python").process(0, data)
    assert len(out) == 1
    return out[0][1]


def lowered_nodes(program: ir.Program) -> list:
    roots = [a.body for a in program.all_actions()] + [c.body for c in program.controls.values()]
    roots += [list(p.states.values()) for p in program.parsers.values()]
    return list(walk(roots))


INC = "bit<8> inc(inout bit<8> x) { x = x + 1; return x; }"


def test_function_calls_are_inlined_and_gone():
    p = load(INC, "hdr.h.a = inc(hdr.h.b);")
    assert not any(isinstance(n, ir.FunctionCall) for n in lowered_nodes(p))
    assert p.functions == {}
    assert run(p, bytes([0, 5, 0, 0])) == bytes([6, 6, 0, 0])


@pytest.mark.parametrize("expr, expected", [
    ("inc(hdr.h.b) + hdr.h.b", 6 + 6),  # the call runs first: the read sees its copy-out
    ("hdr.h.b + inc(hdr.h.b)", 5 + 6),  # the read comes first: saved before the call
])
def test_operands_are_evaluated_left_to_right(expr, expected):
    p = load(INC, f"hdr.h.a = {expr};")
    assert run(p, bytes([0, 5, 0, 0]))[0] == expected


@pytest.mark.parametrize("a, called", [(0, True), (1, False)])
def test_short_circuit_calls_only_when_needed(a, called):
    p = load(INC, "if (hdr.h.a == 0 && inc(hdr.h.c) == 1) { hdr.h.d = 7; }")
    out = run(p, bytes([a, 0, 0, 0]))
    assert out[2] == (1 if called else 0)
    assert out[3] == (7 if called else 0)


def test_mux_evaluates_one_branch():
    p = load(INC, "hdr.h.a = hdr.h.b == 0 ? inc(hdr.h.c) : inc(hdr.h.d);")
    assert run(p, bytes([0, 0, 3, 9])) == bytes([4, 0, 4, 9])
    assert run(p, bytes([0, 1, 3, 9])) == bytes([10, 1, 3, 10])


def test_returns_in_nested_branches():
    f = """bit<8> pick(in bit<8> x) {
        if (x > 10) { if (x > 20) { return 3; } return 2; }
        return 1;
    }"""
    p = load(f, "hdr.h.a = pick(hdr.h.b);")
    assert [run(p, bytes([0, b, 0, 0]))[0] for b in (5, 15, 25)] == [1, 2, 3]


def test_function_returning_a_header_and_out_parameter():
    f = """h_t mk(out bit<8> o) { o = 9; return { 1, 2, 3, 4 }; }"""
    p = load(f, "hdr.g = mk(hdr.h.d);")
    assert run(p, bytes([0, 0, 0, 0])) == bytes([0, 0, 0, 9, 1, 2, 3, 4])


SUB = """
control Sub(inout h_t x, inout bit<8> y)(bit<8> k) {
    action set(bit<8> v) { x.c = v; }
    table t { key = { x.a : exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply { y = y + k; t.apply(); if (y > 100) { return; } x.d = y; }
}
"""


def test_sub_control_objects_get_p4c_names():
    p = load(SUB, "sub.apply(hdr.h, hdr.h.b);", "Sub(8w3) sub;")
    ingress = p.main.ingress
    assert [t.control_plane_name for t in ingress.tables.values()] == ["I.sub.t"]
    assert "I.sub.set" in [a.control_plane_name for a in ingress.actions.values()]
    assert not any(isinstance(d, ir.BlockInstance) for d in ingress.locals)
    assert not any(isinstance(n, (ir.ApplyCall, ir.Return)) for n in walk(ingress.body))


def test_nested_sub_controls_keep_same_named_actions_apart():
    """Two blocks inlined into a middle one both declare `miss`: each stays an action of its own, as
    p4c keeps `Mid.a.miss` and `Mid.b.miss` (switch_p4_16.p4's shape crashed P4Info once)."""
    decls = """
    control A(inout bit<8> x) { action miss() { x = 1; } table t { key = { x: exact; } actions = { miss; } }
                                apply { t.apply(); } }
    control B(inout bit<8> x) { action miss() { x = 2; } table t { key = { x: exact; } actions = { miss; } }
                                apply { t.apply(); } }
    control Mid(inout H hdr) { A() a; B() b; apply { a.apply(hdr.h.a); b.apply(hdr.h.b); } }
    """
    p = load(decls, "mid.apply(hdr);", "Mid() mid;")
    actions = {a.control_plane_name for a in p.main.ingress.actions.values()}
    assert {"I.mid.a.miss", "I.mid.b.miss"} <= actions
    assert {a.preamble.name for a in build_p4info(p).actions} >= {"I.mid.a.miss", "I.mid.b.miss"}


def test_sub_control_runs_with_constructor_argument_and_return():
    p = load(SUB, "sub.apply(hdr.h, hdr.h.b);", "Sub(8w3) sub;")
    pipe = pipeline(p, "python")
    pipe.state.tables["I.sub.t"].insert(st.TableEntry({"x.a": st.Exact(1)}, "I.sub.set", {"v": 0x55}))
    assert pipe.process(0, bytes([0, 5, 0, 0]))[0][1] == bytes([0, 8, 0, 8])  # y += 3; d = y
    assert pipe.process(0, bytes([1, 5, 0, 0]))[0][1] == bytes([1, 8, 0x55, 8])  # the table hit
    assert pipe.process(0, bytes([0, 99, 0, 0]))[0][1] == bytes([0, 102, 0, 0])  # returned before d = y


def test_overlapping_arguments_are_copied_in_and_out():
    sub = """control S(inout h_t x, inout bit<8> y) { apply { y = 7; x.b = 1; } }"""
    p = load(sub, "s.apply(hdr.h, hdr.h.b);", "S() s;")
    # copy-in/copy-out: x is copied out first (b = 1), then y (b = 7)
    assert run(p, bytes([0, 0, 0, 0])) == bytes([0, 7, 0, 0])
    assert any(isinstance(d, ir.VarDecl) and d.name.startswith("s_") for d in p.main.ingress.locals)


def test_same_arguments_everywhere_are_substituted():
    sub = """control S(inout bit<8> y) { apply { y = y + 1; } }"""
    p = load(sub, "s.apply(hdr.h.b); s.apply(hdr.h.b);", "S() s;")
    assert not any(isinstance(d, ir.VarDecl) for d in p.main.ingress.locals)
    assert run(p, bytes([0, 0, 0, 0]))[1] == 2


def test_direct_invocation_and_instance_passed_as_argument():
    decls = """
    control Count(inout bit<8> x) { apply { x = x + 1; } }
    control Twice(inout bit<8> x)(Count c) { apply { c.apply(x); c.apply(x); } }
    control Outer(inout bit<8> x) { Count() c1; Twice(c1) tw; apply { tw.apply(x); } }
    """
    p = load(decls, "Outer.apply(hdr.h.a);")
    assert run(p, bytes([5, 0, 0, 0]))[0] == 7


SUBPARSER = """
parser Sub(packet_in pk, out h_t x, inout bit<8> n) {
    state start { pk.extract(x); n = n + 1; transition select(x.a) { 0xFF: reject; default: accept; } }
}
"""
TWO_STATES = """
state start { pk.extract(hdr.h); sp.apply(pk, hdr.g, meta.m); hdr.h.d = meta.m; transition accept; }
"""


def test_sub_parser_states_are_inlined():
    p = load(SUBPARSER, states=TWO_STATES, parser_locals="Sub() sp;")
    states = p.main.parser.states
    assert "start" in states and len(states) == 3
    assert run(p, bytes([1, 2, 3, 0, 9, 9, 9, 9])) == bytes([1, 2, 3, 1, 9, 9, 9, 9])


def test_sub_parser_reject_rejects():
    p = load(SUBPARSER, states=TWO_STATES, parser_locals="Sub() sp;")
    out = run(p, bytes([1, 2, 3, 0, 0xFF, 9, 9, 9]))
    assert out[3] == 0  # the statement after the sub-parser did not run


def test_table_binds_directional_action_arguments():
    decls = ""
    locals_ = """
    action bump(inout bit<8> v, bit<8> by) { v = v + by; }
    table t { key = { hdr.h.a : exact; } actions = { bump(hdr.h.c); } default_action = bump(hdr.h.c, 5); }
    """
    p = load(decls, "t.apply();", locals_)
    table = p.main.ingress.tables["t"]
    assert [q.name for q in table.actions[0].action.params] == ["by"]
    assert table.default_action.args[0].value == 5
    assert run(p, bytes([0, 0, 10, 0]))[2] == 15


def test_calling_table_key_is_computed_where_the_table_is_applied():
    locals_ = 'table t { key = { inc(hdr.h.b): exact @name("k"); } actions = { NoAction; } }'
    p = load(INC, "if (hdr.h.a == 0) { t.apply(); }", locals_)
    assert run(p, bytes([0, 5, 0, 0]))[1] == 6  # applied: inc ran
    assert run(p, bytes([1, 5, 0, 0]))[1] == 5
    with pytest.raises(P4Error, match="applied inside a larger expression"):
        load(INC, "if (hdr.h.a == 0 && t.apply().hit) { hdr.h.c = 1; }", locals_)


@pytest.mark.parametrize("decls, apply, message", [
    ("bit<8> f(in bit<8> x) { if (x == 1) { return 1; } }", "", "does not return a value on all paths"),
    ("control S(inout bit<8> y) { apply { } }", "S.apply(hdr.h.a, hdr.h.b);", "expected 1 arguments"),
    ("parser Q(inout bit<8> x) { state start { transition accept; } }", "q.apply(hdr.h.a);",
     "parser q can only be applied in a parser state"),
])
def test_errors(decls, apply, message):
    locals_ = "Q() q;" if "parser Q" in decls else ""
    with pytest.raises(P4Error) as info:
        load(decls, apply, locals_)
    assert message in str(info.value)


UNION = """
header one_t { bit<8> v; }
header two_t { bit<16> v; }
header_union u_t { one_t one; two_t two; }
"""


def test_union_member_made_valid_invalidates_its_sibling():
    src = TEMPLATE.replace("struct H { h_t h; h_t g; }", UNION + "struct H { h_t h; h_t g; u_t u; }")
    src = src.replace("pk.emit(hdr.g);", "pk.emit(hdr.u);")
    states = "state start { pk.extract(hdr.h); pk.extract(hdr.u.one); transition accept; }"
    apply = "if (hdr.h.a == 1) { hdr.u.two.setValid(); hdr.u.two.v = 0xABCD; }"
    p = load_source(src % dict(decls="", apply=apply, locals="", states=states, parser_locals=""), "t.p4")
    assert run(p, bytes([0, 0, 0, 0, 7])) == bytes([0, 0, 0, 0, 7])
    assert run(p, bytes([1, 0, 0, 0, 7])) == bytes([1, 0, 0, 0, 0xAB, 0xCD])


def test_exit_in_an_action_still_copies_out():
    locals_ = "action set_exit(inout bit<8> v) { v = 3; exit; }"
    p = load("", "set_exit(hdr.h.a); hdr.h.b = 9;", locals_)
    assert run(p, bytes([0, 0, 0, 0])) == bytes([3, 0, 0, 0])


def test_control_initializers_run_at_apply_and_may_call_functions():
    p = load(INC, "hdr.h.a = x;", "bit<8> x = inc(hdr.h.b);")
    assert p.main.ingress.locals[0].init is None
    assert run(p, bytes([0, 4, 0, 0])) == bytes([5, 5, 0, 0])


def test_tuple_variables_are_structs():
    p = load("", "hdr.h.a = t.f1;", "tuple<bit<8>, bit<8>> t = { 1, 2 };")
    assert isinstance(p.main.ingress.locals[0].type, ir.StructType)
    assert run(p, bytes([0, 0, 0, 0]))[0] == 2


def test_top_level_extern_instance_keeps_its_global_name():
    decls = "register<bit<8>>(4) r;"
    p = load(decls, "r.write(1, 7); r.read(hdr.h.a, 1);")
    assert [i.control_plane_name for i in p.all_instances()] == ["r"]
    assert run(p, bytes([0, 0, 0, 0]))[0] == 7


def test_extract_into_dont_care_skips_a_header():
    states = "state start { pk.extract<h_t>(_); pk.extract(hdr.h); transition accept; }"
    p = load(states=states)
    assert run(p, bytes([1, 2, 3, 4, 5, 6, 7, 8])) == bytes([5, 6, 7, 8])


def test_priority_annotations_smallest_wins_like_bmv2():
    locals_ = """
    action a(bit<8> v) { hdr.h.b = v; }
    table t { key = { hdr.h.a : ternary; } actions = { a; }
        const entries = { 1 &&& 1 : a(1) @priority(3); 3 &&& 3 : a(2); 3 &&& 3 : a(3) @priority(1); } }
    """
    p = load("", "t.apply();", locals_)
    assert [e.priority for e in p.main.ingress.tables["t"].entries] == [1, 2, 3]  # largest wins
    assert run(p, bytes([3, 0, 0, 0]))[1] == 3


def test_division_by_powers_of_two_becomes_shift_and_mask():
    p = load(INC, "hdr.h.a = hdr.h.b / 4; hdr.h.c = hdr.h.b % 8; hdr.h.d = 8w0 / inc(hdr.h.d);")
    ops = {n.op for n in lowered_nodes(p) if isinstance(n, ir.Binary)}
    assert "/" not in ops and "%" not in ops and {">>", "&"} <= ops
    assert run(p, bytes([0, 0x2D, 0, 5])) == bytes([0x0B, 0x2D, 0x05, 0])  # inc ran: d = 0 after d = 6


def test_table_in_both_branches_is_one_apply_per_path():
    locals_ = "action a() { } table t { key = { hdr.h.a : exact; } actions = { a; } }"
    load("", "if (hdr.h.b == 0) { t.apply(); } else { t.apply(); }", locals_)
    with pytest.raises(P4Error, match="path from table I.t back to itself"):
        load("", "if (hdr.h.b == 0) { t.apply(); } t.apply();", locals_)


NEW_TYPE = "type bit<8> T;\nheader t_h { T f; }"


def test_new_types_check_apart_then_become_their_underlying_type():
    p = load(NEW_TYPE, "T x = (T)hdr.h.a; T y = 5; if (x == y) { hdr.h.b = (bit<8>)x; }")
    assert not any(isinstance(getattr(n, "type", None), ir.NewType) for n in lowered_nodes(p))
    assert run(p, bytes([5, 0, 0, 0])) == bytes([5, 5, 0, 0])
    assert run(p, bytes([6, 0, 0, 0])) == bytes([6, 0, 0, 0])


@pytest.mark.parametrize("apply, message", [
    ("T x = hdr.h.a;", "Cannot unify bit<8> to T"),
    ("T x = (T)hdr.h.a; T y = x + x;", "needs bit<W> or int<W> operands"),
    ("T x = (T)hdr.h.a; bit<16> y = (bit<16>)x;", "cannot cast T to bit<16>"),
])
def test_new_types_need_casts(apply, message):
    with pytest.raises(P4Error, match=message):
        load(NEW_TYPE, apply)


def test_sub_parser_with_overlapping_arguments_copies_but_shares_the_packet():
    decls = """
    parser Sub(packet_in pk, inout H all, out h_t x) {
        state start { pk.extract(x); all.h.d = 7; transition accept; }
    }
    """
    states = "state start { pk.extract(hdr.h); sp.apply(pk, hdr, hdr.g); transition accept; }"
    p = load(decls, states=states, parser_locals="Sub() sp;")
    # copy-out order: `all` (with g still invalid) first, then `x` (g as extracted)
    assert run(p, bytes([1, 2, 3, 4, 5, 6, 7, 8])) == bytes([1, 2, 3, 7, 5, 6, 7, 8])


def test_generic_function_is_checked_per_type_binding():
    f = "T twice<T>(in T x) { return x + x; }"
    p = load(f, "hdr.h.a = twice(hdr.h.b); bit<16> w = (bit<16>)hdr.h.b; hdr.h.c = twice(w)[8:1];")
    assert run(p, bytes([0, 0x81, 0, 0])) == bytes([0x02, 0x81, 0x81, 0])


def test_generic_control_with_type_arguments():
    decls = "control Inc<T>(inout T x)(T by) { apply { x = x + by; } }"
    p = load(decls, "inc.apply(hdr.h.a);", "Inc<bit<8>>(8w3) inc;")
    assert run(p, bytes([4, 0, 0, 0]))[0] == 7
