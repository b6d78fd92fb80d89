"""A small C-style preprocessor for P4 sources, with a line map back to the original files.

Supports `#include <f>` / `#include "f"`, `#define NAME value` and function-like
`#define NAME(a, b) body` (with `#a` and `x ## y`), `#undef`, `-D NAME[=VALUE]`
(`defines`), `#ifdef`/`#ifndef`/`#if`/`#elif`/`#else`/`#endif` (conditions: integers,
defined(X), macro names, C's operators, computed in 64 bits as cpp does), `#line N "file"`.
Comments are blanked out first so every output line maps to exactly one original (file, line);
columns stay exact unless a macro on that line expands to a different length. A macro call's
arguments must be on one line.

What an `#include` may read depends on where the text came from. A program read from a file
(`local_includes`) includes files beside it, as cpp does: the user's own files. A program given
as text (a device config a P4Runtime client pushes) names no file of the switch's host: it
includes only the target's own core.p4 and v1model.p4 (p4target/include), whatever the path, and
anything else is refused naming the include, never showing what a file holds.

Macro expansion is bounded (a pushed program of a few lines could otherwise expand without end:
`#define A B B`, `#define B C C`, ...): at most MAX_MACRO_TEXT characters made by expansions in
all (an expansion inside another counted at each level) and MAX_MACRO_DEPTH expansions nested.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..errors import P4Error

INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "include")
TARGET_INCLUDES = ("core.p4", "v1model.p4")  # the target's own: what a program given as text may include
MAX_MACRO_TEXT = 4 << 20  # p4src/ and p4c's corpus expand at most 2 KB, nesting 2 deep
MAX_MACRO_DEPTH = 64

_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)
_IDENT = re.compile(r"\b[A-Za-z_]\w*")
_STRING_OR_IDENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\b[A-Za-z_]\w*')
_DIRECTIVE = re.compile(r"\s*#\s*(\w+)\s*(.*)$")
_NAME = re.compile(r"[A-Za-z_]\w*$")
_LINE = re.compile(r'(\d{1,9})\s*(?:"(.*)")?\s*$')


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
    def __init__(self, include_dirs: list[str], local_includes: bool):
        self.include_dirs = include_dirs
        self.local_includes = local_includes
        self.macros: dict[str, Macro] = {}
        self.out_lines: list[str] = []
        self.line_map: list[tuple[str, int]] = []
        self.depth = 0
        self.nesting = 0  # macro expansions in progress, one inside another
        self.expanded = 0  # characters made by macro expansions so far

    def expand(self, text: str, file: str, line: int, seen: frozenset = frozenset()) -> str:
        """`text` with its macros expanded (a macro is not expanded inside its own expansion)."""
        if not self.macros.keys() & set(_IDENT.findall(text)):
            return text
        if self.nesting >= MAX_MACRO_DEPTH:
            raise P4Error(f"macros nest deeper than {MAX_MACRO_DEPTH}", file, line, 1)
        self.nesting += 1
        try:
            return self.expand_words(text, file, line, seen)
        finally:
            self.nesting -= 1

    def spend(self, text: str, file: str, line: int) -> str:
        """`text`, made by a macro expansion or an argument substituted, counted against MAX_MACRO_TEXT before it is
        joined to anything (so the text built before the cap is reached is at most the cap)."""
        self.expanded += len(text)
        if self.expanded > MAX_MACRO_TEXT:
            raise P4Error(f"macro expansion makes over {MAX_MACRO_TEXT >> 20} MiB of text", file, line, 1)
        return text

    def expand_words(self, text: str, file: str, line: int, seen: frozenset) -> str:
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
                out.append(self.spend(self.expand(macro.body, file, line, seen | {word}), file, line))
                continue
            j = len(text) - len(text[i:].lstrip())
            if j >= len(text) or text[j] != "(":
                out.append(word)  # a function-like macro's name without arguments is just a name
                continue
            args, i = self.call_args(text, j, word, file, line)
            body = self.substitute(word, macro, args, file, line, seen)
            out.append(self.spend(self.expand(body, file, line, seen | {word}), file, line))

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

        def put(text: str) -> str:  # an argument where its parameter was
            return self.spend(text, file, line)

        body = re.sub(r"#\s*([A-Za-z_]\w*)(?!\w)",
                      lambda m: put('"' + raw[m.group(1)].replace('"', '\\"') + '"') if m.group(1) in raw else m.group(0),
                      macro.body.replace("##", "\0"))
        pieces = body.split("\0")
        pasted = []
        for k, piece in enumerate(pieces):
            if len(pieces) > 1:  # an operand of ## takes its argument unexpanded
                piece = piece.strip() if 0 < k < len(pieces) - 1 else (piece.rstrip() if k == 0 else piece.lstrip())
                piece = _IDENT.sub(lambda m: put(raw[m.group(0)]) if m.group(0) in raw else m.group(0), piece)
            else:
                piece = _STRING_OR_IDENT.sub(
                    lambda m: put(self.expand(raw[m.group(0)], file, line, seen)) if m.group(0) in raw else m.group(0),
                    piece)
            pasted.append(piece)
        return "".join(pasted)

    def run_file(self, path: str, text: str) -> None:
        self.depth += 1
        if self.depth > 50:
            raise P4Error("#include nested too deeply", path, 1, 1)
        lines = strip_comments(text).split("\n")
        # stack of (taking_this_branch, some_branch_taken, parent_active)
        conds: list[list[bool]] = []
        shown, shift = path, 0  # the file name and line numbers errors show from here on (what #line sets)
        i = 0
        while i < len(lines):
            raw = lines[i]
            file, line = shown, i + 1 + shift
            while raw.endswith("\\") and i + 1 < len(lines):  # line continuation
                i += 1
                raw = raw[:-1] + " " + lines[i]
                self._emit("", file, line)
            i += 1
            active = all(c[0] for c in conds)
            m = _DIRECTIVE.match(raw)
            if not m:
                self._emit(self.expand(raw, file, line) if active else "", file, line)
                continue
            self._emit("", file, line)
            name, rest = m.group(1), m.group(2).strip()
            col = raw.index("#") + 1
            if name in ("ifdef", "ifndef", "if"):
                parent = active
                if not parent:
                    value = False
                elif name == "if":
                    value = self.eval_condition(rest, file, line, col)
                else:
                    value = (rest.split()[0] in self.macros) if rest else False
                    value = value if name == "ifdef" else not value
                conds.append([parent and value, parent and value, parent])
            elif name in ("elif", "else", "endif"):
                if not conds:
                    raise P4Error(f"#{name} without #if", file, line, col)
                c = conds[-1]
                if name == "endif":
                    conds.pop()
                elif c[1] or not c[2]:
                    c[0] = False
                else:
                    value = True if name == "else" else self.eval_condition(rest, file, line, col)
                    c[0] = c[1] = value
            elif not active:
                continue
            elif name == "include":
                self.include(rest, path, (file, line, col))
            elif name == "define":
                self.define(rest, file, line, col)
            elif name == "undef":
                self.macros.pop(rest.split()[0] if rest else "", None)
            elif name in ("error",):
                raise P4Error(f"#error {rest}", file, line, col)
            elif name == "line":
                lm = _LINE.match(rest)
                if not lm:
                    raise P4Error(f"malformed #line {_short(rest)}", file, line, col)
                shown, shift = lm.group(2) if lm.group(2) is not None else shown, int(lm.group(1)) - (i + 1)
            elif name in ("pragma", "warning"):
                continue
            else:
                raise P4Error(f"unsupported: preprocessor directive #{name}", file, line, col)
        if conds:
            raise P4Error("unterminated #if", shown, len(lines) + shift, 1)
        self.depth -= 1

    def define(self, rest: str, file: str, line: int, col: int) -> None:
        dm = re.match(r"([A-Za-z_]\w*)(\(([^)]*)\))?\s*(.*)$", rest)
        if not dm:
            raise P4Error("malformed #define", file, line, col)
        params = None
        if dm.group(2):  # NAME( directly: function-like
            params = [p.strip() for p in dm.group(3).split(",")] if dm.group(3).strip() else []
            if not all(_NAME.match(p) for p in params):
                raise P4Error(f"malformed parameter list of macro {dm.group(1)}", file, line, col)
        self.macros[dm.group(1)] = Macro(dm.group(4).strip(), params)

    def _emit(self, text: str, file: str, line: int) -> None:
        self.out_lines.append(text)
        self.line_map.append((file, line))

    def include(self, rest: str, here: str, where: tuple[str, int, int]) -> None:
        """Preprocess the file `#include REST` names, in file `here` (shown as `where`): see the module docstring."""
        m = re.match(r'<([^>]+)>|"([^"]+)"', rest)
        if not m:
            raise P4Error(f"malformed #include {_short(rest)}", *where)
        name = m.group(1) or m.group(2)
        dirs = list(self.include_dirs)
        if m.group(2) and self.local_includes:
            dirs.insert(0, os.path.dirname(os.path.abspath(here)))
        candidates = [os.path.join(d, name) for d in dirs]
        if name in TARGET_INCLUDES:
            candidates.append(os.path.join(INCLUDE_DIR, name))
        for candidate in candidates:
            if os.path.isfile(candidate):
                try:
                    with open(candidate, encoding="utf-8") as f:
                        text = f.read()
                except (OSError, UnicodeError) as exc:
                    raise P4Error(f"cannot read include file {candidate}: {getattr(exc, 'strerror', None) or exc}",
                                  *where) from None
                self.run_file(candidate, text)
                return
        if not self.local_includes:
            raise P4Error(f"#include {_short(m.group(0))}: a program given as text (a pushed device config) includes "
                          f"only the target's {' and '.join(TARGET_INCLUDES)}; `aggnet p4 compile --device-config` "
                          "inlines its local includes", *where)
        raise P4Error(f"cannot find include file {name}", *where)

    def eval_condition(self, expr: str, file: str, line: int, col: int) -> bool:
        expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)|defined\s+(\w+)",
                      lambda m: "1" if (m.group(1) or m.group(2)) in self.macros else "0", expr)
        expr = self.expand(expr, file, line)
        expr = _IDENT.sub("0", expr)  # undefined names are 0, as in C
        tokens = _CONDITION_TOKEN.findall(expr)
        if "".join(tokens) != re.sub(r"\s+", "", expr):
            raise P4Error(f"unsupported: #if condition '{expr[:200]}'", file, line, col)
        try:
            return bool(_Condition(tokens).value())
        except (ValueError, IndexError, ZeroDivisionError, RecursionError):
            raise P4Error(f"malformed #if condition '{expr[:200]}'", file, line, col) from None


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


def _short(text: str, limit: int = 200) -> str:
    """`text` as an error message quotes it: at most `limit` characters."""
    return text if len(text) <= limit else text[:limit] + "..."


def parse_define(text: str) -> tuple[str, str]:
    """`NAME` or `NAME=VALUE` (a -D option) -> (NAME, VALUE); VALUE defaults to 1 as in cpp."""
    name, _, value = text.partition("=")
    if not _NAME.match(name):
        raise P4Error(f"-D {text}: not a macro name")
    return name, value if _ else "1"


def preprocess(text: str, filename: str, include_dirs: list[str] | None = None,
               defines: dict[str, str] | None = None, local_includes: bool = False) -> Source:
    """Run the preprocessor over `text`, shown as `filename`; `defines` act like `#define NAME VALUE` lines
    before it. `local_includes`: `text` was read from the file `filename`, so `#include "f"` reads files beside it;
    else it includes only the target's own files (and those in `include_dirs`)."""
    pp = _Preprocessor(list(include_dirs or []), local_includes)
    for name, value in (defines or {}).items():
        pp.macros[name] = Macro(value)
    pp.run_file(filename, text)
    return Source("\n".join(pp.out_lines), pp.line_map)
