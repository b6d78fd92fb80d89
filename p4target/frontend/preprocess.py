"""A small C-style preprocessor for P4 sources, with a line map back to the original files.

Supports `#include <f>` / `#include "f"`, `#define NAME value` and function-like
`#define NAME(a, b) body` (with `#a` and `x ## y`), `#undef`, `-D NAME[=VALUE]`
(`defines`), `#ifdef`/`#ifndef`/`#if`/`#elif`/`#else`/`#endif` (conditions: integers,
defined(X), macro names, C's operators, computed in 64 bits as cpp does). Comments are blanked
out first so every output line maps to exactly one original (file, line); columns stay exact
unless a macro on that line expands to a different length. A macro call's arguments must be
on one line.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import P4Error

INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")

_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
_IDENT = re.compile(r"\b[A-Za-z_]\w*")
_STRING_OR_IDENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\b[A-Za-z_]\w*')
_DIRECTIVE = re.compile(r"\s*#\s*(\w+)\s*(.*)$")
_NAME = re.compile(r"[A-Za-z_]\w*$")


@dataclass
class Macro:
    """A #define: `params` None for an object-like macro."""

    body: str
    params: list[str] | None = None


def strip_comments(text: str) -> str:
    """Blank out comments, keeping newlines (and string literals) in place."""

    def blank(m: re.Match) -> str:
        s = m.group(0)
        if s.startswith('"'):
            return s
        return "".join("\n" if ch == "\n" else " " for ch in s)

    return _COMMENT_OR_STRING.sub(blank, text)


@dataclass
class Source:
    """Preprocessed text plus, per output line (0-based), its original (file, line)."""

    text: str
    line_map: list[tuple[str, int]] = field(default_factory=list)

    def locate(self, line: int) -> tuple[str, int]:
        """Original (file, line) for a 1-based output line."""
        if 1 <= line <= len(self.line_map):
            return self.line_map[line - 1]
        return self.line_map[-1] if self.line_map else ("<unknown>", line)


