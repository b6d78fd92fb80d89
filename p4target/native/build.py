"""Build the engine library and each generated program linked against it, with the system C compiler, cached.

The engine (engine/*.c, its interface in engine/api.h and engine/program.h) is compiled once per
change of its sources, p4target/constants.py (written as constants.h) or the flags, into a static
library; a generated program is compiled and linked with it into a shared library Python loads
(binding.py). Cache keys hash everything that goes into an output (sources, the compiler's identity
and flags), so each is built once per machine. Outputs live in $XDG_CACHE_HOME/aggnet/native
(default ~/.cache/aggnet/native). Concurrent builds of the same output do not race or repeat work:
the first takes a lock file for that key and builds in a temporary directory renamed into place
(atomic); the others wait for the lock and find the output. Programs build at -O1: a 364-lane
program's C is large, and switches compile it at start-up (`aggnet p4 build PROG.p4...` warms the
cache beforehand; scripts/setup.sh does it for p4src/).

The cache holds code this process runs (shared libraries, the front end's pickles), so only the
switch's user may write it: its directories are made 0700, and a cache directory that another user
owns or could write (it, or a directory above it that is not sticky) is not used: the process builds
in a private temporary directory of its own instead, with one warning line (nothing is reused across
processes then, but nothing another user planted runs either). An entry that is not a file or
directory of this user's that only it can write (a symlink, another user's) is built again.
"""
from __future__ import annotations

import atexit
import fcntl
import functools
import hashlib
import logging
import os
import shutil
import stat
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
    """The C compiler to use: $CC, else gcc or cc on PATH."""
    for name in (os.environ.get("CC"), "gcc", "cc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cache_dir() -> Path:
    """The build cache: $XDG_CACHE_HOME/aggnet/native (made 0700) when only this user can write it, else a private
    temporary directory of this process's (see the module docstring)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(os.path.realpath(base)) / "aggnet" / "native"
    try:
        os.makedirs(path.parent.parent, exist_ok=True)
        for made in (path.parent, path):
            try:
                os.mkdir(made, 0o700)
            except FileExistsError:
                pass
        why = _untrusted_dir(path)
    except OSError as exc:
        why = f"cannot be made ({exc.strerror})"
    return path if why is None else _private_fallback(str(path), why)


def _untrusted_dir(path: Path) -> str | None:
    """Why another user could put files in directory `path` (None: nobody but this user and root can)."""
    me = os.geteuid()
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != me:
        return f"is owned by uid {st.st_uid}, not this user (uid {me})"
    if st.st_mode & 0o022:
        return f"is writable by others (mode {stat.S_IMODE(st.st_mode):o})"
    for above in path.parents:  # another user able to rename entries here could swap the whole cache
        st = os.lstat(above)
        if st.st_uid not in (me, 0):
            return f"is inside {above}, which uid {st.st_uid} owns"
        if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
            return f"is inside {above}, which others can write (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _trusted_entry(path: Path) -> bool:
    """Whether cache entry `path` is a file or directory (not a symlink) of this user's that only it can write."""
    st = os.lstat(path)
    return (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)) and st.st_uid == os.geteuid() \
        and not st.st_mode & 0o022


@functools.cache
def _private_fallback(refused: str, why: str) -> Path:
    """A temporary directory only this process uses (removed at exit), instead of cache directory `refused`."""
    path = Path(tempfile.mkdtemp(prefix="aggnet-native-"))
    atexit.register(shutil.rmtree, path, True)
    logging.getLogger("aggnet.native").warning("build cache %s %s: building in %s instead, reusing nothing across "
                                               "processes", refused, why, path)
    return path


def _identity(cc: str) -> str:
    """The compiler as a cache key: its real path, size and modification time. No `cc --version`:
    the switch process loads pipelines with gRPC running, and a fork there is best avoided."""
    path = os.path.realpath(shutil.which(cc) or cc)
    st = os.stat(path)
    return f"{path}:{st.st_size}:{st.st_mtime_ns}"


def _cc() -> str:
    cc = compiler()
    if cc is None:
        raise BuildError("no C compiler (gcc) found; scripts/setup.sh installs it")
    return cc


def _run(cmd: list[str], what: str, keep: tuple[Path, str] | None = None) -> None:
    """Run the compiler; on failure a BuildError with its first error line (`keep`: a source saved for debugging)."""
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        where = ""
        if keep is not None:
            keep[0].write_text(keep[1])
            where = f" ({keep[0]})"
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip()[:300])
        raise BuildError(f"C compiler failed on {what}{where}: {first}")


def cached(name: str, parts: list[str], make: Callable[[Path], None]) -> Path:
    """The cache entry `name`-KEY (KEY hashes `parts`, each length-prefixed so no two lists share a key), made by
    make(temporary path) unless there already."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little") + data)
    out_dir = cache_dir()
    stem, dot, ext = name.partition(".")
    path = out_dir / f"{stem}-{h.hexdigest()}{dot}{ext}"
    if _usable(path):
        return path
    lock = os.open(path.with_name(f"{stem}-{h.hexdigest()}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    with open(lock, "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # released when the file closes, also if we die
        if not _usable(path):
            with tempfile.TemporaryDirectory(prefix="aggnet-cc-", dir=out_dir) as tmp:
                made = Path(tmp) / path.name
                make(made)
                _seal(made)
                os.replace(made, path)
    return path


def _seal(path: Path) -> None:
    """Take group and others' write permission off a new entry and everything in it, whatever the umask."""
    for where in [path, *(Path(d) / f for d, dirs, files in os.walk(path) for f in dirs + files)]:
        if not where.is_symlink():
            os.chmod(where, stat.S_IMODE(os.lstat(where).st_mode) & ~0o022)


def _usable(path: Path) -> bool:
    """Whether cache entry `path` is there to use; one that is not this user's alone is removed (and made again)."""
    if not os.path.lexists(path):
        return False
    if _trusted_entry(path):
        return True
    logging.getLogger("aggnet.native").warning("build cache entry %s is not this user's alone: building it again",
                                               path)
    if stat.S_ISDIR(os.lstat(path).st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)
    return False


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
