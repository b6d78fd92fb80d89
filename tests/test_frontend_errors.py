"""Bad P4 programs are rejected with a one-line FILE:LINE:COL error, never a traceback.

Each tests/data/frontend/bad_*.p4 says on its first line what to expect:
`// expect [FILE:]LINE:COL MESSAGE-SUBSTRING` (or just `// expect MESSAGE-SUBSTRING`).
"""
from __future__ import annotations

import glob
import os
import re

import pytest

from p4target.errors import P4Error
from p4target.frontend import load_program, load_source

DATA = os.path.join(os.path.dirname(__file__), "data", "frontend")
BAD = sorted(glob.glob(os.path.join(DATA, "bad_*.p4")))


def _expectation(path: str):
    with open(path, encoding="utf-8") as f:
        first = f.readline()
    m = re.match(r"//\s*expect\s+(?:(?:(\S+?):)?(\d+):(\d+)\s+)?(.+)$", first.strip())
    assert m, f"{path}: first line must be '// expect [FILE:]LINE:COL MESSAGE'"
    file, line, col, text = m.groups()
    return file, int(line) if line else None, int(col) if col else None, text


def test_corpus_is_big_enough():
    assert len(BAD) >= 25


@pytest.mark.parametrize("path", BAD, ids=[os.path.basename(p) for p in BAD])
def test_bad_program_is_rejected(path):
    file, line, col, text = _expectation(path)
    with pytest.raises(P4Error) as info:
        load_program(path)
    err = info.value
    assert text in err.message, str(err)
    assert err.exit_code == 2
    assert "\n" not in str(err)
    if line is not None:
        assert (err.line, err.col) == (line, col), str(err)
        assert os.path.basename(err.file) == (file or os.path.basename(path)), str(err)
        assert str(err).startswith(f"{err.file}:{line}:{col}: error: ")


def test_missing_file_is_a_p4error():
    with pytest.raises(P4Error, match="cannot read P4 program"):
        load_program(os.path.join(DATA, "does_not_exist.p4"))


@pytest.mark.parametrize("src,needle", [
    ("control C() { apply { bit<8> x = 1; x = x |+| 16w1; } }", "Cannot unify bit<16> to bit<8>"),
    ("control C() { apply { bool b = 1; } }", "Cannot unify int to bool"),
    ("control C() { apply { bit<8> x = 1; x = x << -1; } }", "Shifts with negative amounts are not permitted"),
    ("control C() { apply { bit<8> x = 1; if (x == 1 && x) { } } }", "&& needs bool operands"),
    ("header h { bit<8> a; } control C(inout h x) { apply { x.a = x.b; } }", "h has no field b"),
    ("control C() { apply { int<8> x = 1; bit<8> y = 2; y = y + x; } }", "Cannot unify int<8> to bit<8>"),
    ("control C() { table t { key = { } } apply { } }", "no actions property"),
    ("control C() { apply { NoAction = 1; } }", "cannot be used as a value"),
    ("control C() { apply { bit<8> x; x.setValid(); } }", "has no method setValid"),
    ("struct s { bit<8> a; } control C(inout s v) { apply { v = {1, 2}; } }", "s has 1 fields, initializer has 2"),
    ("control C() { action a(in bit<8> x, bit<8> y) {} apply { } }", None),
    ("control C() { action a(bit<8> y, in bit<8> x) {} apply { } }", "directional parameters must come before"),
    ("control C() { apply { bit<4> x = 1; switch (x) { 1: {} 1: {} } } }", "duplicate switch label"),
    # an int is known at compile time, an action's data is not (p4c's words)
    ("control C() { action a(int n) { bit<8> x = 1; x = x + n; } apply { } }",
     "n: actions cannot have parameters with type int"),
    # what p4c cannot infer or bind either
    ("extern void f<T>(in bit<8> a); control C() { apply { f(1); } }", "f: cannot infer type argument T"),
    ("extern E { E(); T m<T>(); } control C() { E() e; apply { e.m(); } }", "E.m: cannot infer type argument T"),
    ("extern void f(in bit<8> a, in bit<8> b = 1, in bit<8> c); control C() { apply { f(1, 2); } }",
     "f: missing argument for parameter c"),
    ("header H<T> { T f; } struct M { H<varbit<8>> h; }", None),  # a varbit type argument
    ("control D() { apply { } } action a() { D.apply(); }", "control D can only be applied in a control's apply block"),
])
def test_type_rules(src, needle):
    text = "#include <core.p4>\n" + src
    if needle is None:  # accepted up to the missing main
        with pytest.raises(P4Error, match="no main package"):
            load_source(text, "t.p4")
        return
    with pytest.raises(P4Error) as info:
        load_source(text, "t.p4")
    assert needle in str(info.value)
    assert str(info.value).startswith("t.p4:2:")
