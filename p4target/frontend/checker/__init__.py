"""Name resolution and type checking: lark parse tree -> typed IR (ir.Program).

One pass over the declarations in source order (P4 requires declaration before use), in layers
by concern (names.py says how they stack). Every problem raises P4Error with the original
FILE:LINE:COL.
"""
from __future__ import annotations

from lark import Tree

from .. import ir
from ..preprocess import Source
from .v1model import V1ModelRules


class Checker(V1ModelRules):
    """The whole checker: every layer composed."""


def check(tree: Tree, source: Source) -> ir.Program:
    """Resolve and type-check a parsed program into the IR."""
    return Checker(source).run(tree)
