"""Building and choosing the native engine: the build cache, concurrent builds, the fallback line, and
the error instead of it under $AGGNET_NATIVE_ONLY (which tests/conftest.py sets for the whole suite)."""
import logging
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from p4target import load
from p4target.backends.c import generate_c
from p4target.backends.hashes import crc16
from p4target.frontend import load_source
from p4target.load import NATIVE_ONLY_ENV, NativeUnavailable
from p4target.native.build import BuildError, build, compiler, engine_library
from p4target.native.pipeline import NativePipeline
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
    with build(source) as library:
        return str(library)


def test_concurrent_builds_of_one_program_agree(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = generate_c(load.lowered(load_source(PROGRAM % ("", ""), "p.p4")).form).source
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        paths = pool.map(_build, [source, source])
    assert paths[0] == paths[1] and paths[0].startswith(str(tmp_path))
    left = sorted(p.name for p in (tmp_path / "aggnet" / "native").iterdir())
    with engine_library() as lib:
        engine = lib.name  # the engine library both were linked with, built once
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
    monkeypatch.delenv(NATIVE_ONLY_ENV)
    program = load_source(PROGRAM % ("", ""), "p.p4")
    with caplog.at_level(logging.WARNING, logger="aggnet.native"):
        pipeline = load.pipeline(program, "native")
    assert isinstance(pipeline, Pipeline)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("p.p4: running on the Python engine: C compiler failed on the engine's ")
    assert line.endswith(": cc: error: no space left on device")
    assert pipeline.process(1, bytes([7, 0, 9])) == [(2, bytes([7, 8, 9]))]


def stf_test(tmp_path: Path) -> tuple[Path, Path]:
    """PROGRAM and an STF test it passes, as files for `aggnet p4 stf`."""
    prog, stf = tmp_path / "p.p4", tmp_path / "t.stf"
    prog.write_text(PROGRAM % ("", ""))
    stf.write_text("packet 1 07 00\nexpect 2 07 08\n")
    return prog, stf


def test_cli_fallback_is_one_stderr_line(tmp_path):
    prog, stf = stf_test(tmp_path)
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "stf", str(prog), str(stf)], cwd=REPO,
                         capture_output=True, text=True, timeout=120,
                         env={**without_native_only(), **failing_cc(tmp_path)})
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
    with build(source) as library:
        pass
    marker = tmp_path / "marker"
    (tmp_path / "elsewhere.so").write_bytes(planted_library(tmp_path, marker))
    library.unlink()
    library.symlink_to(tmp_path / "elsewhere.so")
    with build(source) as again:
        assert again == library and not library.is_symlink() and library.stat().st_mode & 0o022 == 0
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
    made = []
    for parts in (["a\0", "b"], ["a", "\0b"], ["a\0b"], ["a", "", "b"]):
        with cached("k.txt", parts, lambda out, p=parts: out.write_text(repr(p))) as path:
            made.append(path)
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


def _blob(out: Path) -> None:
    out.write_bytes(bytes(300 << 10))  # 300 KiB


def test_the_cache_keeps_to_its_cap_evicting_the_least_recently_used(tmp_path, monkeypatch):
    """Each distinct program a client pushes adds entries: making one evicts the least recently used until the cache
    holds CACHE_CAP_MB at most; a failed build's C and a dead build's temporary directory are entries too, and a
    failed build leaves no lock file."""
    from p4target.native import build as native_build

    with engine_library() as engine:  # this machine's, so the failed build below builds no engine
        cache = tmp_path / "aggnet" / "native"
        shutil.copytree(engine, cache / engine.name)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    made = []
    for i in range(9):
        with native_build.cached("blob.bin", [str(i)], _blob) as path:
            made.append(path)
    with pytest.raises(native_build.BuildError, match="C compiler failed on the generated program"):
        with build("this is not C"):
            pass
    [failed] = cache.glob("p4-*.c")
    dead = cache / "blob-0123.build-x"  # a build killed before it renamed its output into place
    dead.mkdir()
    (dead / "blob.bin").write_bytes(bytes(300 << 10))
    past = time.time_ns() - 10**12  # everything older than what comes next, oldest first, `made` last
    for k, path in enumerate([*cache.glob("engine-*[0-9a-f]"), failed, dead, *made]):
        os.utime(path, ns=(past + k, past + k))
    with native_build.cached("blob.bin", ["0"], _blob) as path:  # used again: the most recent of them
        assert path == made[0]
    assert len(list(cache.glob("p4-*.lock"))) == 0  # the engine's lock stays, the failed program's is gone
    monkeypatch.setattr(native_build, "CACHE_CAP_MB", 1)
    with native_build.cached("blob.bin", ["9"], _blob) as newest:
        pass
    blobs = sorted(cache.glob("blob-*.bin"))
    assert blobs == sorted([made[0], made[8], newest])  # 900 KiB: a fourth would take it over 1 MiB
    assert not failed.exists() and not dead.exists() and not any(cache.glob("engine-*"))
    assert sorted(cache.glob("*.lock")) == sorted(p.with_suffix(".lock") for p in blobs)


HOLDER = """
import ctypes, sys
from pathlib import Path
from p4target.native.build import cached
def make(out):
    out.write_bytes(bytes(300 << 10))
with cached("held.bin", ["held"], make) as held:
    answer = ctypes.CDLL(sys.argv[1]).answer  # loaded, then left to the cache
    print(held, flush=True)
    sys.stdin.readline()  # the test evicts everything it can meanwhile
    print(answer(), held.exists(), flush=True)
"""


def test_eviction_skips_what_a_live_process_holds_and_a_loaded_library_outlives_it(tmp_path, monkeypatch):
    """A process holding an entry (between looking it up and loading it) keeps it whatever the eviction; a library it
    loaded and released is removed, and the process still calls into it (Linux keeps a mapped file's data)."""
    from p4target.native import build as native_build

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    src = tmp_path / "answer.c"
    src.write_text("int answer(void) { return 42; }\n")

    def make(out: Path) -> None:
        subprocess.run([compiler(), "-shared", "-fPIC", "-o", str(out), str(src)], check=True)

    with native_build.cached("answer.so", ["answer"], make) as library:
        pass
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(library)], cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, env={**os.environ})
    try:
        held = Path(holder.stdout.readline().strip())
        monkeypatch.setattr(native_build, "CACHE_CAP_MB", 0)
        native_build.evict(tmp_path / "aggnet" / "native")
        assert held.exists() and not library.exists()
        out, _ = holder.communicate("go\n", timeout=60)
        assert out.split() == ["42", "True"]
    finally:
        holder.kill()
        holder.wait()


def without_native_only() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != NATIVE_ONLY_ENV}


def test_with_native_only_a_failed_build_is_an_error_not_a_python_run(tmp_path, monkeypatch):
    for name, value in failing_cc(tmp_path).items():
        monkeypatch.setenv(name, value)
    assert os.environ[NATIVE_ONLY_ENV]  # tests/conftest.py: the whole suite runs so
    with pytest.raises(NativeUnavailable) as raised:
        load.pipeline(load_source(PROGRAM % ("", ""), "p.p4"), "native")
    assert str(raised.value).startswith("p.p4: error: the native engine cannot run it (C compiler failed on ")
    assert str(raised.value).endswith("no space left on device) and $AGGNET_NATIVE_ONLY forbids the Python engine")
    assert isinstance(load.pipeline(load_source(PROGRAM % ("", ""), "p.p4"), "python"), Pipeline)  # asked for


def test_cli_with_native_only_exits_with_one_line(tmp_path):
    prog, stf = stf_test(tmp_path)
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
        with build("int x;"):
            pass
