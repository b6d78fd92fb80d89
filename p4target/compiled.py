"""A P4 program's front-end output (typed IR and P4Info) and its printed form, built once per machine and shared.

Every switch of a network compiles the device config it is pushed, and the controller compiles
the same program to learn its P4Info: twenty switches each spent about a second of CPU in the
front end on the 364-lane program, one after another on two cores. The result depends only on
the source, the file name it is reported under and the front end's own code, so it is cached
(pickled) under a hash of those three, next to the native engine's builds
(p4target.native.build.cached: a lock per key, written atomically, safe across processes).
Loading the pickle takes about a tenth of the front end's time. Errors are never cached: a bad
program raises P4Error every time, naming its file and line.

The native engine's form of a pushed program (the lowered program and the C printed from it:
`printed`) is cached the same way, keyed also on the lowering's and the printer's code: lowering
and printing the 364-lane program took 1.4 s of CPU a switch, so the 80 switches of a k=8
fat-tree spent about a minute of both cores on the same output; loaded from the cache it takes
a few hundredths of a second.
"""
from __future__ import annotations

import functools
import hashlib
import json
import pickle
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from finsy.proto import p4i

from p4target.frontend import ir

HERE = Path(__file__).resolve().parent
# What the front end's output depends on besides the program: its code, grammar and includes.
FRONT_END = ("frontend/**/*.py", "frontend/*.lark", "include/*.p4", "externs/*.py", "p4info.py", "errors.py")
# What the printed form depends on besides the front end's output: the lowering, the printers, this file.
BACK_END = ("lowered/**/*.py", "backends/*.py", "constants.py", "compiled.py")


@functools.cache
def code_identity(patterns: tuple[str, ...]) -> str:
    """A hash of the code files matching `patterns` (so edited code never reads a stale cache entry)."""
    h = hashlib.sha256()
    for pattern in patterns:
        for path in sorted(HERE.glob(pattern)):
            h.update(str(path.relative_to(HERE)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def front_end_identity() -> str:
    """A hash of the front end's code."""
    return code_identity(FRONT_END)


def _compiled(key: list[str], compile_ir: Callable[[], ir.Program]) -> tuple[ir.Program, p4i.P4Info]:
    from p4target.native.build import cached
    from p4target.p4info import build_p4info

    def make(out: Path) -> None:
        program = compile_ir()
        out.write_bytes(pickle.dumps((program, build_p4info(program).SerializeToString()),
                                     protocol=pickle.HIGHEST_PROTOCOL))

    with cached("frontend.pickle", [front_end_identity(), *key], make) as path:
        program, info = pickle.loads(path.read_bytes())
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


def p4info_file(path: str) -> p4i.P4Info:
    """The P4Info of the P4 file at `path`, cached on its own: a controller needs only that, and reading
    the 364-lane program's IR back to get it took a second."""
    from p4target.device_config import device_config_source
    from p4target.native.build import cached

    def make(out: Path) -> None:
        out.write_bytes(front_end_file(path)[1].SerializeToString())

    key = [front_end_identity(), "file", path, device_config_source(path)]
    with cached("p4info.bin", key, make) as entry:
        return p4i.P4Info.FromString(entry.read_bytes())


def printed(source: str, filename: str) -> tuple[Any, Any, p4i.P4Info] | None:
    """(lowered program, CProgram, P4Info) of P4 source text: what the native engine builds and runs
    (p4target.native.pipeline.generate), cached; None for a program the lowering or the printer
    cannot take (not cached: the native engine then says why as it falls back); P4Error on a bad one."""
    from p4target.backends.layout import Unsupported
    from p4target.lowered.from_ir import NotLowered

    key = _printed_key(source, filename)
    if key in _kept:
        return _kept[key]
    try:
        with _printed_entry(source, filename) as path:
            form, cprog, info = pickle.loads(path.read_bytes())
    except (NotLowered, Unsupported):
        return None
    return form, cprog, p4i.P4Info.FromString(info)


_kept: dict[str, tuple[Any, Any, p4i.P4Info]] = {}  # printed forms this process read once and keeps (keep_printed)


def keep_printed(path: str, filename: str) -> None:
    """Read the printed form of the P4 file at `path` (pushed as device config `filename`) now, and keep it:
    `printed` then returns it without reading the cache file, here and in every process forked from here
    (testbed.launcher: 80 switches unpickled it at 0.1 s of CPU each). Nothing kept for a program the
    native engine cannot take. The pipeline built on it only reads it."""
    from p4target.device_config import device_config_source

    source = device_config_source(path)
    form = printed(source, filename)
    if form is not None:
        _kept[_printed_key(source, filename)] = form


def _printed_key(source: str, filename: str) -> str:
    """What `printed`'s output is kept under in this process: a hash of what it is made from."""
    return hashlib.sha256(json.dumps([front_end_identity(), code_identity(BACK_END), filename, source]).encode()).hexdigest()


def _printed_entry(source: str, filename: str) -> AbstractContextManager[Path]:
    """The cache file of `printed`'s output, made first if need be, held while the block runs."""
    from p4target.native.build import cached
    from p4target.native.pipeline import generate

    def make(out: Path) -> None:
        program, info = front_end(source, filename)
        out.write_bytes(pickle.dumps((*generate(program), info.SerializeToString()), protocol=pickle.HIGHEST_PROTOCOL))

    return cached("printed.pickle", [front_end_identity(), code_identity(BACK_END), "source", filename, source], make)