class _Preprocessor:
    def __init__(self, include_dirs: list[str]):
        self.include_dirs = include_dirs
        self.macros: dict[str, Macro] = {}
        self.out_lines: list[str] = []
        self.line_map: list[tuple[str, int]] = []
        self.depth = 0

    def expand(self, text: str, file: str, line: int, seen: frozenset = frozenset()) -> str:
        """`text` with its macros expanded (a macro is not expanded inside its own expansion)."""
        if not self.macros.keys() & set(_IDENT.findall(text)):
            return text
        out: list[str] = []
        i = 0
        while True:
            m = _STRING_OR_IDENT.search(text, i)
            if m is None:
                out.append(text[i:])
                return "".join(out)
            out.append(text[i:m.start()])
            word, i = m.group(0), m.end()
            macro = self.macros.get(word)
            if word.startswith('"') or macro is None or word in seen:
                out.append(word)
                continue
            if macro.params is None:
                out.append(self.expand(macro.body, file, line, seen | {word}))
                continue
            j = len(text) - len(text[i:].lstrip())
            if j >= len(text) or text[j] != "(":
                out.append(word)  # a function-like macro's name without arguments is just a name
                continue
            args, i = self.call_args(text, j, word, file, line)
            out.append(self.expand(self.substitute(word, macro, args, file, line, seen), file, line, seen | {word}))

    def call_args(self, text: str, start: int, name: str, file: str, line: int) -> tuple[list[str], int]:
        """The arguments of the macro call whose '(' is at text[start]; and the index after ')'."""
        args, depth, cur, i = [], 0, [], start + 1
        while i < len(text):
            ch = text[i]
            if ch == '"':
                m = _COMMENT_OR_STRING.match(text, i)
                end = m.end() if m else len(text)
                cur.append(text[i:end])
                i = end
                continue
            if ch == "(":
                depth += 1
            elif ch == ")":
                if depth == 0:
                    args.append("".join(cur).strip())
                    return args, i + 1
                depth -= 1
            elif ch == "," and depth == 0:
                args.append("".join(cur).strip())
                cur = []
                i += 1
                continue
            cur.append(ch)
            i += 1
        raise P4Error(f"unterminated call of macro {name} (its arguments must be on one line)", file, line, start + 1)

    def substitute(self, name: str, macro: Macro, args: list[str], file: str, line: int, seen: frozenset) -> str:
        """The body of a function-like macro with its parameters replaced (`#p` quotes the
        argument, `a ## b` pastes; other arguments are expanded first, as in C)."""
        params = macro.params or []
        if args == [""] and not params:
            args = []
        if len(args) != len(params):
            raise P4Error(f"macro {name} takes {len(params)} arguments, got {len(args)}", file, line, 1)
        raw = dict(zip(params, args))
        body = re.sub(r"#\s*([A-Za-z_]\w*)(?!\w)",
                      lambda m: '"' + raw[m.group(1)].replace('"', '\\"') + '"' if m.group(1) in raw else m.group(0),
                      macro.body.replace("##", "\0"))
        pieces = body.split("\0")
        pasted = []
        for k, piece in enumerate(pieces):
            if len(pieces) > 1:  # an operand of ## takes its argument unexpanded
                piece = piece.strip() if 0 < k < len(pieces) - 1 else (piece.rstrip() if k == 0 else piece.lstrip())
                piece = _IDENT.sub(lambda m: raw.get(m.group(0), m.group(0)), piece)
            else:
                piece = _STRING_OR_IDENT.sub(
                    lambda m: self.expand(raw[m.group(0)], file, line, seen) if m.group(0) in raw else m.group(0), piece)
            pasted.append(piece)
        return "".join(pasted)

    def run_file(self, path: str, text: str) -> None:
        self.depth += 1
        if self.depth > 50:
            raise P4Error("#include nested too deeply", path, 1, 1)
        lines = strip_comments(text).split("\n")
        # stack of (taking_this_branch, some_branch_taken, parent_active)
        conds: list[list[bool]] = []
        i = 0
        while i < len(lines):
            raw = lines[i]
            lineno = i + 1
            while raw.endswith("\\") and i + 1 < len(lines):  # line continuation
                i += 1
                raw = raw[:-1] + " " + lines[i]
                self._emit("", path, lineno)
            i += 1
            active = all(c[0] for c in conds)
            m = _DIRECTIVE.match(raw)
            if not m:
                self._emit(self.expand(raw, path, lineno) if active else "", path, lineno)
                continue
            self._emit("", path, lineno)
            name, rest = m.group(1), m.group(2).strip()
            col = raw.index("#") + 1
            if name in ("ifdef", "ifndef", "if"):
                parent = active
                if not parent:
                    value = False
                elif name == "if":
                    value = self.eval_condition(rest, path, lineno, col)
                else:
                    value = (rest.split()[0] in self.macros) if rest else False
                    value = value if name == "ifdef" else not value
                conds.append([parent and value, parent and value, parent])
            elif name in ("elif", "else", "endif"):
                if not conds:
                    raise P4Error(f"#{name} without #if", path, lineno, col)
                c = conds[-1]
                if name == "endif":
                    conds.pop()
                elif c[1] or not c[2]:
                    c[0] = False
                else:
                    value = True if name == "else" else self.eval_condition(rest, path, lineno, col)
                    c[0] = c[1] = value
            elif not active:
                continue
            elif name == "include":
                self.include(rest, path, lineno, col)
            elif name == "define":
                self.define(rest, path, lineno, col)
            elif name == "undef":
                self.macros.pop(rest.split()[0] if rest else "", None)
            elif name in ("error",):
                raise P4Error(f"#error {rest}", path, lineno, col)
            elif name in ("pragma", "line", "warning"):
                continue
            else:
                raise P4Error(f"unsupported: preprocessor directive #{name}", path, lineno, col)
        if conds:
            raise P4Error("unterminated #if", path, len(lines), 1)
        self.depth -= 1

    def define(self, rest: str, path: str, line: int, col: int) -> None:
        dm = re.match(r"([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)$", rest)
        if not dm:
            raise P4Error("malformed #define", path, line, col)
        params = None
        if dm.group(2):  # NAME( directly: function-like
            params = [p.strip() for p in dm.group(3).split(",")] if dm.group(3).strip() else []
            if not all(_NAME.match(p) for p in params):
                raise P4Error(f"malformed parameter list of macro {dm.group(1)}", path, line, col)
        self.macros[dm.group(1)] = Macro(dm.group(4).strip(), params)

    def _emit(self, text: str, file: str, line: int) -> None:
        self.out_lines.append(text)
        self.line_map.append((file, line))

    def include(self, rest: str, path: str, line: int, col: int) -> None:
        m = re.match(r'<([^>]+)>|"([^"]+)"', rest)
        if not m:
            raise P4Error(f"malformed #include {rest}", path, line, col)
        name = m.group(1) or m.group(2)
        dirs = list(self.include_dirs) + [INCLUDE_DIR]
        if m.group(2):
            dirs.insert(0, os.path.dirname(os.path.abspath(path)) if os.path.exists(path) else os.getcwd())
        for d in dirs:
            candidate = os.path.join(d, name)
            if os.path.isfile(candidate):
                with open(candidate, encoding="utf-8") as f:
                    self.run_file(candidate, f.read())
                return
        raise P4Error(f"cannot find include file {name}", path, line, col)

    def eval_condition(self, expr: str, path: str, line: int, col: int) -> bool:
        expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0", expr)
        expr = self.expand(expr, path, line)
        expr = _IDENT.sub("0", expr)  # undefined names are 0, as in C
        tokens = _CONDITION_TOKEN.findall(expr)
        if "".join(tokens) != re.sub(r"\s+", "", expr):
            raise P4Error(f"unsupported: #if condition '{expr[:200]}'", path, line, col)
        try:
            return bool(_Condition(tokens).value())
        except (ValueError, IndexError, ZeroDivisionError, RecursionError):
            raise P4Error(f"malformed #if condition '{expr[:200]}'", path, line, col) from None


