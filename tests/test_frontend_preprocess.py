"""The preprocessor: function-like macros, -D definitions, V1MODEL_VERSION as p4c's v1model.p4."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from p4target.errors import P4Error
from p4target.frontend import load_source
from p4target.frontend.preprocess import parse_define, preprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pp(text: str, **defines: str) -> str:
    return preprocess(text, "t.p4", defines=defines).text


def test_function_like_macros_expand_arguments_and_nest():
    src = "#define SQ(x) ((x) * (x))\n#define ADD(a, b) (a + SQ(b))\nADD(f(1, 2), y[3])\n"
    assert pp(src).splitlines()[2] == "(f(1, 2) + ((y[3]) * (y[3])))"


def test_stringify_paste_and_name_without_call():
    src = '#define S(x) #x\n#define CAT(a, b) a ## b\nS(hello) CAT(foo, bar) S\n'
    assert pp(src).splitlines()[2] == '"hello" foobar S'


def test_defines_from_the_command_line():
    src = "#if defined(FAST) && LANES > 16\nbig LANES\n#else\nsmall\n#endif\n"
    assert "big 32" in pp(src, FAST="1", LANES="32")
    assert "small" in pp(src)
    assert parse_define("X") == ("X", "1") and parse_define("Y=3") == ("Y", "3")
    with pytest.raises(P4Error, match="not a macro name"):
        parse_define("1X=2")


def test_if_conditions_are_computed_as_cpp_does_and_never_run():
    """A client's program chooses no computation of the switch's: C's operators in 64 bits, nothing else (Python's
    `**` once ran here, and `#if 9**9**9**9` held the switch's CPU until it was killed)."""
    def holds(cond: str, **defines: str) -> bool:
        return "yes" in pp(f"#if {cond}\nyes\n#else\nno\n#endif\n", **defines)

    assert holds("-7 / 2 == -3 && -7 % 2 == -1 && 010 == 8 && 0x1fUL == 31 && (N ? 1 : 0)", N="2")
    assert holds("~0 == -1 && !0 && (1 << 62) * 4 == 0 && 3 > 2 == 1 && (6 & 3 ^ 1 | 8) == 11")
    for cond in ("9**9**9**9", "1 << 64", "1 / 0", "(1", "1 ? 2"):
        with pytest.raises(P4Error, match="malformed #if condition"):
            pp(f"#if {cond}\nx\n#endif\n")
    with pytest.raises(P4Error, match="unsupported: #if condition"):
        pp("#if 1.5\nx\n#endif\n")


def test_macro_call_with_wrong_argument_count_is_an_error():
    with pytest.raises(P4Error, match="takes 2 arguments, got 1"):
        pp("#define F(a, b) a\nF(1)\n")


