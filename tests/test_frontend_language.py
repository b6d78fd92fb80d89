"""The language as p4c 1.2.5 takes it for BMv2 (issue 19 item 5): each construct here is accepted by
`aggnet p4 compile` and, where p4c is on PATH, by `p4c --target bmv2 --arch v1model` too. What p4c
rejects is in tests/test_frontend_p4c_rejects.py; the STF programs under tests/data/stf run packets
through these constructs (tests/test_stf_programs.py on both engines, tests/test_bmv2_differential.py
against simple_switch).

Each case is spliced into test_frontend_p4c_rejects' template: (name, top-level declarations,
ingress locals, ingress apply body, parser states or None).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from test_frontend_p4c_rejects import ERROR_LINE, write

from testbed.cli import main as aggnet

STF_DATA = Path(__file__).resolve().parent / "data" / "stf"
PROGRAMS = [STF_DATA / "compound_assign.p4", STF_DATA / "for_loops.p4", STF_DATA / "serializable_types.p4",
            STF_DATA / "statement_forms.p4", STF_DATA / "generic_structs.p4", STF_DATA / "sample_forms.p4",
            STF_DATA / "parser_control_flow.p4", STF_DATA / "header_nested_structs.p4",
            Path(__file__).resolve().parent / "data" / "p4info" / "type_info.p4",
            Path(__file__).resolve().parent / "data" / "p4info" / "annotations.p4"]

ACCEPTED = [
 ("compound_all_ops", "", "", "h.h.a += 1; h.h.a -= 1; h.h.a *= 3; h.h.a /= 2; h.h.a |= 1; h.h.a &= 7; h.h.a ^= 2; "
  "h.h.a <<= 1; h.h.a >>= 1; h.h.a |+|= 9; h.h.a |-|= 9; h.h.c >>= 2; h.h.s[3:0] += 1;", None),
 ("compound_in_action", "", "action a(bit<8> v) { h.h.a += v; h.h.b ^= v; }", "a(h.h.b);", None),
 ("for_counted", "", "", "for (bit<8> i = 0; i < 4; i = i + 1) { h.h.a = h.h.a + i; }", None),
 ("for_compound_update", "", "", "for (bit<8> i = 0; i < 4; i += 1) { h.h.a += i; }", None),
 ("for_two_vars", "", "", "for (bit<8> i = 0, bit<8> j = 3; i < j; i += 1, j -= 1) { h.h.a += i; }", None),
 ("for_outer_var", "", "", "bit<8> i; for (i = 0; i < 4; i += 1) { h.h.a += i; } h.h.b = i;", None),
 ("for_break_continue", "", "",
  "for (bit<8> i = 0; i < 8; i += 1) { if (i == 6) { break; } if (i % 2 == 1) { continue; } h.h.a += i; }", None),
 ("for_nested", "", "", "for (bit<8> i = 0; i < 3; i += 1) { for (bit<8> j = i; j < 3; j += 1) { h.h.a = h.h.a + j; } }", None),
 ("for_no_iterations", "", "", "for (bit<8> i = 5; i < 4; i += 1) { h.h.a += i; }", None),
 ("for_sibling_loops", "", "",
  "for (bit<8> i = 0; i < 2; i += 1) { h.h.a += i; } { for (bit<8> i = 0; i < 2; i += 1) { h.h.b += i; } }", None),
 ("atomic_blocks", "", "register<bit<8>>(1) r; action a() { @atomic { bit<8> x; r.read(x, 0); r.write(0, x + 1); } }",
  "a(); @atomic { } @atomic @foo { h.h.b = 2; }", None),
 ("empty_blocks", "", "action a() { }", "{ } ; { ; } if (h.h.a == 1) { } else { } a(); switch (h.h.a) { 1: { } default: { } }", None),
 ("select_without_keys", "", "", "", "state start { pk.extract(h.h); transition select() { default: n; } } "
  "state n { transition select() { _: accept; } }"),
 ("state_without_transition", "", "", "", "state start { pk.extract(h.h); transition select(h.h.a) { 0: s; default: accept; } } "
  "state s { } state unused { }"),
 ("generic_struct_digests", "struct S<T> { T x; bit<8> y; } struct Pr<A, B> { A a; B b; }", "",
  "S<bit<8>> s = { x = h.h.a, y = 1 }; digest(1, s); S<bit<16>> t = { x = h.h.s, y = 2 }; digest(1, t); "
  "Pr<bit<8>, S<bit<8>>> p = { a = 1, b = s }; digest(1, p);", None),
 ("generic_header_local", "header G<T> { T x; }", "", "G<bit<8>> g; g.setValid(); g.x = 1; h.h.a = g.x;", None),
 ("struct_initializers_from_context", "struct in_t { bit<8> a; bit<8> b; } struct out_t { in_t i; bit<8> c; }", "",
  "out_t o = { i = { a = 1, b = h.h.a }, c = 2 }; out_t p = { { 3, 4 }, 5 }; h.h.b = o.i.b + p.i.a;", None),
 ("structured_annotations", "@d[1] struct s_t { bit<8> x; }",
  "@a[k=1, n=\"x\", b=true] @l[1, \"y\"] @e[] action a(@r[lo=0] bit<8> v) { h.h.a = v; } "
  "@t[2] table t { key = { h.h.a: exact @f[\"hex\"]; } actions = { a; } }", "t.apply();", None),
 ("serializable_enum_as_its_bits", "enum bit<32> size_t { N = 4 } enum bit<8> kind_t { A = 1, B = 2 }",
  "counter(size_t.N, CounterType.packets) c;", "bit<8> x = kind_t.A; if (h.h.a == kind_t.B) { h.h.b = x; } c.count(0);",
  "state start { pk.extract(h.h); transition select(h.h.a) { kind_t.A: accept; default: accept; } }"),
 ("serializable_enum_as_stack_index", "enum bit<8> idx_t { ONE = 1 }", "",
  "idx_t i = (idx_t)h.h.b; h.st[i].a = 1; h.st[idx_t.ONE].b = 2;", None),
 ("braced_entry_keysets", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } const entries = { {1} : a(); } } "
  "table u { key = { h.h.a: exact; h.h.b: ternary; } actions = { a; } const entries = { {2, 3} : a(); } }",
  "t.apply(); u.apply();", None),
 ("action_named_as_an_extern_function", "",
  "action hash() { hash(h.h.a, HashAlgorithm.crc16, 8w0, { h.h.b }, 8w7); } table t { actions = { hash; } }",
  "t.apply();", None),
 # issue2735-bmv2's form: p4c's P4Info generator hits a compiler bug ("expected Type_Specialized") once such an
 # instance stays live, so here its one read is dead code p4c removes
 ("typedef_of_an_extern_type", "typedef register<bit<8>> reg8_t;", "reg8_t(4) r;", "bit<8> x; r.read(x, 0);", None),
 ("type_as_a_name", "", "action a(inout bit<8> type, bit<8> v) { bit<8> t = type; type = t + v; }",
  "a(h.h.a, 1);", None),
 ("field_list_named_by_enum", "struct M { bit<8> m; }",
  "enum bit<8> lists_t { I2E = 1 } struct M { @field_list(lists_t.I2E) bit<8> m; }"),
 ("free_form_annotation_any_character", "@doc(What's six by nine? $42 ` \\ 0xdeadbeef) struct s_t { bit<8> x; }", "", "", None),
 ("free_form_annotation_bodies", "@doc(any ; tokens { at } all) struct s_t { bit<8> x; }",
  "@free(this is ; free text (with { nested } parens)) @call(f(x)[1], \"s\") action a() {}", "a();", None),
 ("register_of_serializable_enum", "enum bit<8> kind_t { A = 1, B = 2 }", "register<kind_t>(4) r;",
  "kind_t v; r.read(v, 0); r.write(1, (kind_t)h.h.a); h.h.b = (bit<8>)v;", None),
 ("digest_of_a_list", "", "", "digest(1, { h.h.a, sm.ingress_port }); h.h.a = 0; digest(2, { h.h.b });", None),
 ("serializable_enum_over_typedef", "typedef bit<8> kind_base_t; enum kind_base_t kind_t { A = 1, B = 2 }", "",
  "kind_t k = (kind_t)h.h.a; if (k == kind_t.B) { h.h.b = (bit<8>)kind_t.A; }", None),
 ("register_of_type", "type bit<8> t_t;", "register<t_t>(4) r;", "t_t v; r.read(v, 0); r.write(1, (t_t)h.h.a);", None),
 ("value_set_bits", "", "", "", "value_set<bit<8>>(4) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a) { 1: accept; vs: reject; 2 &&& 3: reject; default: accept; } }"),
 ("value_set_struct", "struct vs_t { bit<8> a; @match(ternary) bit<16> s; }", "", "", "@name(\"pairs\") value_set<vs_t>(2) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a, h.h.s) { vs: accept; default: reject; } }"),
 ("value_set_typedef_and_port", "typedef bit<9> port_t;", "", "", "value_set<port_t>(1) vs; "
  "state start { pk.extract(h.h); transition select(sm.ingress_port) { vs: accept; default: reject; } }"),
 ("value_set_wide_signed_lookahead", "", "", "", "value_set<bit<1024>>(2) w; value_set<int<8>>(2) c; value_set<bit<8>>(0) l; "
  "state start { pk.extract(h.h); transition select(h.h.w) { w: next; default: accept; } } "
  "state next { transition select(h.h.c) { c: look; default: accept; } } "
  "state look { transition select(pk.lookahead<bit<8>>()) { l: accept; default: reject; } }"),
 ("unused_action_back_end_forms", "", "action never() { mark_to_drop(); h.h.a = h.h.a / h.h.b; }", "", None),
 ("action_names_alike_not_clashing", '@name("x") action top() {} @name(".y") action top2() {}',
  '@name("x") action a() {} @name("y") action b() {} table t { key = { h.h.a: exact; } actions = { a; b; top; top2; } }',
  "t.apply();", None),
 ("match_kinds_as_values", "const tuple<match_kind, match_kind> kinds = {exact, ternary};", "", "", None),
 ("value_set_shared", "", "", "", "value_set<bit<8>>(4) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a) { vs: next; default: accept; } } "
  "state next { transition select(h.h.b) { vs: accept; default: reject; } }"),
]

# p4c 1.2.5.16 accepts these loops in an apply block but its BMv2 JSON holds no loop (the body runs once, the loop
# variable never set); BMv2 runs loops only in actions (jumps back), so outside one a loop whose trip count depends
# on packet data is refused here.
NOT_UNROLLABLE = [
 ("for_runtime_bound", "", "", "for (bit<8> i = 0; i < h.h.b; i += 1) { h.h.a += i; }", None),
 ("for_runtime_break", "", "", "for (bit<8> i = 0; i < 4; i += 1) { if (h.h.b == i) { break; } h.h.a += i; }", None),
 ("for_forever", "", "", "for (bit<8> i = 0; i < 8; i = i) { }", None),
 ("for_in_function_in_apply", "bit<8> f(in bit<8> n) { bit<8> s = 0; for (bit<8> i = 0; i < n; i += 1) { s += i; } "
  "return s; }", "", "h.h.a = f(h.h.b);", None),
]


@pytest.mark.parametrize("case", ACCEPTED, ids=[c[0] for c in ACCEPTED])
def test_aggnet_accepts(case, tmp_path, capsys):
    assert aggnet(["p4", "compile", write(tmp_path, case)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("program", PROGRAMS, ids=[p.stem for p in PROGRAMS])
def test_aggnet_accepts_the_stf_programs(program, capsys):
    assert aggnet(["p4", "compile", str(program)]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("case", NOT_UNROLLABLE, ids=[c[0] for c in NOT_UNROLLABLE])
def test_loops_that_cannot_unroll_are_one_error_line(case, tmp_path, capsys):
    assert aggnet(["p4", "compile", write(tmp_path, case)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), lines
    assert "unroll" in lines[0]


@pytest.mark.bmv2
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH (source /opt/p4ref/env.sh)")
def test_p4c_accepts_them_too(tmp_path):
    def p4c(case) -> tuple[str, int, str]:
        path = case if isinstance(case, Path) else Path(write(tmp_path, case))
        out = tmp_path / path.stem
        proc = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out),
                               "--p4runtime-files", str(out / "p4info.txtpb"), str(path)], capture_output=True, text=True)
        return path.stem, proc.returncode, proc.stderr
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        refused = [(name, err) for name, rc, err in pool.map(p4c, ACCEPTED + NOT_UNROLLABLE + PROGRAMS) if rc != 0]
    assert refused == []


def test_a_digest_of_a_list_is_named_as_p4c_names_it_and_carries_the_values_at_the_call(tmp_path):
    """p4c calls such a digest digest_0 (P4Info id 401776493 in p4c's own output for issue430-1-bmv2)
    and copies the list's values at the call, so a later write does not change the message."""
    from p4target import load
    from p4target.frontend import load_program
    from p4target.p4info import build_p4info

    program = load_program(write(tmp_path, ("digest_of_a_list", "", "", "digest(1, { h.h.a, h.h.s }); h.h.a = 0;", None)))
    (digest,) = build_p4info(program).digests
    assert (digest.preamble.name, digest.preamble.id) == ("digest_0", 401776493)
    native, reason = load.native_or_reason(program)
    assert native is not None, reason
    for pipeline in (load.pipeline(program, "python"), native):
        pipeline.process(0, bytes([0x11, 0, 0]) + bytes(128) + bytes([0x22, 0x33]))
        assert pipeline.state.drain_digests() == [("digest_0", (0x11, 0x2233))]
    native.close()


def test_a_direct_counter_or_meter_on_no_table_is_a_warning_and_left_out_of_p4info(tmp_path, capsys):
    """p4c warns (`Direct counter not used; ignoring`, `'m' is unused`) and lists neither in P4Info:
    p4c's samples unused-counter-bmv2 and issue1829-4-bmv2."""
    program = write(tmp_path, ("unattached_direct", "", "direct_counter(CounterType.packets) dc;\n"
                               "    direct_meter<bit<2>>(MeterType.packets) dm;", "", None))
    out = tmp_path / "p4info.txtpb"
    assert aggnet(["p4", "compile", program, "--p4info", str(out)]) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"{program}:12:41: warning: I.dc: direct counter not attached to any table; ignoring",
        f"{program}:13:45: warning: I.dm: direct meter not attached to any table; ignoring"]
    assert "direct_" not in out.read_text()


