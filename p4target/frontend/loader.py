"""Front-end driver: preprocess -> lark parse (LALR, grammar.py) -> check into the typed IR -> passes."""
from __future__ import annotations

from collections.abc import Callable

from ..errors import P4Error
from . import ir
from .grammar import parse
from .preprocess import preprocess

AfterPass = Callable[[str, ir.Program], None]  # called with a pass's name and the program after it


def load_source(text: str, filename: str = "<string>", include_dirs: list[str] | None = None,
                defines: dict[str, str] | None = None, after: AfterPass | None = None,
                local_includes: bool = False) -> ir.Program:
    """Check P4 source text; see p4target.frontend.load_source. `after(name, program)` sees
    the program after checking ("check") and after each pass; `local_includes`: see preprocess."""
    from .checker import check
    from .passes import lower

    source = preprocess(text, filename, include_dirs, defines, local_includes)
    tree = parse(source)
    program = check(tree, source)
    program.source = filename
    if after is not None:
        after("check", program)
    return lower(program, after)


def load_program(path: str, include_dirs: list[str] | None = None, defines: dict[str, str] | None = None,
                 after: AfterPass | None = None) -> ir.Program:
    """Check the P4 file at `path`; see p4target.frontend.load_program."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise P4Error(f"cannot read P4 program: {e.strerror}", path) from None
    return load_source(text, path, include_dirs, defines, after, local_includes=True)
