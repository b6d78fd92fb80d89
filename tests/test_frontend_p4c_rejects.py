"""Reject what p4c rejects: invalid programs (type errors, undeclared names, width
mismatches, wrong directions, bad const entries, bad @name, duplicates, BMv2's back-end
limits) fail `aggnet p4 compile` with exactly one `FILE:LINE:COL: error:` line and exit 2,
never a traceback; with p4c on PATH, `p4c --target bmv2 --arch v1model` rejects each too.

Each case is (name, top-level declarations, ingress locals, ingress apply body, parser
states or None) spliced into one small v1model program.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from testbed.cli import main as aggnet

TEMPLATE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; int<8> c; bit<1024> w; bit<16> s; }
struct H { h_t h; h_t[4] st; }
struct M { bit<8> m; }
%s
parser P(packet_in pk, out H h, inout M m, inout standard_metadata_t sm) {
    %s
}
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    %s
    apply { %s }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out pk, in H h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
START = "state start { pk.extract(h.h); transition accept; }"

INVALID = [
 ("bool_to_bit", "", "", "h.h.a = true;", None),
 ("int_to_bool", "", "", "bool b = 1;", None),
 ("width_mismatch", "", "", "h.h.a = h.h.s;", None),
 ("if_not_bool", "", "", "if (h.h.a) { h.h.b = 1; }", None),
 ("binop_widths", "", "", "h.h.a = h.h.a + h.h.s;", None),
 ("literal_too_wide", "", "", "h.h.a = 9w300;", None),
 ("typed_literal_width", "", "", "bit<8> x = 16w1;", None),
 ("undeclared_field", "", "", "h.h.zz = 1;", None),
 ("undeclared_var", "", "", "x = 1;", None),
 ("undeclared_table", "", "", "nope.apply();", None),
 ("undeclared_function", "", "", "foo();", None),
 ("assign_to_in_param", "", "action a(in bit<8> v) { v = 1; }", "a(h.h.a);", None),
 ("out_arg_not_lvalue", "", "action a(out bit<8> v) { v = 1; }", "a(8w1);", None),
 ("entry_key_count", "", "action a() {} table t { key = { h.h.a: exact; h.h.b: exact; } actions = { a; } const entries = { 1 : a(); } }", "t.apply();", None),
 ("entry_action_not_listed", "", "action a() {} action b() {} table t { key = { h.h.a: exact; } actions = { a; } const entries = { 1 : b(); } }", "t.apply();", None),
 ("entry_arg_not_constant", "", "action a(bit<8> v) { h.h.b = v; } table t { key = { h.h.a: exact; } actions = { a; } const entries = { 1 : a(h.h.b); } }", "t.apply();", None),
 ("entry_mask_on_exact", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } const entries = { 1 &&& 3 : a(); } }", "t.apply();", None),
 ("entry_priority_in_const", "", "action a() {} table t { key = { h.h.a: ternary; } actions = { a; } const entries = { priority=1: 1 &&& 3 : a(); } }", "t.apply();", None),
 ("entry_value_too_wide", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } const entries = { 8w1 ++ 8w1 : a(); } }", "t.apply();", None),
 ("entry_range_on_ternary", "", "action a() {} table t { key = { h.h.a: ternary; } actions = { a; } const entries = { 1 .. 3 : a(); } }", "t.apply();", None),
 ("name_not_string", "", "@name(5) action a() {} table t { key = { h.h.a: exact; } actions = { a; } }", "t.apply();", None),
 ("duplicate_table_name", "", 'action a() {} @name("t") table t1 { key = { h.h.a: exact; } actions = { a; } } @name("t") table t2 { key = { h.h.b: exact; } actions = { a; } }', "t1.apply(); t2.apply();", None),
 ("duplicate_header", "header h_t { bit<8> z; }", "", "", None),
 ("duplicate_action", "", "action a() {} action a() {}", "", None),
 ("duplicate_local", "", "", "bit<8> x = 1; bit<8> x = 2;", None),
 ("duplicate_table_property", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } size = 4; size = 8; }", "t.apply();", None),
 ("duplicate_state", "", "", "", "state start { pk.extract(h.h); transition accept; } state start { transition accept; }"),
 ("exit_in_parser", "", "", "", "state start { exit; }"),
 ("return_value_in_action", "", "action a() { return 1; }", "a();", None),
 ("transition_to_nowhere", "", "", "", "state start { transition nowhere; }"),
 ("select_width", "", "", "", "state start { pk.extract(h.h); transition select(h.h.a) { 16w1: accept; default: reject; } }"),
 ("verify_in_control", "", "", "verify(true, error.NoError);", None),
 ("extract_non_header", "", "", "", "state start { pk.extract(h.h.a); transition accept; }"),
 ("apply_in_action", "", "action b() {} table t { key = { h.h.a: exact; } actions = { b; } } action a() { t.apply(); }", "a();", None),
 ("action_from_parser", "action a() {}", "", "", "state start { a(); transition accept; }"),
 ("switch_duplicate_label", "", "", "switch (h.h.a) { 1: { } 1: { } }", None),
 ("default_action_not_listed", "", "action a() {} action b() {} table t { key = { h.h.a: exact; } actions = { a; } default_action = b(); }", "t.apply();", None),
 ("next_in_control", "", "", "h.st.next.a = 1;", None),
 ("set_valid_on_struct", "", "", "h.setValid();", None),
 ("cast_sign_and_width", "", "", "int<16> x = (int<16>)h.h.a;", None),
 ("shift_by_signed", "", "", "h.h.a = h.h.a << h.h.c;", None),
 ("shift_negative", "", "", "h.h.a = h.h.a >> -1;", None),
 ("function_missing_return", "bit<8> f(in bit<8> x) { if (x == 1) { return 1; } }", "", "h.h.a = f(h.h.a);", None),
 ("recursive_function", "bit<8> f(in bit<8> x) { return f(x); }", "", "", None),
 ("sub_control_wrong_args", "control S(inout bit<8> y) { apply { } }", "S() s;", "s.apply(h.h.a, h.h.b);", None),
 ("shift_over_256", "", "", "h.h.w = h.h.w << 300;", None),
 ("width_over_2048", "header big_t { bit<4096> x; }", "", "", None),
 ("slice_write_shift", "", "", "h.h.w[1023:992] = 32w1;", None),
 ("runtime_division", "", "", "h.h.a = h.h.a / h.h.b;", None),
 ("runtime_modulo", "", "", "h.h.a = h.h.a % 3;", None),
 ("signed_division", "", "", "h.h.c = h.h.c / 2;", None),
 ("table_applied_twice", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } }", "t.apply(); t.apply();", None),
 ("register_of_struct", "struct rs { bit<8> a; }", "register<rs>(4) r;", "", None),
 ("mark_to_drop_no_args", "", "", "mark_to_drop();", None),
 ("complex_key_without_name", "", "action a() {} table t { key = { h.h.a + h.h.b: exact; } actions = { a; } }", "t.apply();", None),
 ("switch_in_an_action", "", "action a() { switch (h.h.a) { 1: { h.h.b = 1; } } } table t { actions = { a; } }", "t.apply();", None),
 ("entry_priority_on_exact_keys", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } "
  "entries = { priority=1: 1 : a(); } }", "t.apply();", None),
 ("lpm_mask_not_a_prefix", "", "action a() {} table t { key = { h.h.a: lpm; } actions = { a; } "
  "const entries = { 0x11 &&& 0xE1 : a(); } }", "t.apply();", None),
 ("entry_priority_missing_on_the_first", "", "action a() {} table t { key = { h.h.a: ternary; } actions = { a; } "
  "entries = { 1 &&& 1 : a(); priority=5: 2 &&& 2 : a(); } }", "t.apply();", None),
 ("entry_priority_overflow", "", "action a() {} table t { key = { h.h.a: ternary; } actions = { a; } priority_delta = 10; "
  "entries = { priority=12: 1 &&& 1 : a(); 2 &&& 2 : a(); } }", "t.apply();", None),
 ("translation_to_bool", '@p4runtime_translation("p4.org/x", bool) type bit<8> T_t;',
  "T_t x; action a() {} table t { key = { x: exact; } actions = { a; } }", "x = (T_t)h.h.a; t.apply();", None),
 ("switch_two_defaults", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } }",
  "switch (t.apply().action_run) { a: { } default: { } default: { } }", None),
 ("int_param_with_direction", "", "action a(in int v) { h.h.a = (bit<8>)v; }", "a(1);", None),
 ("lookahead_of_a_union", "header g_t { bit<8> b; } header_union u_t { h_t h; g_t g; }", "", "",
  "state start { u_t u = pk.lookahead<u_t>(); pk.extract(h.h); transition accept; }"),
 ("optional_key_with_mask", "", "action a() {} table t { key = { h.h.a: optional; } actions = { a; } "
  "const entries = { 0xaa &&& 0xf0 : a(); } }", "t.apply();", None),
 ("parser_never_ends", "", "", "", "state start { pk.extract(h.h); transition s; } state s { transition select(h.h.a) { "
  "1: start; default: s; } }"),
 ("hash_of_a_bare_field", "", "", "hash(h.h.a, HashAlgorithm.crc16, 8w0, h.h.b, 8w7);", None),
 ("last_index_in_control", "", "", "h.h.a = (bit<8>)h.st.lastIndex;", None),
 ("concat_over_2048", "", "", "bit<2048> v = 0; bit<2049> z = v ++ v[0:0];", None),
 ("entries_without_key", "", "action a() {} table t { actions = { a; } const entries = { _ : a(); } }", "t.apply();", None),
 ("action_list_missing_dir_arg", "", "action a(inout bit<8> v) { v = 1; } table t { key = { h.h.a: exact; } actions = { a; } }", "t.apply();", None),
 ("header_field_struct_of_header", "header x_t { h_t inner; }", "", "", None),
 ("bool_arith", "", "", "bool b = true; b = b + b;", None),
 ("compare_header_bit", "", "", "if (h.h == h.h.a) { }", None),
 ("assign_to_const", "const bit<8> K = 1;", "", "K = 2;", None),
 ("header_not_whole_bytes", "header odd_t { bit<8> a; bit<4> b; }", "", "odd_t o; o.setValid();", None),
 ("checksum16", "", "Checksum16() ck;", "h.h.s = ck.get({h.h.a});", None),
 ("call_table_as_function", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } }", "t();", None),
 ("compound_width", "", "", "h.h.a += h.h.s;", None),
 ("compound_bool", "", "", "bool b = true; b &= false;", None),
 ("compound_runtime_modulo", "", "", "h.h.a %= 3;", None),
 ("compound_to_in_param", "", "action a(in bit<8> v) { v += 1; }", "a(h.h.a);", None),
 ("compound_concat", "", "", "h.h.s ++= 1;", None),
 ("for_in_range", "", "", "for (bit<8> i in 1 .. 4) { h.h.a = h.h.a + i; }", None),
 ("for_in_list", "", "", "for (bit<8> i in {1, 2}) { h.h.a = h.h.a + i; }", None),
 ("break_outside_loop", "", "", "break;", None),
 ("continue_outside_loop", "", "", "continue;", None),
 ("for_in_parser", "", "", "", "state start { pk.extract(h.h); for (bit<8> i = 0; i < 2; i += 1) { } transition accept; }"),
 ("for_var_duplicate", "", "", "bit<8> i = 0; for (bit<8> i = 0; i < 2; i += 1) { }", None),
 ("for_var_after_loop", "", "", "for (bit<8> i = 0; i < 2; i += 1) { } h.h.a = i;", None),
 ("for_without_condition", "", "action a() { for (bit<8> i = 0; ; i += 1) { if (i == h.h.a) { break; } } }", "a();", None),
 ("value_set_of_tuple", "", "", "", "value_set<tuple<bit<8>, bit<8>>>(4) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a, h.h.b) { vs: accept; default: reject; } }"),
 ("value_set_nested_struct", "struct in_t { bit<8> x; } struct vs_t { bit<8> a; in_t i; }", "", "",
  "value_set<vs_t>(4) vs; state start { pk.extract(h.h); transition select(h.h.a, h.h.b) { vs: accept; default: reject; } }"),
 ("value_set_of_bool", "", "", "", "value_set<bool>(4) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a == 1) { vs: accept; default: reject; } }"),
 ("value_set_key_type", "", "", "", "value_set<bit<16>>(4) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a) { vs: accept; default: reject; } }"),
 ("value_set_key_count", "struct vs_t { bit<8> a; bit<8> b; }", "", "", "value_set<vs_t>(4) vs; "
  "state start { pk.extract(h.h); transition select(h.h.a) { vs: accept; default: reject; } }"),
 ("value_set_in_control", "", "value_set<bit<8>>(4) vs;", "", None),
 ("register_of_bool", "", "register<bool>(4) r;", "", None),
 ("generic_struct_arity", "struct S<T> { T x; }", "", "S<bit<8>, bit<8>> s;", None),
 ("generic_struct_of_itself", "struct S<T> { T x; }", "", "S<S<bit<8>>> s;", None),
 ("structured_annotation_mixed", "", "@a[k=1, 2] action a() {}", "a();", None),
 ("structured_annotation_not_constant", "", "@a[k=h.h.a] action a() {}", "a();", None),
 ("structured_annotation_duplicate_key", "", "@a[k=1, k=2] action a() {}", "a();", None),
 ("name_annotation_free_form", "", "@name(foo bar) action a() {}", "a();", None),
 ("annotation_unbalanced", "", "@a(() action a() {}", "a();", None),
 ("table_two_successors", "", "action a() {} table t { key = { h.h.a: exact; } actions = { a; } }",
  "if (h.h.b == 1) { t.apply(); h.h.a = 1; } else { t.apply(); h.h.a = 2; }", None),
 ("two_lpm_keys", "", "action a() {} table t { key = { h.h.a: lpm; h.h.b: lpm; } actions = { a; } }", "t.apply();", None),
 ("direct_meter_never_read", "", "direct_meter<bit<8>>(MeterType.packets) dm; action a() {} "
  "table t { key = { h.h.a: exact; } actions = { a; } meters = dm; }", "t.apply();", None),
 ("direct_counter_on_two_tables", "", "direct_counter(CounterType.packets) dc; action a() {} "
  "table t1 { key = { h.h.a: exact; } actions = { a; } counters = dc; } "
  "table t2 { key = { h.h.b: exact; } actions = { a; } counters = dc; }", "t1.apply(); t2.apply();", None),
 ("clone3_with_data", "", "", "clone3(CloneType.I2E, 32w5, m);", None),
 ("resubmit_with_data", "", "", "resubmit(m);", None),
 ("recirculate_with_data", "", "", "recirculate(m);", None),
 ("extern_function_of_the_program", "extern void frob<T>(inout T field, in T value);", "",
  "frob(h.h.a, 8w1);", None),
 ("action_control_plane_names_clash", '@name("x") action top() {}', '@name(".x") action a() {} '
  "table t { key = { h.h.a: exact; } actions = { a; top; } }", "t.apply();", None),
]

# The same template with one of its lines changed: (name, old text, new text).
EDITED = [
 ("checksum_of_a_computation", "control C(inout H h, inout M m) { apply { } }",
  "control C(inout H h, inout M m) { apply { update_checksum(true, { h.h.a, (bit<16>)h.h.b }, h.h.s, HashAlgorithm.csum16); } }"),
 ("verify_checksum_in_param", "control V(inout H h, inout M m)", "control V(in H h, inout M m)"),
 ("headers_struct_with_a_bit_field", "struct H { h_t h; h_t[4] st; }", "struct H { h_t h; h_t[4] st; bit<8> x; }"),
 ("deparser_inout_headers", "control D(packet_out pk, in H h)", "control D(packet_out pk, inout H h)"),
 ("v1switch_unknown_argument_name", "V1Switch(P(), V(), I(), E(), C(), D()) main;",
  "V1Switch(p = P(), vr = V(), ig = I(), eg = E(), ck = C(), deparser = D()) main;"),
]

ERROR_LINE = re.compile(r"^\S+:\d+:\d+: error: \S")


def write(tmp_path, case) -> str:
    """The template with a case's pieces spliced in (or, for an EDITED case, one line changed)."""
    if len(case) == 3:
        name, old, new = case
        text = (TEMPLATE % ("", START, "", "")).replace(old, new)
        assert new in text, case
    else:
        name, decls, locals_, apply, states = case
        text = TEMPLATE % (decls, states or START, locals_, apply)
    path = tmp_path / f"{name}.p4"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize("case", INVALID + EDITED, ids=[c[0] for c in INVALID + EDITED])
