"""Build the engine library and each generated program linked against it, with the system C compiler, cached.

The engine (engine/*.c, its interface in engine/api.h and engine/program.h) is compiled once per
change of its sources, p4target/constants.py (written as constants.h) or the flags, into a static
library; a generated program is compiled and linked with it into a shared library Python loads
(engine.py). Cache keys hash everything that goes into an output (sources, the compiler's
identity and flags), so each is built once per machine. Outputs live in $XDG_CACHE_HOME/aggnet/native
(default ~/.cache/aggnet/native). Concurrent builds of the same output do not race or repeat work:
the first takes a lock file for that key and builds in a temporary directory renamed into place
(atomic); the others wait for the lock and find the output. Programs build at -O1: a 364-lane
program's C is large, and switches compile it at start-up (`python -m p4target.native.build
PROG.p4...` warms the cache beforehand; scripts/setup.sh does it for p4src/).
"""
from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from p4target.constants import c_header

HERE = Path(__file__).resolve().parent
ENGINE = HERE / "engine"
COMMON = ("-fPIC", "-pthread", "-fno-strict-aliasing", "-fvisibility=hidden", "-std=gnu11")
ENGINE_CFLAGS = ("-O2", *COMMON, "-Wall", "-Wextra", "-Werror")
# The generated code: -Wall -Wextra as errors but for unused names (backends/c.py declares every local, label and
# action parameter a P4 block might use; over p4src/ and p4c's corpus those are the only warnings it trips).
PROGRAM_CFLAGS = ("-O1", *COMMON, "-Wall", "-Wextra", "-Werror", "-Wno-unused-variable", "-Wno-unused-label",
                  "-Wno-unused-but-set-variable", "-Wno-unused-parameter")
SANITIZE = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g")


class BuildError(Exception):
    """The C compiler is missing or failed (one line; the program then runs on the Python engine)."""


def compiler() -> str | None:
    """The C compiler to use: $CC when set (None if it is not found: never another compiler than the one
    asked for), else gcc or cc on PATH."""
    asked = os.environ.get("CC")
    for name in (asked,) if asked else ("gcc", "cc"):
        if shutil.which(name):
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


def _cc() -> str:
    cc = compiler()
    if cc is None:
        asked = os.environ.get("CC")
        raise BuildError(f"the C compiler $CC={asked} is not found" if asked else
                         "no C compiler (gcc) found; scripts/setup.sh installs it")
    return cc


def _run(cmd: list[str], what: str, keep: tuple[Path, str] | None = None) -> None:
    """Run the compiler; on failure a BuildError with its first error line (`keep`: a source saved for debugging)."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        where = ""
        if keep is not None:
            keep[0].write_text(keep[1])
            where = f" ({keep[0]})"
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln),
                     proc.stderr.strip()[:300] or f"exit {proc.returncode}, no output")
        raise BuildError(f"C compiler failed on {what}{where}: {first}")


def cached(name: str, parts: list[str], make: Callable[[Path], None]) -> Path:
    """The cache entry `name`-KEY (KEY hashes `parts`), made by make(temporary path) unless there already."""
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\0")
    out_dir = cache_dir()
    stem, dot, ext = name.partition(".")
    path = out_dir / f"{stem}-{h.hexdigest()[:32]}{dot}{ext}"
    if path.exists():
        return path
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name.partition(".")[0] + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also if we die
        if not path.exists():
            with tempfile.TemporaryDirectory(prefix="aggnet-cc-", dir=out_dir) as tmp:
                made = Path(tmp) / path.name
                make(made)
                os.replace(made, path)
    return path


def engine_library(sanitize: bool = False) -> Path:
    """The engine's directory in the cache: libengine.a and the constants.h the programs include."""
    cc = _cc()
    flags = [*ENGINE_CFLAGS, *(SANITIZE if sanitize else ())]
    sources = sorted(ENGINE.glob("*.[ch]"))

    def make(out: Path) -> None:
        out.mkdir()
        (out / "constants.h").write_text(c_header())
        objects = [out / f"{src.stem}.o" for src in sorted(ENGINE.glob("*.c"))]
        for obj in objects:
            src = ENGINE / f"{obj.stem}.c"
            _run([cc, *flags, "-I", str(out), "-c", "-o", str(obj), str(src)], f"the engine's {src.name}")
        _run(["ar", "rcs", str(out / "libengine.a"), *map(str, objects)], "the engine library")
        for obj in objects:
            obj.unlink()

    parts = [_identity(cc), " ".join(flags), c_header()] + [f"{p.name}\0{p.read_text()}" for p in sources]
    return cached("engine-asan" if sanitize else "engine", parts, make)


def _program_cmd(cc: str, lib: Path, flags: list[str], out: Path, *sources: Path) -> list[str]:
    return [cc, *flags, "-I", str(ENGINE), "-I", str(lib), "-o", str(out), *map(str, sources),
            "-Wl,--whole-archive", str(lib / "libengine.a"), "-Wl,--no-whole-archive", "-lm"]


def build(source: str) -> Path:
    """The path of the shared library for generated C `source`, linked with the engine (built now unless cached)."""
    cc = _cc()
    lib = engine_library()

    def make(out: Path) -> None:
        src = out.with_name("program.c")
        src.write_text(source)
        _run(_program_cmd(cc, lib, [*PROGRAM_CFLAGS, "-shared"], out, src), "the generated program",
             keep=(cache_dir() / f"{out.stem}.c", source))

    return cached("p4.so", [source, _identity(cc), " ".join(PROGRAM_CFLAGS), lib.name], make)


def build_sanitized(source: str, driver: Path) -> Path:
    """An executable of `driver` (a main()), the generated program and the engine, all built with AddressSanitizer
    and UndefinedBehaviorSanitizer (see scripts/fuzz_engine.py)."""
    cc = _cc()
    lib = engine_library(sanitize=True)
    flags = [*PROGRAM_CFLAGS, *SANITIZE]

    def make(out: Path) -> None:
        src = out.with_name("program.c")
        src.write_text(source)
        _run(_program_cmd(cc, lib, flags, out, src, driver), "the sanitized program",
             keep=(cache_dir() / f"{out.stem}.c", source))

    return cached("p4-asan", [source, driver.read_text(), _identity(cc), " ".join(flags), lib.name], make)


def build_tool(source: Path) -> Path:
    """A standalone C program (e.g. the switch benchmark's sender), compiled once and cached
    beside the program libraries."""
    cc = _cc()

    def make(out: Path) -> None:
        _run([cc, "-O2", "-o", str(out), str(source)], str(source))

    return cached(source.stem, [source.read_text(), _identity(cc)], make)


def main(argv: list[str] | None = None) -> int:
    """Build (or find cached) the native library of each program given: warms the cache."""
    import argparse

    from p4target.backends.c import generate_c
    from p4target.backends.layout import Unsupported
    from p4target.errors import P4Error
    from p4target.frontend import load_program
    from p4target.lowered.from_ir import NotLowered, lower_program

    parser = argparse.ArgumentParser(prog="python -m p4target.native.build", description=main.__doc__)
    parser.add_argument("programs", nargs="+", metavar="PROG.p4")
    args = parser.parse_args(argv)
    failed = 0
    for path in args.programs:
        try:
            print(f"{path}: {build(generate_c(lower_program(load_program(path))).source)}")
        except (NotLowered, Unsupported) as exc:
            print(f"{path}: runs on the Python engine (the native engine lacks {exc.message})")
        except (P4Error, BuildError) as exc:
            print(f"{path}: {exc}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