PROGRAM = """%s
#include <core.p4>
#include <v1model.p4>
%s
header h_t { bit<8> a; }
struct H { h_t h; }
struct M { }
parser P(packet_in pk, out H h, inout M m, inout standard_metadata_t sm) { state start { pk.extract(h.h); transition accept; } }
control V(inout H h, inout M m) { apply {} }
control I(inout H h, inout M m, inout standard_metadata_t sm) { %s apply { %s } }
control E(inout H h, inout M m, inout standard_metadata_t sm) { apply {} }
control C(inout H h, inout M m) { apply {} }
control D(packet_out pk, in H h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
OLD_STYLE = ("", "typedef bit<9> PortId_t;", "register<bit<8>>(4) r;",
             "r.write((bit<32>)h.h.a, 1); PortId_t p = sm.ingress_port; sm.egress_spec = p;")
NEW_STYLE = ("#define V1MODEL_VERSION 20200408", "", "register<bit<8>, bit<8>>(4) r; counter<bit<8>>(4, CounterType.packets) c;",
             "r.write(h.h.a, 1); c.count(h.h.a); PortId_t p = sm.ingress_port; sm.egress_spec = p;")


@pytest.mark.parametrize("parts", [OLD_STYLE, NEW_STYLE], ids=["20180101", "20200408"])
def test_v1model_version_selects_the_interface(parts):
    assert load_source(PROGRAM % parts, "t.p4").main is not None


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not on PATH (source /opt/p4ref/env.sh)")
@pytest.mark.parametrize("parts", [OLD_STYLE, NEW_STYLE], ids=["20180101", "20200408"])
def test_p4c_takes_both_interfaces_too(parts, tmp_path):
    path = tmp_path / "t.p4"
    path.write_text(PROGRAM % parts)
    proc = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_port_id_is_not_declared_by_default():
    with pytest.raises(P4Error, match="syntax error, unexpected .p."):  # as p4c: PortId_t is no type
        load_source(PROGRAM % ("", "", "", "PortId_t p = sm.ingress_port;"), "t.p4")


def test_cli_takes_defines(tmp_path):
    path = tmp_path / "t.p4"
    path.write_text(PROGRAM % ("", "", "", "h.h.a = WHAT;"))
    exe = os.path.join(ROOT, ".venv", "bin", "aggnet")
    ok = subprocess.run([exe, "p4", "compile", "-D", "WHAT=8w3", str(path)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([exe, "p4", "compile", str(path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "WHAT: declaration not found" in bad.stderr


@pytest.mark.parametrize("check, error", [
    ('V1MODEL_VERSION >= 20180101, "old v1model"', None),
    ('V1MODEL_VERSION > 20300000, "need a newer v1model"', "need a newer v1model"),
    ("1 == 2", "static_assert failed"),
])
def test_static_assert_is_checked_at_compile_time(check, error):
    src = PROGRAM % ("", f"const bool ok = static_assert({check});", "", "")
    if error is None:
        assert load_source(src, "t.p4").constants["ok"].value.value is True
    else:
        with pytest.raises(P4Error, match=error):
            load_source(src, "t.p4")


def test_a_program_given_as_text_reads_no_file_but_the_targets_own(tmp_path, monkeypatch):
    """A device config a client pushes is text: whatever path its #include names (absolute, relative to the switch's
    working directory, in <>), no file of the switch's host is read, and the one-line refusal names the include,
    never what the file holds. core.p4 and v1model.p4 are the target's own; a file includes files beside it."""
    secret = tmp_path / "secret.p4"
    secret.write_text("secret_token_7 = 1;\n")
    monkeypatch.chdir(tmp_path)
    for name in (f'"{secret}"', f"<{secret}>", '"secret.p4"', "<secret.p4>", f'"../{tmp_path.name}/secret.p4"'):
        with pytest.raises(P4Error) as err:
            preprocess(f"#include <core.p4>\n  #include {name}\n", "device_config.p4")
        assert str(err.value).startswith(f"device_config.p4:2:3: error: #include {name}: a program given as text ")
        assert "secret_token" not in str(err.value) and "\n" not in str(err.value)
    assert "extern packet_in" in preprocess('#include "v1model.p4"\n', "device_config.p4").text
    main = tmp_path / "main.p4"
    main.write_text('#include "secret.p4"\n')
    assert "secret_token_7" in preprocess(main.read_text(), str(main), local_includes=True).text


@pytest.mark.parametrize("source, error", [
    ("".join(f"#define M{i} M{i + 1} M{i + 1}\n" for i in range(40)) + "M0\n", "makes over 4 MiB of text"),
    ("#define F(x) x x x x x x x x\n" + "F(" * 20 + "y" + ")" * 20 + "\n", "makes over 4 MiB of text"),
    ("#define S(x) #x #x #x #x #x #x #x #x\n#define T(x) S(x) S(x) S(x) S(x) S(x) S(x) S(x) S(x)\n"
     "T(T(T(T(T(T(T(T(y))))))))\n", "makes over 4 MiB of text"),
    ("".join(f"#define M{i} M{i + 1}\n" for i in range(100)) + "M0\n", "macros nest deeper than 64"),
    ("#define F(x) x\n" + "F(" * 5000 + "y" + ")" * 5000 + "\n", "macros nest deeper than 64"),
], ids=["doubling", "arguments", "stringized", "chain", "nested-calls"])
def test_macro_expansion_is_bounded(source, error):
    """A few lines must not expand without end (2**40 copies here, or a stack deeper than Python's): one line."""
    with pytest.raises(P4Error) as err:
        preprocess(source, "t.p4")
    assert str(err.value).startswith("t.p4:") and error in str(err.value)