def test_a_run_time_value_cast_to_int_is_0_as_on_bmv2_with_a_warning(capsys):
    """p4c 1.2.5.16 accepts `(int)x` of a run-time x (parser-unroll-test1.p4) and its BMv2 back end writes `x & 0`:
    we compute 0 too (tests/data/stf/int_cast.stf, and against BMv2 in test_bmv2_differential.py) and say so."""
    program = str(Path(__file__).parent / "data" / "stf" / "int_cast.p4")
    assert aggnet(["p4", "compile", program]) == 0
    warned = "a run-time value cast to int; p4c's BMv2 back end computes 0 for it (p4c writes `x & 0`), and so does this target"
    assert capsys.readouterr().err.splitlines() == [f"{program}:17:28: warning: (int)meta.i: {warned}",
                                                    f"{program}:27:28: warning: (int)hdr.h.b: {warned}"]


BMV2_WARNED = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; }
struct H { h_t h; }
struct M { }
parser P(packet_in pk, out H h, inout M m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition select(h.h.a) { 1: stop; 2: reject; default: accept; } }
    state stop { }
}
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    action a() { }
    action_profile(4) ap;
    table t { key = { h.h.a: exact; } actions = { a; } implementation = ap; }
    action b(bit<8> v) { h.h.a = v; }
    table u {
        key = { h.h.a: ternary; }
        actions = { b; }
        made_up = 3;
        entries = {
            priority=5: 1 &&& 1 : b(1);
            priority=9: 2 &&& 2 : b(2);
            priority=9: 4 &&& 4 : b(3);
            priority=9: 8 &&& 8 : b(4);
        }
    }
    apply { t.apply(); u.apply(); }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out pk, in H h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
