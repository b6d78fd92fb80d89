"""Where we and p4c both refuse a program, the error names p4c's line: for each rule p4c follows in choosing
what to blame (which check runs first, which node it names), a small program whose two errors would fall on
different lines under any other rule. The line marked `// <-` is the one both must name; with p4c on PATH,
`p4c --target bmv2 --arch v1model` is asked too.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from p4target.errors import P4Error
from p4target.frontend import load_program

BASE = """#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct s_t { bit<8> x; }
struct H { h_t h; }
struct M { s_t s; bit<8> m; }
parser P(packet_in pk, out H h, inout M m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control V(inout H h, inout M m) { apply { } }
control I(inout H h, inout M m, inout standard_metadata_t sm) {
    apply { }
}
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply { } }
control C(inout H h, inout M m) { apply { } }
control D(packet_out pk, in H h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
TOP = "struct s_t { bit<8> x; }\n"
INGRESS = "    apply { }\n"
TABLE = "table t {\n key = { h.h.a: exact; }\n actions = { a; }\n}\n"

# (rule, [(text of BASE, what replaces it)]): the error is on the line marked // <-
CASES = [
 ("the later of two actions with one control-plane name", [
  (TOP, TOP + '@name("x") action top() { }\n'),
  (INGRESS, '@name(".x") action a() { } // <-\n'
            "table t {\n key = { h.h.a: exact; }\n actions = { a; top; }\n}\n    apply { t.apply(); }\n")]),
 ("after inlining: a control applied twice gives its action's global name twice", [
  (TOP, TOP + 'control Sub(inout bit<8> b) {\n @name(".x") action x() { b = 1; } // <-\n'
              " table t { key = { b: exact; } actions = { x; } }\n apply { t.apply(); } }\n"),
  (INGRESS, "Sub() s1; Sub() s2;\n    apply { s1.apply(h.h.a); s2.apply(h.h.b); }\n")]),
 ("an unknown extern's declaration, not its call", [
  (TOP, TOP + "extern counter_x {\n counter_x();\n void count(); // <-\n}\n"),
  (INGRESS, "counter_x() c;\naction a() {\n c.count();\n}\n" + TABLE + "    apply { t.apply(); }\n")]),
 ("an unknown extern called for its value: the call", [
  (TOP, TOP + "extern bit<8> f(in bit<8> x);\n"),
  (INGRESS, "    apply {\n h.h.a = f(h.h.b); // <-\n }\n")]),
 ("P4Info's action parameter types before BMv2's limits", [
  (INGRESS, "action a(s_t v) { // <-\n m.s = v; }\n" + TABLE + "    apply {\n h.h.a = h.h.a / h.h.b;\n t.apply(); }\n")]),
 ("a value set's struct field that is not a bit<W>", [
  (TOP, TOP + "struct vs_t {\n bit<8> a;\n s_t inner; // <-\n}\n"),
  ("    state start { pk.extract(h.h); transition accept; }\n",
   "    value_set<vs_t>(4) vs;\n    state start { pk.extract(h.h);\n transition select(h.h.a, h.h.b) {\n"
   " vs: accept;\n default: reject; } }\n")]),
 ("main, not another package's instance, must be a V1Switch", [
  ("V1Switch(P(), V(), I(), E(), C(), D()) main;\n",
   "control Ig(inout H h, inout M m, inout standard_metadata_t sm);\npackage Pipe(Ig ig);\n"
   "package Top(Pipe p);\nPipe(I()) pipe;\nTop(pipe) main; // <-\n")]),
 ("table entries before the key", [
  (INGRESS, "action a() { }\ntable t {\n actions = { a; }\n const entries = { // <-\n 1 : a(); }\n"
            " key = { h.h.a: exact; }\n}\n    apply { t.apply(); }\n")]),
 ("an entry's keyset against its match kind after the program type-checks", [
  (INGRESS, "action a() { }\ntable t {\n key = { h.h.a: exact; }\n actions = { a; }\n const entries = {\n"
            " _ : a();\n (1, 2) : a(); // <-\n }\n}\n    apply { t.apply(); }\n")]),
 ("a select label of another type: the select expression", [
  ("    state start { pk.extract(h.h); transition accept; }\n",
   "    state start { pk.extract(h.h);\n transition select(h.h.a) { // <-\n 16w1: accept;\n default: reject; } }\n")]),
 ("the mid end's struct write before the register's cell type", [
  (INGRESS, "register<s_t>(4) r;\n    apply {\n r.read(m.s, 0); // <-\n }\n")]),
 ("a checksum control holds update_checksum calls only", [
  ("control C(inout H h, inout M m) { apply { } }\n",
   "control C(inout H h, inout M m) {\n h_t x = { 1, 2 }; // <-\n apply { h.h.a = x.a; } }\n")]),
 ("a name declared nowhere before any type error", [
  (INGRESS, "    apply {\n h.h.a = h.h.b + 16w1;\n h.h.a = nosuch; // <-\n }\n")]),
 ("a name given twice in a {name = value} list, while parsing", [
  (INGRESS, "    apply {\n m.s = { x = 1, x = 2 }; // <-\n m.s = { 1, x = 2 };\n }\n")]),
]


def write(tmp_path: Path, index: int) -> tuple[str, int]:
    """Case `index` as a file, and the line it must be refused at."""
    text = BASE
    for old, new in CASES[index][1]:
        assert old in text, (CASES[index][0], old)
        text = text.replace(old, new, 1)
    path = tmp_path / f"case{index}.p4"
    path.write_text(text)
    return str(path), next(i for i, line in enumerate(text.splitlines(), 1) if "// <-" in line)


@pytest.mark.parametrize("index", range(len(CASES)), ids=[c[0] for c in CASES])
def test_our_error_names_the_line_p4c_names(index, tmp_path):
    path, line = write(tmp_path, index)
    with pytest.raises(P4Error) as info:
        load_program(path)
    assert (info.value.file, info.value.line) == (path, line), str(info.value)


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c not on PATH (source /opt/p4ref/env.sh)")
def test_p4c_names_that_line(tmp_path):
    def p4c(index: int) -> tuple[str, str, int]:
        path, line = write(tmp_path, index)
        out = tmp_path / f"out{index}"
        proc = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out),
                               "--p4runtime-files", str(out / "p4info.txtpb"), path], capture_output=True, text=True)
        errors = [x for x in (proc.stderr + proc.stdout).splitlines() if "error" in x and "warning" not in x]
        return CASES[index][0], errors[0] if errors else proc.stderr, line
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 1)) as pool:
        results = list(pool.map(p4c, range(len(CASES))))
    wrong = [(rule, error) for rule, error, line in results if not re.search(rf"\.p4\({line}\)", error)]
    assert not wrong, wrong
