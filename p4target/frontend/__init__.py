"""P4_16 front end of the embedded target: source text -> checked, typed IR (see ir.py).

Heavy parts (the lark grammar) load lazily on the first call, so importing is cheap.
"""
from __future__ import annotations

from collections.abc import Callable

from . import ir


def load_program(path: str, include_dirs: list[str] | None = None, defines: dict[str, str] | None = None,
                 after: Callable[[str, ir.Program], None] | None = None) -> ir.Program:
    """Preprocess, parse, check and lower the P4 file at `path` (`defines`: -D NAME=VALUE);
    raises P4Error on any problem. `after(name, program)` sees the program after checking
    ("check") and after each pass (passes.PASSES)."""
    from .loader import load_program as _load

    return _load(path, include_dirs, defines, after)


def load_source(text: str, filename: str = "<string>", defines: dict[str, str] | None = None,
                after: Callable[[str, ir.Program], None] | None = None) -> ir.Program:
    """Like load_program, for P4 source held in a string: it may include the target's core.p4 and v1model.p4,
    no other file (a client's pushed program names no file of the switch's host)."""
    from .loader import load_source as _load

    return _load(text, filename, None, defines, after)


__all__ = ["ir", "load_program", "load_source"]
