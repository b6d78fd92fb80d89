"""Building and choosing the native engine: the build cache, concurrent builds, the fallback line, and
the error instead of it under $AGGNET_NATIVE_ONLY (which tests/conftest.py sets for the whole suite)."""
import logging
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from p4target.backends.hashes import crc16
from p4target.frontend import load_source
from p4target.native.build import BuildError, build, compiler, engine_library
from p4target.native.pipeline import NATIVE_ONLY_ENV, NativePipeline, NativeUnavailable, generate, make_pipeline
from p4target.pipeline import Pipeline

REPO = Path(__file__).resolve().parent.parent

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct m_t { }
struct hs_t { h_t h; }
parser P(packet_in p, out hs_t hs, inout m_t m, inout standard_metadata_t s) {
    state start { p.extract(hs.h); transition accept; } }
control V(inout hs_t hs, inout m_t m) { apply { } }
control I(inout hs_t hs, inout m_t m, inout standard_metadata_t s) {
    %s
    apply { hs.h.b = hs.h.a + 1; s.egress_spec = 2; %s } }
control E(inout hs_t hs, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout hs_t hs, inout m_t m) { apply { } }
control D(packet_out p, in hs_t hs) { apply { p.emit(hs.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
# a hash (16 bits) into a 200-bit field that held all ones: its upper words must be cleared
WIDE_HASH = PROGRAM % ("bit<200> w = ~200w0;", "hash(w, HashAlgorithm.crc16, 200w0, { hs.h.a }, 200w0); "
                       "hs.h.b = hs.h.b + (bit<8>)w + (bit<8>)(w >> 64) + (bit<8>)(w >> 130) + (bit<8>)(w >> 192);")
WIDE_HASH_OUT = bytes([7, (8 + crc16(bytes([7]))) & 0xFF])  # what it sends for 07 00
FAILING_CC = "#!/bin/sh\necho 'cc: error: no space left on device' >&2\nexit 1\n"


def failing_cc(tmp_path: Path) -> dict[str, str]:
    """The environment of a C compiler that fails on everything, with a build cache of its own."""
    cc = tmp_path / "cc-broken"
    cc.write_text(FAILING_CC)
    cc.chmod(0o755)
    return {"CC": str(cc), "XDG_CACHE_HOME": str(tmp_path / "cache")}


def _build(source: str) -> str:
    return str(build(source))


def test_concurrent_builds_of_one_program_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = generate(load_source(PROGRAM % ("", ""), "p.p4"))[1].source
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        paths = pool.map(_build, [source, source])
    assert paths[0] == paths[1] and paths[0].startswith(str(tmp_path))
    left = sorted(p.name for p in (tmp_path / "aggnet" / "native").iterdir())
    engine = engine_library().name  # the engine library both were linked with, built once
    assert left == sorted([Path(paths[0]).name, Path(paths[0]).stem + ".lock", engine, engine + ".lock"])
    assert sorted(p.name for p in (tmp_path / "aggnet" / "native" / engine).iterdir()) == ["constants.h", "libengine.a"]
    pipeline = NativePipeline(load_source(PROGRAM % ("", ""), "p.p4"))
    assert pipeline.process(1, bytes([7, 0, 9])) == [(2, bytes([7, 8, 9]))]


def test_a_computed_value_written_to_a_field_wider_than_128_bits_runs_natively():
    pipeline = make_pipeline(load_source(WIDE_HASH, "wide.p4"), "native")
    try:
        assert isinstance(pipeline, NativePipeline)
        assert pipeline.process(1, bytes([7, 0])) == Pipeline(load_source(WIDE_HASH, "wide.p4")).process(
            1, bytes([7, 0])) == [(2, WIDE_HASH_OUT)]
    finally:
        pipeline.close()


def test_a_program_the_c_compiler_fails_on_runs_on_python_with_one_line(tmp_path, monkeypatch, caplog):
    for name, value in failing_cc(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv(NATIVE_ONLY_ENV)
    program = load_source(PROGRAM % ("", ""), "p.p4")
    with caplog.at_level(logging.WARNING, logger="aggnet.native"):
        pipeline = make_pipeline(program, "native")
    assert isinstance(pipeline, Pipeline)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("p.p4: running on the Python engine: C compiler failed on the engine's ")
    assert line.endswith(": cc: error: no space left on device")
    assert pipeline.process(1, bytes([7, 0, 9])) == [(2, bytes([7, 8, 9]))]


def test_cli_fallback_is_one_stderr_line(tmp_path):
    prog = tmp_path / "p.p4"
    prog.write_text(PROGRAM % ("", ""))
    stf = tmp_path / "t.stf"
    stf.write_text("packet 1 07 00\nexpect 2 07 08\n")
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "stf", str(prog), str(stf)], cwd=REPO,
                         capture_output=True, text=True, timeout=120,
                         env={**without_native_only(), **failing_cc(tmp_path)})
    assert out.returncode == 0 and out.stdout.startswith("PASS"), out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "running on the Python engine" in lines[0] and "no space left" in lines[0], lines


def without_native_only() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != NATIVE_ONLY_ENV}


def test_with_native_only_a_failed_build_is_an_error_not_a_python_run(tmp_path, monkeypatch):
    for name, value in failing_cc(tmp_path).items():
        monkeypatch.setenv(name, value)
    assert os.environ[NATIVE_ONLY_ENV]  # tests/conftest.py: the whole suite runs so
    with pytest.raises(NativeUnavailable) as raised:
        make_pipeline(load_source(PROGRAM % ("", ""), "p.p4"), "native")
    assert str(raised.value).startswith("p.p4: error: the native engine cannot run it (C compiler failed on ")
    assert str(raised.value).endswith("no space left on device) and $AGGNET_NATIVE_ONLY forbids the Python engine")
    assert isinstance(make_pipeline(load_source(PROGRAM % ("", ""), "p.p4"), "python"), Pipeline)  # asked for


def test_cli_with_native_only_exits_with_one_line(tmp_path):
    prog = tmp_path / "p.p4"
    prog.write_text(PROGRAM % ("", ""))
    stf = tmp_path / "t.stf"
    stf.write_text("packet 1 07 00\nexpect 2 07 08\n")
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "stf", str(prog), str(stf)], cwd=REPO,
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, **failing_cc(tmp_path), NATIVE_ONLY_ENV: "1"})
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and out.stdout == "" and len(lines) == 1, (out.returncode, out.stdout, lines)
    assert "$AGGNET_NATIVE_ONLY forbids the Python engine" in lines[0] and "no space left" in lines[0], lines


def test_a_cc_that_is_not_found_is_not_replaced_by_another_compiler(tmp_path, monkeypatch):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    assert compiler() is None
    with pytest.raises(BuildError, match=f"the C compiler \\$CC={tmp_path}/no-such-cc is not found"):
        build("int x;")
