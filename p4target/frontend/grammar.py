"""The P4 grammar (p4.lark) as a lark LALR parser: source text -> parse tree, and annotation
bodies parsed or split into tokens on their own (what the checker asks of it).

The lark parser object is built on first use and cached for the process.
"""
from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

from ..errors import P4Error
from .preprocess import Source

if TYPE_CHECKING:
    from lark import Lark, Token, Tree

_GRAMMAR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "p4.lark")
_PARSER: Lark | None = None
_TYPE_NAMES: set[str] = set()  # type names of the source being parsed (read by the lexer callback)

# Declarations that introduce a type name, found by a scan before parsing (as p4c's lexer
# does with its symbol table), so the LALR grammar can tell `T x;` from `a = b;`.
_TYPE_DECL = re.compile(
    r"\b(?:header|header_union|struct|parser|control|package)\s+([A-Za-z_]\w*)"
    r"|\benum\s+(?:(?:bit|int)\s*<\s*\d+\s*>\s*|[A-Za-z_]\w*\s+(?=[A-Za-z_]\w*\s*\{))?([A-Za-z_]\w*)"
    r"|\bextern\s+([A-Za-z_]\w*)\s*(?:<[^>{;]*>)?\s*\{"
    r"|(?<![.\w])(?:typedef|type)\s+[^;=]*?([A-Za-z_]\w*)\s*;"  # not `hdr.type = K;` (a field named type)
)
_TYPE_PARAMS = re.compile(r"\b[A-Za-z_]\w*\s*<\s*([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)\s*>\s*[({]")
_KEYWORDS = {"bit", "int", "varbit", "bool", "error", "string", "void", "tuple", "match_kind"}


def scan_type_names(text: str) -> set[str]:
    """Names the program declares as types (including generic type parameters)."""
    names: set[str] = set()
    for m in _TYPE_DECL.finditer(text):
        names.update(g for g in m.groups() if g)
    for m in _TYPE_PARAMS.finditer(text):
        names.update(n.strip() for n in m.group(1).split(","))
    return names - _KEYWORDS


def _classify(tok: Token) -> Token:
    """An identifier that names a type is a TYPE_IDENT token (P4's grammar needs to tell them apart)."""
    if tok.value in _TYPE_NAMES:
        tok.type = "TYPE_IDENT"
    return tok


def _grammar() -> str:
    """p4.lark plus `_ann_token`: any of its terminals, or a parenthesized run of them."""
    with open(_GRAMMAR, encoding="utf-8") as f:
        text = f.read()
    rules = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
    literals = sorted(set(re.findall(r'"(?:\\.|[^"\\])*"', rules)) - {'"("', '")"'})
    named = sorted(set(re.findall(r"^([A-Z_]+)(?:\.-?\d+)?\s*:", rules, re.M)) | {"TYPE_IDENT"})
    return text + "\n_ann_token: \"(\" _ann_token* \")\" | " + " | ".join(literals + named) + "\n"


class _Duplicate(Exception):
    """A name given twice in one list, found while parsing (the token of the second)."""

    def __init__(self, token: Token):
        super().__init__(str(token))
        self.token = token


def _first_token(node: Tree | Token) -> Token:
    from lark import Token

    return node if isinstance(node, Token) else _first_token(node.children[0])


def _unique_names(tree: Tree) -> Tree:
    """p4c builds a struct's fields and a `{name = value, ...}` expression's as lists indexed by name while it parses,
    so a name given twice there is refused before any later syntax error (`f: Duplicates declaration f`)."""
    seen: set[str] = set()
    for child in tree.children:
        if child is None or getattr(child, "data", None) not in ("kv", "field"):
            continue
        token = _first_token(child.children[0] if child.data == "kv" else child.children[-1])
        if str(token) in seen:
            raise _Duplicate(token)
        seen.add(str(token))
    return tree


def _parser() -> Lark:
    global _PARSER
    if _PARSER is None:
        from lark import Lark, Transformer, v_args

        checks = {rule: v_args(tree=True)(lambda _self, tree: _unique_names(tree))
                  for rule in ("struct_expr", "struct_decl", "header_decl", "header_union_decl")}
        _PARSER = Lark(_grammar(), parser="lalr", lexer="basic", maybe_placeholders=True, start=["start", "ann_args"],
                       propagate_positions=True, lexer_callbacks={"IDENT": _classify}, cache=True,
                       transformer=type("UniqueNames", (Transformer,), checks)())
    return _PARSER


def parse_annotation_body(source: Source, start: int, end: int) -> Tree | None:
    """`source.text[start:end]` (an annotation's body) as an `ann_args` tree with positions in the whole
    source, or None when it is not an expression list (a free-form body)."""
    from lark.exceptions import UnexpectedInput

    text = re.sub(r"[^\n]", " ", source.text[:start]) + source.text[start:end]
    try:
        return _parser().parse(text, start="ann_args")
    except UnexpectedInput:
        return None


def annotation_tokens(text: str) -> list[str]:
    """The tokens of an annotation body, as p4c keeps an unknown annotation's (P4Info joins them with spaces)."""
    return [str(t) for t in _parser().lex(text)]


def _terminal_text(name: str) -> str:
    """How a grammar terminal looks in the source, for 'expected one of' hints."""
    if name == "$END":
        return "end of file"
    try:
        pattern = _parser().get_terminal(name).pattern
    except KeyError:
        return name
    return f"'{pattern.value}'" if pattern.type == "str" else name.lower().replace("_lit", " literal")


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of file"
    return f"'{tok.value}'"


def parse(source: Source) -> Tree:
    """Parse preprocessed source into a lark tree; syntax errors become P4Error."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    global _TYPE_NAMES
    _TYPE_NAMES = scan_type_names(source.text)
    try:
        return _parser().parse(source.text, start="start")
    except UnexpectedToken as e:
        line, col = (e.line, e.column) if e.line and e.line > 0 else (len(source.line_map), 1)
        file, orig = source.locate(line)
        if e.token.type == "UNEXPECTED_CHAR":
            raise P4Error(f"syntax error, unexpected character {e.token.value!r}", file, orig, col) from None
        expected = sorted(_terminal_text(t) for t in (e.expected or ()))[:8]
        hint = f" (expected one of {', '.join(expected)})" if expected else ""
        raise P4Error(f"syntax error, unexpected {_describe(e.token)}{hint}", file, orig, col) from None
    except _Duplicate as e:
        file, orig = source.locate(e.token.line or 1)
        raise P4Error(f"{e.token}: Duplicates declaration {e.token}", file, orig, e.token.column) from None
    except UnexpectedCharacters as e:
        file, orig = source.locate(e.line)
        raise P4Error(f"syntax error, unexpected character {e.char!r}", file, orig, e.column) from None
    except UnexpectedInput as e:  # any other lark input error
        file, orig = source.locate(getattr(e, "line", 1) or 1)
        raise P4Error("syntax error", file, orig, getattr(e, "column", 1) or 1) from None
