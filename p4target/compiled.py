"""A P4 program's front-end output (typed IR and P4Info), built once per machine and shared.

Every switch of a network compiles the device config it is pushed, and the controller compiles
the same program to learn its P4Info: twenty switches each spent about a second of CPU in the
front end on the 364-lane program, one after another on two cores. The result depends only on
the source, the file name it is reported under and the front end's own code (the extern modules
registered now among it: their rules and P4Info entries), so it is cached (pickled) under a hash
of those three, next to the native engine's builds
(p4target.native.build.cached: a lock per key, written atomically, safe across processes).
Loading the pickle takes about a tenth of the front end's time. Errors are never cached: a bad
program raises P4Error every time, naming its file and line.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path

from finsy.proto import p4i

from p4target.extern_registry import registered
from p4target.frontend import ir

HERE = Path(__file__).resolve().parent
# What the front end's output depends on besides the program: its code, grammar and includes.
FRONT_END = ("frontend/**/*.py", "frontend/*.lark", "include/*.p4", "extern_registry.py", "p4info.py", "errors.py")


@functools.cache
def _code_identity() -> str:
    h = hashlib.sha256()
    for pattern in FRONT_END:
        for path in sorted(HERE.glob(pattern)):
            h.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


@functools.cache
def _module_identity(path: str) -> str:
    return hashlib.sha256(path.encode() + b"\0" + Path(path).read_bytes()).hexdigest()


def front_end_identity() -> str:
    """A hash of the front end's code and of the extern modules registered (so an edited front end, or one that
    knows other externs, never reads a stale cache entry)."""
    modules = sorted({inspect.getfile(type(ext)) for ext in registered()})
    return hashlib.sha256(" ".join([_code_identity(), *map(_module_identity, modules)]).encode()).hexdigest()


def _compiled(key: list[str], compile_ir: Callable[[], ir.Program]) -> tuple[ir.Program, p4i.P4Info]:
    from p4target.native.build import cached
    from p4target.p4info import build_p4info

    def make(out: Path) -> None:
        program = compile_ir()
        out.write_bytes(pickle.dumps((program, build_p4info(program).SerializeToString()),
                                     protocol=pickle.HIGHEST_PROTOCOL))

    program, info = pickle.loads(cached("frontend.pickle", [front_end_identity(), *key], make).read_bytes())
    return program, p4i.P4Info.FromString(info)


def front_end(source: str, filename: str) -> tuple[ir.Program, p4i.P4Info]:
    """(IR, P4Info) of P4 source text reported as `filename`; P4Error on a bad program."""
    from p4target.frontend import load_source

    return _compiled(["source", filename, source], lambda: load_source(source, filename))


def front_end_file(path: str) -> tuple[ir.Program, p4i.P4Info]:
    """(IR, P4Info) of the P4 file at `path` (its local includes part of the key); P4Error on a bad program."""
    from p4target.device_config import device_config_source
    from p4target.frontend import load_program

    return _compiled(["file", path, device_config_source(path)], lambda: load_program(path))
