"""Building and choosing the native engine: the build cache, concurrent builds, the fallback line."""
import logging
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path

import pytest

from p4target import load
from p4target.backends.c import generate_c
from p4target.backends.hashes import crc16
from p4target.frontend import load_source
from p4target.native.build import build, compiler, engine_library
from p4target.native.pipeline import NativePipeline
from p4target.pipeline import Pipeline

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler for the native engine")

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
    source = generate_c(load.lowered(load_source(PROGRAM % ("", ""), "p.p4")).form).source
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        paths = pool.map(_build, [source, source])
    assert paths[0] == paths[1] and paths[0].startswith(str(tmp_path))
    left = sorted(p.name for p in (tmp_path / "aggnet" / "native").iterdir())
    engine = engine_library().name  # the engine library both were linked with, built once
    assert left == sorted([Path(paths[0]).name, Path(paths[0]).stem + ".lock", engine, engine + ".lock"])
    assert sorted(p.name for p in (tmp_path / "aggnet" / "native" / engine).iterdir()) == ["constants.h", "libengine.a"]
    pipeline = load.native(load_source(PROGRAM % ("", ""), "p.p4"))
    assert pipeline.process(1, bytes([7, 0, 9])) == [(2, bytes([7, 8, 9]))]


def test_a_computed_value_written_to_a_field_wider_than_128_bits_runs_natively():
    pipeline = load.pipeline(load_source(WIDE_HASH, "wide.p4"), "native")
    try:
        assert isinstance(pipeline, NativePipeline)
        assert pipeline.process(1, bytes([7, 0])) == load.pipeline(load_source(WIDE_HASH, "wide.p4"), "python").process(
            1, bytes([7, 0])) == [(2, WIDE_HASH_OUT)]
    finally:
        pipeline.close()


def test_a_program_the_c_compiler_fails_on_runs_on_python_with_one_line(tmp_path, monkeypatch, caplog):
    for name, value in failing_cc(tmp_path).items():
        monkeypatch.setenv(name, value)
    program = load_source(PROGRAM % ("", ""), "p.p4")
    with caplog.at_level(logging.WARNING, logger="aggnet.native"):
        pipeline = load.pipeline(program, "native")
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
                         capture_output=True, text=True, timeout=120, env={**os.environ, **failing_cc(tmp_path)})
    assert out.returncode == 0 and out.stdout.startswith("PASS"), out.stdout + out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "running on the Python engine" in lines[0] and "no space left" in lines[0], lines


def planted_library(tmp_path: Path, marker: Path) -> bytes:
    """A shared library that runs `touch marker` when it is loaded."""
    src = tmp_path / "planted.c"
    src.write_text(f'#include <stdlib.h>\n__attribute__((constructor)) static void planted(void) {{ '
                   f'if (system("touch {marker}")) {{ }} }}\n')
    subprocess.run([compiler(), "-shared", "-fPIC", "-o", str(tmp_path / "planted.so"), str(src)], check=True)
    return (tmp_path / "planted.so").read_bytes()


class Planted:
    """A pickle that runs `touch marker` when it is loaded."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def test_a_cache_others_can_write_is_not_used(tmp_path, monkeypatch, caplog):
    """A front-end pickle planted where the switch would find it, in a cache directory anyone can write: it is not
    loaded (nor is anything else there: libraries too come from the cache directory); the process uses a private
    directory of its own and says so in one line."""
    import pickle

    from p4target.compiled import front_end
    from p4target.native.build import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    text = PROGRAM % ("", "")
    cache = tmp_path / "cache" / "aggnet" / "native"
    front_end(text, "p.p4")
    [frontend] = cache.glob("frontend-*.pickle")
    marker = tmp_path / "marker"
    frontend.write_bytes(pickle.dumps(Planted(marker)))
    cache.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="aggnet.native"):
        program = front_end(text, "p.p4")[0]
        private = cache_dir()
    assert not marker.exists()
    assert load.pipeline(program, "python").process(1, bytes([7, 0, 9])) == [(2, bytes([7, 8, 9]))]
    assert private != cache and private.stat().st_mode & 0o077 == 0
    [line] = {r.getMessage() for r in caplog.records}
    assert line == f"build cache {cache} is writable by others (mode 777): building in {private} instead, reusing " \
                   "nothing across processes"


def test_a_cache_entry_that_is_a_symlink_is_built_again(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    source = generate_c(load.lowered(load_source(PROGRAM % ("", ""), "p.p4")).form).source
    library = build(source)
    marker = tmp_path / "marker"
    (tmp_path / "elsewhere.so").write_bytes(planted_library(tmp_path, marker))
    library.unlink()
    library.symlink_to(tmp_path / "elsewhere.so")
    assert build(source) == library and not library.is_symlink() and library.stat().st_mode & 0o022 == 0
    load.native(load_source(PROGRAM % ("", ""), "p.p4")).close()
    assert not marker.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a directory to another user")
def test_a_cache_another_user_owns_is_not_used(tmp_path, monkeypatch):
    from p4target.native.build import cache_dir

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    cache = tmp_path / "cache" / "aggnet" / "native"
    cache.mkdir(parents=True, mode=0o700)
    os.chown(cache, 65534, 65534)
    assert cache_dir() != cache and cache_dir().stat().st_uid == 0 and cache_dir().stat().st_mode & 0o077 == 0


def test_cache_keys_tell_every_list_of_parts_apart(tmp_path, monkeypatch):
    from p4target.native.build import cached

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made = [cached("k.txt", parts, lambda out, p=parts: out.write_text(repr(p)))
            for parts in (["a\0", "b"], ["a", "\0b"], ["a\0b"], ["a", "", "b"])]
    assert len(set(made)) == 4 and [p.read_text() for p in made] == [repr(["a\0", "b"]), repr(["a", "\0b"]),
                                                                      repr(["a\0b"]), repr(["a", "", "b"])]
    assert (tmp_path / "aggnet").stat().st_mode & 0o777 == 0o700


def test_aggnet_p4_build_warms_the_cache_and_names_each_program(tmp_path):
    """`aggnet p4 build` (scripts/setup.sh runs it on p4src/): one line per program, its library or why not."""
    good, bad = tmp_path / "p.p4", tmp_path / "bad.p4"
    good.write_text(PROGRAM % ("", ""))
    bad.write_text("control C(")
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "aggnet"), "p4", "build", str(good), str(bad)],
                          capture_output=True, text=True, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")})
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines[0].startswith(f"{good}: {tmp_path / 'cache'}") and lines[0].endswith(".so")
    assert lines[1].startswith(f"{bad}:") and "error" in lines[1] and len(lines) == 2
