"""Build the engine library and each generated program linked against it, with the system C compiler, cached.

The engine (engine/*.c, its interface in engine/api.h and engine/program.h) is compiled once per
change of its sources, p4target/constants.py (written as constants.h) or the flags, into a static
library; a generated program is compiled and linked with it into a shared library Python loads
(engine.py). Cache keys hash everything that goes into an output (sources, the compiler's identity
and flags), so each is built once per machine. Outputs live in $XDG_CACHE_HOME/aggnet/native
(default ~/.cache/aggnet/native). Concurrent builds of the same output do not race or repeat work:
the first takes a lock file for that key and builds in a temporary directory renamed into place
(atomic); the others wait for the lock and find the output. Programs build at -O1: a 364-lane
program's C is large, and switches compile it at start-up (`python -m p4target.native.build
PROG.p4...` warms the cache beforehand; scripts/setup.sh does it for p4src/).

The cache holds code this process runs (shared libraries, the front end's pickles), so only the
switch's user may write it: its directories are made 0700, and a cache directory that another user
owns or could write (it, or a directory above it that is not sticky) is not used: the process builds
in a private temporary directory of its own instead, with one warning line (nothing is reused across
processes then, but nothing another user planted runs either). An entry that is not a file or
directory of this user's that only it can write (a symlink, another user's) is built again.

The cache is capped (CACHE_CAP_MB): each distinct program a client pushes adds a front-end pickle
and a library, so making an entry evicts the least recently used ones (by modification time, which
each use renews) until the cache holds at most the cap. A failed build's C (saved for debugging)
and a killed build's temporary directory are entries like the others; a failed build leaves no lock
file. Eviction never removes an entry a process holds: `cached` is a context manager that keeps a
shared lock on the entry's lock file from looking it up until the block ends (the library loaded,
the pickle read), and eviction takes each lock exclusively without waiting, skipping those it cannot
take. Once loaded, an entry's removal is harmless: Linux keeps an unlinked file's data while a
mapping (a dlopen'd library, a running executable) or an open descriptor holds it.
"""
from __future__ import annotations

import atexit
import contextlib
import fcntl
import functools
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

from p4target.constants import c_header

HERE = Path(__file__).resolve().parent
ENGINE = HERE / "engine"
CACHE_CAP_MB = 2048  # the whole cache: this machine's held 746 MB after many runs of the suite and p4src/
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


