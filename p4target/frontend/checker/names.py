"""Name resolution: scopes, the records of declarations the checker keeps, and what every part of it shares.

The checker is parts, one module per concern, composed by `Checker` (checker/__init__.py):
names -> expressions -> annotations -> types -> calls -> statements -> declarations -> tables ->
blocks -> v1model rules. A part is given the parts below it that it calls; the few calls up that
order (an expression's type named in a cast, a call of a function or of a parser or control) go
through `Checking`, which the composing Checker answers, each by the part named in its docstring.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from lark import Token, Tree

from ...errors import P4Error
from .. import ir
from ..preprocess import Source

Node = Tree | Token  # a node of the parse tree: a rule's subtree or a token
HIDDEN = object()  # a name declared in a scope that lookups there do not find (a for loop's variable after it)


class Scope:
    """A chain of name -> declaration maps."""

    def __init__(self, parent: Scope | None = None):
        self.parent = parent
        self.names: dict[str, object] = {}

    def lookup(self, name: str) -> object:
        scope: Scope | None = self
        while scope is not None:
            if name in scope.names:
                found = scope.names[name]
                return None if found is HIDDEN else found
            scope = scope.parent
        return None


class Context:
    """Where we are: enclosing block/action/function (for returns, exits, prefixes).

    `prefix` is the control-plane prefix of objects declared here (`MyIngress`, or
    `MyIngress.sub` inside an instance `sub`); `block` the Parser/Control being built.
    """

    def __init__(self, kind: str, name: str | None = None, block: ir.Parser | ir.Control | None = None,
                 prefix: str | None = None, function: ir.Function | None = None):
        self.kind = kind  # "top", "parser", "control", "action", "state", "function"
        self.name = name
        self.block = block
        self.prefix = prefix
        self.function = function


@dataclass(eq=False)
class GenericFunction:
    """A function with type parameters, checked once per distinct binding of them."""

    name: str
    node: Tree
    type_params: list[str]
    params: list[ir.Param]  # typed with TypeVars: for inferring a call's bindings
    instances: dict[tuple, ir.Function] = field(default_factory=dict)
    building: set = field(default_factory=set)


@dataclass(eq=False)
class GenericType:
    """`struct S<T> { ... }` (or a header, header_union): checked anew for each list of type arguments."""

    cls: type[ir.StructLikeType]
    name: str
    node: Tree
    params: list[str]
    instances: set[int] = field(default_factory=set)  # id() of its specializations


@dataclass(eq=False)
class BlockDecl:
    """A parser or control declaration. Its tree is checked anew for every instance, with the
    constructor arguments bound and the instance's prefix, so each instance is its own IR."""

    kind: str  # "parser" | "control"
    name: str
    node: Tree
    ctor_params: list[ir.Param]
    type_params: list[str]
    checked: ir.Parser | ir.Control | None = None  # without constructor parameters: the declaration itself
    building: bool = field(default=False)


class Names:
    """What every part shares: the program being built, the scopes, where we are; locations, errors and names
    of parse-tree nodes."""

    def __init__(self, source: Source):
        self.source = source
        self.program = ir.Program()
        self.top = Scope()
        self.ctx = Context("top")
        self.tuple_structs: dict[ir.TupleType, ir.StructType] = {}
        self.loops = 0  # for loops being unrolled around the statement being checked

    def loc(self, node: Node) -> ir.Loc:
        if isinstance(node, Token) and node.line is not None and node.column is not None:
            line, col = node.line, node.column
        elif isinstance(node, Tree) and not node.meta.empty:
            line, col = node.meta.line, node.meta.column
        else:
            return ir.NOWHERE
        file, orig = self.source.locate(line)
        return ir.Loc(file, orig, col)

    def error(self, node: Node | ir.Loc, message: str) -> P4Error:
        loc = node if isinstance(node, ir.Loc) else self.loc(node)
        return P4Error(message, loc.file, loc.line, loc.col)

    def text(self, node: Node) -> str:
        """The source text of a node (for messages and match-field names)."""
        if isinstance(node, Token):
            return str(node)
        if isinstance(node, Tree) and not node.meta.empty:
            return self.source.text[node.meta.start_pos:node.meta.end_pos]
        return "?"

    def name_of(self, node: Node) -> str:
        """A `name`/`ntname`/`type_name` tree or token -> its string."""
        if isinstance(node, Token):
            return str(node)
        return self.name_of(node.children[0])

    def declare(self, scope: Scope, name: str, decl: object, node: Node) -> None:
        if name in scope.names:
            raise self.error(node, f"{name}: duplicate declaration")
        scope.names[name] = decl


class Checking(Protocol):
    """The calls a part makes up the order of parts (see the module docstring), answered by the Checker."""

    def resolve_type(self, node: Tree, scope: Scope) -> ir.Type:
        """A type named in the source (types.py)."""
        ...

    def call(self, callee: Tree, args_node: Tree, scope: Scope, node: Node, explicit: list | None = None) -> ir.Expr:
        """A call of a method, action, function or extern function (calls.py)."""
        ...

    def function(self, node: Tree, bindings: dict[str, ir.Type]) -> ir.Function:
        """A function declaration checked with its type parameters bound (declarations.py)."""
        ...

    def decl_const_decl(self, node: Tree, scope: Scope | None = None) -> ir.ConstDecl:
        """A constant declaration, at the top level or in a block (declarations.py)."""
        ...

    def instantiate(self, decl: BlockDecl, name: str, anns: ir.Annotations, bindings: dict, loc: ir.Loc) -> ir.BlockInstance:
        """A parser/control instance in the block being built (blocks.py)."""
        ...

    def main_instance(self, node: Tree) -> None:
        """The top-level `V1Switch(...) main;` (v1model_rules.py)."""
        ...
