"""Name resolution and type checking: lark parse tree -> typed IR (ir.Program).

One pass over the declarations in source order (P4 requires declaration before use), by parts, one
module per concern (names.py says in which order they stand), composed by `Checker`. Every problem
raises P4Error with the original FILE:LINE:COL.
"""
from __future__ import annotations

from lark import Tree

from ...errors import P4Error
from .. import ir
from ..preprocess import Source
from .annotations import Annotations
from .blocks import Blocks
from .calls import Calls
from .declarations import Declarations
from .expressions import Expressions
from .names import BlockDecl, Names, Node, Scope
from .references import undeclared
from .statements import Statements
from .tables import Tables
from .types import Types
from .v1model_rules import V1ModelRules


class Checker:
    """The checker's parts, each given the parts below it that it calls; the calls up that order (names.Checking)
    are answered here, and the top-level declarations go each to the part that checks its kind."""

    def __init__(self, source: Source):
        self.n = Names(source)
        self.e = Expressions(self.n, self)
        self.an = Annotations(self.n, self.e)
        self.ty = Types(self.n, self.e, self.an)
        self.ca = Calls(self.n, self.e, self)
        self.st = Statements(self.n, self.e, self.an, self.ty, self.ca, self)
        self.de = Declarations(self.n, self.e, self.an, self.ty, self.ca, self.st)
        self.tb = Tables(self.n, self.e, self.an, self.ca, self.de)
        self.bl = Blocks(self.n, self.e, self.an, self.ty, self.ca, self.st, self.de, self.tb, self)
        self.v1 = V1ModelRules(self.n, self.ca, self.bl)

    def run(self, tree: Tree) -> ir.Program:
        try:
            for decl in tree.children:
                self.declaration(decl)
        except P4Error:
            name = undeclared(tree)  # p4c resolves all names before it checks types: such a name is its first error
            if name is not None:
                raise self.n.error(name, f"{name}: declaration not found") from None
            raise
        if self.n.program.main is None:
            last_line = self.n.source.line_map[-1][0] if self.n.source.line_map else None
            raise P4Error("no main package instantiation (V1Switch(...) main;)", last_line)
        return self.n.program

    def declaration(self, node: Tree) -> None:
        name = "decl_" + node.data
        handler = getattr(self.de, name, None) or getattr(self.bl, name, None)
        if handler is None:
            raise self.n.error(node, f"unsupported: {node.data.replace('_', ' ')}")
        handler(node)

    # -- names.Checking

    def resolve_type(self, node: Tree, scope: Scope) -> ir.Type:
        return self.ty.resolve_type(node, scope)

    def call(self, callee: Tree, args_node: Tree, scope: Scope, node: Node, explicit: list | None = None) -> ir.Expr:
        return self.ca.call(callee, args_node, scope, node, explicit)

    def function(self, node: Tree, bindings: dict[str, ir.Type]) -> ir.Function:
        return self.de.function(node, bindings)

    def decl_const_decl(self, node: Tree, scope: Scope | None = None) -> ir.ConstDecl:
        return self.de.decl_const_decl(node, scope)

    def instantiate(self, decl: BlockDecl, name: str, anns: ir.Annotations, bindings: dict, loc: ir.Loc) -> ir.BlockInstance:
        return self.bl.instantiate(decl, name, anns, bindings, loc)

    def main_instance(self, node: Tree) -> None:
        self.v1.main_instance(node)


def check(tree: Tree, source: Source) -> ir.Program:
    """Resolve and type-check a parsed program into the IR."""
    return Checker(source).run(tree)
