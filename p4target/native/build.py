"""Build a generated program into a shared library with the system C compiler, cached.

The cache key is a hash of everything that goes into the library (the generated C, the
engine's sources, the compiler's version and flags), so a program is compiled once per
machine. Libraries live in $XDG_CACHE_HOME/aggnet/native (default ~/.cache/aggnet/native).
Concurrent builds of the same program do not race or repeat work: the first takes a lock
file for that key and compiles into a temporary file renamed into place (atomic); the
others wait for the lock and find the library. -O1: a 364-lane program's C is large, and
switches compile it at start-up (`python -m p4target.native.build PROG.p4...` warms the
cache beforehand; scripts/setup.sh does it for p4src/).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCES = ("runtime.h", "engine.h", "engine.c")
CFLAGS = ("-O1", "-fPIC", "-shared", "-pthread", "-fno-strict-aliasing", "-w")


class BuildError(Exception):
    """The C compiler is missing or failed (one line; the program then runs on the Python engine)."""


def compiler() -> str | None:
    """The C compiler to use: $CC, else gcc or cc on PATH."""
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aggnet" / "native"


def _identity(cc: str) -> str:
    """The compiler as a cache key: its real path, size and modification time. No `cc --version`:
    the switch process loads pipelines with gRPC running, and a fork there is best avoided."""
    path = os.path.realpath(shutil.which(cc) or cc)
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def build(source: str) -> Path:
    """The path of the shared library for generated C `source` (built now unless cached)."""
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler (gcc) found; scripts/setup.sh installs it")
    h = hashlib.sha256()
    for part in [source, _identity(cc), " ".join(CFLAGS)] + [(HERE / f).read_text() for f in SOURCES]:
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()[:32]
    out_dir = cache_dir()
    lib = out_dir / f"p4-{key}.so"
    if lib.exists():
        return lib
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"p4-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if we die
        if not lib.exists():
            _compile(cc, source, out_dir, key, lib)
    return lib


def _compile(cc: str, source: str, out_dir: Path, key: str, lib: Path) -> None:
    """Compile into a temporary directory, then rename the library into place."""
    with tempfile.TemporaryDirectory(prefix="aggnet-cc-", dir=out_dir) as tmp:
        src = Path(tmp) / "program.c"
        src.write_text(source)
        tmp_lib = Path(tmp) / "program.so"
        cmd = [cc, *CFLAGS, "-I", str(HERE), "-o", str(tmp_lib), str(src), "-lm"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            (out_dir / f"p4-{key}.c").write_text(source)  # kept for debugging the generator
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:300])
            raise BuildError(f"C compiler failed on the generated program ({out_dir / f'p4-{key}.c'}): {first}")
        os.replace(tmp_lib, lib)


def build_tool(source: Path) -> Path:
    """A standalone C program (e.g. the switch benchmark's sender), compiled once and cached
    beside the program libraries."""
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler (gcc) found; scripts/setup.sh installs it")
    text = source.read_text()
    key = hashlib.sha256((text + _identity(cc)).encode()).hexdigest()[:32]
    exe = cache_dir() / f"{source.stem}-{key}"
    if exe.exists():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    tmp = exe.with_name(f"{exe.name}.{os.getpid()}.tmp")
    proc = subprocess.run([cc, "-O2", "-o", str(tmp), str(source)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"C compiler failed on {source}: {proc.stderr.strip()[:300]}")
    os.replace(tmp, exe)
    return exe


def main(argv: list[str] | None = None) -> int:
    """Build (or find cached) the native library of each program given: warms the cache."""
    import argparse

    from p4target.errors import P4Error
    from p4target.frontend import load_program
    from p4target.native.cgen import Unsupported, generate_c

    parser = argparse.ArgumentParser(prog="python -m p4target.native.build", description=main.__doc__)
    parser.add_argument("programs", nargs="+", metavar="PROG.p4")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.programs:
        try:
            print(f"{path}: {build(generate_c(load_program(path)).source)}")
        except Unsupported as exc:
            print(f"{path}: runs on the Python engine (the native engine lacks {exc})")
        except (P4Error, BuildError) as exc:
            print(f"{path}: {exc}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