def test_aggnet_rejects_with_one_error_line(case, tmp_path, capsys):
    path = write(tmp_path, case)
    assert aggnet(["p4", "compile", path]) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), err
    assert lines[0].startswith(path + ":") and "Traceback" not in err and "internal error" not in err


def test_the_valid_base_program_compiles(tmp_path, capsys):
    assert aggnet(["p4", "compile", write(tmp_path, ("base", "", "", "", None))]) == 0


@pytest.mark.parametrize("name", ["shift_over_256", "width_over_2048", "slice_write_shift", "table_applied_twice"])
def test_switch_refuses_programs_over_bmv2_limits(name, tmp_path):
    path = write(tmp_path, next(c for c in INVALID if c[0] == name))
    exe = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".venv", "bin", "aggnet")
    proc = subprocess.run([exe, "switch", "--grpc-server-addr", "127.0.0.1:0", path],
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and ERROR_LINE.match(lines[0]), proc.stderr


@pytest.mark.bmv2
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH (source /opt/p4ref/env.sh)")
def test_p4c_rejects_them_too(tmp_path):
    def p4c(case) -> tuple[str, int]:
        path = write(tmp_path, case)
        out = tmp_path / case[0]
        proc = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out),
                               "--p4runtime-files", str(out / "p4info.txtpb"), path], capture_output=True, text=True)
        return case[0], proc.returncode
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        accepted = [name for name, rc in pool.map(p4c, INVALID + EDITED + [("base", "", "", "", None)]) if rc == 0]
    assert accepted == ["base"]