# An #if condition once macros are expanded: integers (a u/l suffix ignored) and C's operators.
_CONDITION_TOKEN = re.compile(r"(?:0[xX][0-9a-fA-F]+|\d+)[uUlL]*|\|\||&&|==|!=|<=|>=|<<|>>|[-+*/%()<>!~&|^?:]")
_BINARY = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"), ("+", "-"),
           ("*", "/", "%")]  # loosest first


def _int64(v: int) -> int:
    """`v` wrapped as cpp's intmax_t: every value stays 64 bits, whatever the condition."""
    return (v + (1 << 63)) % (1 << 64) - (1 << 63)


class _Condition:
    """The value of an #if condition's tokens, as cpp computes it in intmax_t (C11 6.10.1): computed here, never
    handed to Python's eval (a client's program must not choose what the switch computes, nor make it compute
    9**9**9**9). Raises ValueError when malformed."""

    def __init__(self, tokens: list[str]):
        self.tokens, self.at = [t.rstrip("uUlL") for t in tokens] + [""], 0

    def value(self) -> int:
        v = self.conditional()
        if self.tokens[self.at]:
            raise ValueError(f"unexpected {self.tokens[self.at]}")
        return v

    def take(self, token: str) -> bool:
        if self.tokens[self.at] == token:
            self.at += 1
            return True
        return False

    def conditional(self) -> int:
        cond = self.binary(0)
        if not self.take("?"):
            return cond
        yes = self.conditional()
        if not self.take(":"):
            raise ValueError("? without :")
        no = self.conditional()
        return yes if cond else no

    def binary(self, level: int) -> int:
        if level == len(_BINARY):
            return self.unary()
        v = self.binary(level + 1)
        while self.tokens[self.at] in _BINARY[level]:
            op = self.tokens[self.at]
            self.at += 1
            v = _int64(_apply(op, v, self.binary(level + 1)))
        return v

    def unary(self) -> int:
        token = self.tokens[self.at]
        self.at += 1
        if token == "(":
            v = self.conditional()
            if not self.take(")"):
                raise ValueError("unbalanced (")
            return v
        if token in ("-", "+", "~", "!"):
            v = self.unary()
            return _int64({"-": -v, "+": v, "~": ~v, "!": int(not v)}[token])
        if token[:1].isdigit():
            base = 16 if token[:2].lower() == "0x" else 8 if token.startswith("0") else 10
            return _int64(int(token, base))
        raise ValueError(f"unexpected {token or 'end'}")


def _apply(op: str, a: int, b: int) -> int:
    if op in ("<<", ">>"):
        if not 0 <= b < 64:
            raise ValueError("shift count out of range")
        return a << b if op == "<<" else a >> b
    if op in ("/", "%"):
        q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)  # C truncates toward zero
        return q if op == "/" else a - b * q
    return {"||": lambda: int(bool(a or b)), "&&": lambda: int(bool(a and b)), "|": lambda: a | b,
            "^": lambda: a ^ b, "&": lambda: a & b, "==": lambda: int(a == b), "!=": lambda: int(a != b),
            "<": lambda: int(a < b), ">": lambda: int(a > b), "<=": lambda: int(a <= b), ">=": lambda: int(a >= b),
            "+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b}[op]()


def parse_define(text: str) -> tuple[str, str]:
    """`NAME` or `NAME=VALUE` (a -D option) -> (NAME, VALUE); VALUE defaults to 1 as in cpp."""
    name, _, value = text.partition("=")
    if not _NAME.match(name):
        raise P4Error(f"-D {text}: not a macro name")
    return name, value if _ else "1"


def preprocess(text: str, filename: str, include_dirs: list[str] | None = None,
               defines: dict[str, str] | None = None) -> Source:
    """Run the preprocessor over `text` (the contents of `filename`); `defines` act like
    `#define NAME VALUE` lines before it."""
    pp = _Preprocessor(list(include_dirs or []))
    for name, value in (defines or {}).items():
        pp.macros[name] = Macro(value)
    pp.run_file(filename, text)
    return Source("\n".join(pp.out_lines), pp.line_map)
