"""Annotations: their bodies read as p4c reads them (expressions for the ones it evaluates)."""
from __future__ import annotations

import re

from lark import Tree

from .. import ir
from ..grammar import annotation_tokens, parse_annotation_body
from ..typing import as_underlying
from .constants import unquote
from .expressions import Expressions
from .names import Names, Node

# Annotations whose bodies p4c reads as expressions (any other may hold free-form tokens)
EXPRESSION_ANNOTATIONS = {"name", "id", "field_list", "priority", "max_group_size", "selector_size_semantics",
                          "max_member_weight", "controller_header", "brief", "description", "match"}
_INTEGER = re.compile(r"\d\w*")


class Annotations:
    """`@name(...)`, `@a[k=v]` and the rest -> ir.Annotations."""

    def __init__(self, n: Names, e: Expressions):
        self.n, self.e = n, e

    def annotations(self, node: Tree | None) -> ir.Annotations:
        anns = ir.Annotations()
        if node is None:
            return anns
        for a in node.children:
            name = self.n.name_of(a.children[0])
            if a.data == "structured_annotation":
                anns.append(ir.Annotation(name, self.structured_args(a), self.n.loc(a), structured=True))
                continue
            body = a.children[1] if len(a.children) > 1 else None
            text = None
            given: list = []
            if body is not None:
                start, end = body.meta.start_pos + 1, body.meta.end_pos - 1
                text = " ".join(annotation_tokens(self.n.source.text[start:end]))
                args_tree = parse_annotation_body(self.n.source, start, end)
                if args_tree is None and name in EXPRESSION_ANNOTATIONS:
                    raise self.n.error(body, f"@{name}: the annotation's body must be a list of expressions")
                given = [c for c in args_tree.children if c is not None] if args_tree is not None else []
            if name == "name" and (len(given) != 1 or getattr(given[0], "data", "") != "string_lit"):
                raise self.n.error(a, f"{self.n.text(given[0]) if given else '@name'}: @name annotation's value must be a string")
            args: list[int | str]
            if name == "field_list":  # p4c evaluates these: named constants are allowed
                args = [self.field_list_index(c) for c in given]
            else:
                args = [self.annotation_arg(c) for c in given]
            if name == "command_line":  # options for p4c, as its ApplyOptionsPragmas reads them (passes/unroll.py)
                self.n.program.command_line += [str(x) for x in args]
            anns.append(ir.Annotation(name, args, self.n.loc(a), text))
        return anns

    def check_translation(self, t: ir.Type, where: Node) -> None:
        """A type P4Info describes (a table key's, an action parameter's) with `@p4runtime_translation(URI, T)`:
        p4c's P4Info reads T only as `bit<N>`, `string` or an integer literal, and cannot be written for
        anything else (`bool`, `int<32>`, `bit<5+3>`, issue2283_2-bmv2.p4); a type P4Info never shows is
        not looked at, as p4c does not."""
        a = t.annotations.get("p4runtime_translation") if isinstance(t, ir.NewType) else None
        if a is None or a.body is None:
            return
        kind = annotation_tokens(a.body)[2:]
        if not kind or kind == ["string"] or (len(kind) == 1 and _INTEGER.fullmatch(kind[0])) or (
                len(kind) == 4 and kind[:2] == ["bit", "<"] and _INTEGER.fullmatch(kind[2]) and kind[3] == ">"):
            return
        raise self.n.error(a.loc, f"@p4runtime_translation: its type must be bit<N>, string or an integer, "
                                  f"not {' '.join(kind)} (p4c cannot write the P4Info of {self.n.text(where)})")

    def structured_args(self, node: Tree) -> list:
        """`@a[v, ...]` -> [v, ...] or `@a[k=v, ...]` -> [(k, v), ...]: constants (int, str, bool), as P4Info holds them."""
        out: list = []
        items = [c for c in node.children[1:] if c is not None]
        for item in items:
            key = self.n.name_of(item.children[0]) if item.data == "ann_kv" else None
            e = self.e.expr(item.children[1] if key is not None else item, self.n.top)
            if not isinstance(e, (ir.Constant, ir.BoolLiteral, ir.StringLiteral)):
                raise self.n.error(item, f"{self.n.text(item)}: a structured annotation's values must be compile-time constants")
            out.append((key, e.value) if key is not None else e.value)
        if len({isinstance(v, tuple) for v in out}) > 1:
            raise self.n.error(node, f"@{self.n.name_of(node.children[0])}: mixes key=value pairs and plain expressions")
        keys = [v[0] for v in out if isinstance(v, tuple)]
        dup = next((k for i, k in enumerate(keys) if k in keys[:i]), None)
        if dup is not None:
            raise self.n.error(node, f"{dup}: Duplicates declaration {dup}")
        return out

    def field_list_index(self, node: Tree) -> int:
        v = self.e.expr(node, self.n.top)
        if isinstance(v.type, ir.EnumType) and v.type.underlying is not None:  # an enum naming the lists, as p4c's samples do
            v = as_underlying(v, v.type.underlying)
        if not isinstance(v, ir.Constant) or v.value < 0:
            raise self.n.error(node, f"{self.n.text(node)}: a @field_list index must be a non-negative integer constant")
        return v.value

    def annotation_arg(self, node: Node) -> int | str:
        if isinstance(node, Tree):
            if node.data == "string_lit":
                return unquote(str(node.children[0]))
            if node.data == "int_lit":
                return self.e.int_literal(node).value
            if node.data == "unop" and str(node.children[0]) == "-" and getattr(node.children[1], "data", "") == "int_lit":
                return -self.e.int_literal(node.children[1]).value
        return re.sub(r"\s+", "", self.n.text(node))