P4C_WARNING = re.compile(r"^(?:.*\((\d+)\): )?\[--Wwarn=[\w-]+\] warning: (.*)$")


def test_what_bmv2_runs_otherwise_is_warned_of_as_p4c_does(tmp_path, capsys):
    """p4c warns, and still compiles: a state with no transition (it goes to reject), a transition to reject (BMv2
    goes on to ingress with the parser error set), a table with an action profile (BMv2 takes no default action
    from the program), entries whose priorities are out of order or repeat one (once however often), and a table
    property BMv2 ignores. We warn of each at the same line; p4c gives no line for the implicit transition, we
    give the state's. With p4c on PATH, its warnings are the same ones."""
    program = tmp_path / "bmv2_warned.p4"
    program.write_text(BMV2_WARNED)
    assert aggnet(["p4", "compile", str(program)]) == 0
    warned = capsys.readouterr().err.splitlines()
    ours = {(int(line), message) for line, message in (re.match(r"^.*:(\d+):\d+: warning: (.*)$", w).groups() for w in warned)}
    assert len(warned) == len(ours)  # each once
    explicit = "Explicit transition to reject not supported on this target"
    assert ours == {(8, "stop: implicit transition to `reject'"), (7, explicit), (8, explicit),
                    (14, "Target does not support default_action for I.t (due to action profiles)"),
                    (19, "Unknown table property: made_up"),
                    (21, "Entry (priority 5) and Entry (priority 9) have priorities out of order"),
                    (22, "Entry and Entry have the same priority 9")}
    if shutil.which("p4c") is None:
        return
    done = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), str(program)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    theirs = {(int(line) if line else None, message) for line, message in
              (m.groups() for m in map(P4C_WARNING.match, done.stderr.splitlines()) if m)}
    assert {message for _, message in theirs} == {message for _, message in ours}
    assert {w for w in theirs if w[0] is not None} <= ours