@contextlib.contextmanager
def cached(name: str, parts: list[str], make: Callable[[Path], None]) -> Iterator[Path]:
    """The cache entry `name`-KEY (KEY hashes `parts`, each length-prefixed so no two lists share a key), made by
    make(temporary path) unless there already; no eviction removes it while the block runs (see the module
    docstring). Making one evicts the least recently used entries that take the cache over CACHE_CAP_MB."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "little") + data)
    out_dir = cache_dir()
    stem, dot, ext = name.partition(".")
    key = f"{stem}-{h.hexdigest()}"
    path, lock_path = out_dir / f"{key}{dot}{ext}", out_dir / f"{key}.lock"
    made = False
    while True:
        lock = _locked(lock_path, fcntl.LOCK_SH)
        if _present(path):
            break
        fcntl.flock(lock, fcntl.LOCK_EX)  # to make it (not atomic: the lock file may have been removed meanwhile)
        if not _still(lock, lock_path):
            lock.close()
            continue
        if not _usable(path):
            try:
                with tempfile.TemporaryDirectory(prefix=f"{key}.build-", dir=out_dir) as tmp:
                    made_at = Path(tmp) / path.name
                    make(made_at)
                    _seal(made_at)
                    os.replace(made_at, path)
            except BaseException:
                lock_path.unlink()  # a failure leaves no lock file behind (errors are not cached)
                lock.close()
                evict(out_dir)  # what it left (a failed build's C) counts too
                raise
            made = True
        fcntl.flock(lock, fcntl.LOCK_SH)  # to use it; again not atomic
        if _still(lock, lock_path) and _present(path):
            break
        lock.close()
    try:
        os.utime(path)  # its last use, for the eviction's order
        if made:
            evict(out_dir)
        yield path
    finally:
        lock.close()


def _locked(lock_path: Path, how: int) -> IO[str]:
    """The lock file at `lock_path`, open and locked `how` (fcntl.LOCK_SH or LOCK_EX), made if missing."""
    while True:
        lock = open(os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600), "w")
        fcntl.flock(lock, how)  # released when the file closes, also if the process dies
        if _still(lock, lock_path):
            return lock
        lock.close()


def _still(lock: IO[str], lock_path: Path) -> bool:
    """Whether the open `lock` is still the file at `lock_path` (an eviction removes lock files it holds)."""
    try:
        there = os.stat(lock_path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(lock.fileno())
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def evict(out_dir: Path) -> None:
    """Remove the least recently used entries of cache `out_dir` (a failed build's C and a dead build's temporary
    directory are entries too) until it holds at most CACHE_CAP_MB, skipping those in use."""
    entries = []
    for entry in os.scandir(out_dir):
        try:
            if not entry.name.endswith(".lock"):
                entries.append((entry.stat(follow_symlinks=False).st_mtime_ns, _size(entry), Path(entry.path)))
        except FileNotFoundError:
            continue  # another process removed it meanwhile
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= CACHE_CAP_MB << 20:
            return
        if _remove_unused(path):
            total -= size


def _size(entry: os.DirEntry) -> int:
    if not entry.is_dir(follow_symlinks=False):
        return entry.stat(follow_symlinks=False).st_size
    return sum(os.lstat(os.path.join(d, f)).st_size for d, _, files in os.walk(entry.path) for f in files)


def _remove_unused(path: Path) -> bool:
    """Remove entry `path` and its lock file unless a process holds the lock (it uses or makes the entry)."""
    lock_path = path.with_name(path.name.partition(".")[0] + ".lock")
    try:
        lock = open(os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600), "w")
    except OSError:
        return False
    with lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        if not _still(lock, lock_path):
            return False
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            Path(path).unlink(missing_ok=True)
        lock_path.unlink()
    return True


def _present(path: Path) -> bool:
    """Whether cache entry `path` is there and this user's alone (_usable, without removing anything)."""
    return os.path.lexists(path) and _trusted_entry(path)


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


def engine_library(sanitize: bool = False) -> contextlib.AbstractContextManager[Path]:
    """The engine's directory in the cache (kept while the block runs): libengine.a and the constants.h the programs
    include."""
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


def build(source: str) -> contextlib.AbstractContextManager[Path]:
    """The shared library for generated C `source`, linked with the engine (built now unless cached), kept while the
    block runs: load it there (once loaded, its removal from the cache does not matter, see the module docstring)."""
    return _linked("p4.so", "the generated program", source, sanitize=False)


def build_sanitized(source: str, driver: Path) -> contextlib.AbstractContextManager[Path]:
    """An executable of `driver` (a main()), the generated program and the engine, all built with AddressSanitizer
    and UndefinedBehaviorSanitizer (see scripts/fuzz_engine.py), kept while the block runs."""
    return _linked("p4-asan", "the sanitized program", source, True, driver)


@contextlib.contextmanager
def _linked(name: str, what: str, source: str, sanitize: bool, *also: Path) -> Iterator[Path]:
    """Generated C `source` (and the files `also`) linked with the engine: a shared library, or with `sanitize` an
    executable built with the sanitizers; cache entry `name` (a failed build's C saved beside it, an entry too)."""
    cc = _cc()
    flags = [*PROGRAM_CFLAGS, *(SANITIZE if sanitize else ("-shared",))]
    with engine_library(sanitize) as lib:
        def make(out: Path) -> None:
            src = out.with_name("program.c")
            src.write_text(source)
            _run(_program_cmd(cc, lib, flags, out, src, *also), what, keep=(cache_dir() / f"{out.stem}.c", source))

        parts = [source, *(p.read_text() for p in also), _identity(cc), " ".join(flags), lib.name]
        with cached(name, parts, make) as path:
            yield path


def build_tool(source: Path) -> contextlib.AbstractContextManager[Path]:
    """A standalone C program (e.g. the switch benchmark's sender), compiled once and cached beside the program
    libraries, kept while the block runs."""
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
            with build(generate_c(lower_program(load_program(path))).source) as library:
                print(f"{path}: {library}")
        except (NotLowered, Unsupported) as exc:
            print(f"{path}: runs on the Python engine (the native engine lacks {exc.message})")
        except (P4Error, BuildError) as exc:
            print(f"{path}: {exc}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