def test_an_extract_at_a_run_time_index_is_refused_at_its_line(tmp_path, capsys):
    """Without --loopsUnroll p4c writes this extract at a run-time index, which BMv2's parser lacks (simple_switch
    aborts loading the JSON); we refuse it at its line (with the option it is unrolled: test_frontend_unroll.py)."""
    program = tmp_path / "stack_loop.p4"
    program.write_text("""#include <core.p4>
#include <v1model.p4>
header s_t { bit<8> v; }
struct headers_t { s_t[3] s; }
struct meta_t { bit<32> n; }
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { meta.n = 0; transition next; }
    state next {
        pkt.extract(hdr.s[meta.n]);
        meta.n = meta.n + 1;
        transition select(hdr.s[meta.n - 1].v) { 0: accept; default: next; }
    }
}
control V(inout headers_t hdr, inout meta_t meta) { apply { } }
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { sm.egress_spec = 1; } }
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.s); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
""")
    out = tmp_path / "out.json"
    assert aggnet(["p4", "compile", str(program), "--bmv2-json", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"{program}:9:21: error: extract into a header stack at a run-time index, which BMv2 lacks (p4c unrolls such "
        "a loop into constant indexes under --loopsUnroll: give @command_line(\"--loopsUnroll\") in the source, or "
        "extract into the stack's .next)"]
    assert not out.exists()
