"""A small C-style preprocessor for P4 sources, with a line map back to the original files.

Supports `#include <f>` / `#include "f"`, object-like `#define NAME value`, `#undef`,
`#ifdef`/`#ifndef`/`#if`/`#elif`/`#else`/`#endif` (conditions: integers, defined(X), macro
names, ! && || == != < > <= >= and parentheses). Comments are blanked out first so every
output line maps to exactly one original (file, line); columns stay exact unless a macro
on that line expands to a different length.
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
        self.macros: dict[str, str] = {}
        self.out_lines: list[str] = []
        self.line_map: list[tuple[str, int]] = []
        self.depth = 0

    def expand(self, text: str, file: str, line: int, seen: frozenset = frozenset()) -> str:
        def sub(m: re.Match) -> str:
            word = m.group(0)
            if word.startswith('"') or word not in self.macros or word in seen:
                return word
            return self.expand(self.macros[word], file, line, seen | {word})

        return _STRING_OR_IDENT.sub(sub, text)

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
                dm = re.match(r"([A-Za-z_]\w*)(\()?\s*(.*)$", rest)
                if not dm:
                    raise P4Error("malformed #define", path, lineno, col)
                if dm.group(2):
                    raise P4Error("unsupported: function-like macro", path, lineno, col)
                self.macros[dm.group(1)] = dm.group(3).strip()
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
        if not re.fullmatch(r"[\s\d()!&|=<>x+\-*a-fA-F]*", expr):
            raise P4Error(f"unsupported: #if condition '{expr}'", path, line, col)
        py = expr.replace("&&", " and ").replace("||", " or ")
        py = re.sub(r"!(?!=)", " not ", py)
        try:
            return bool(eval(py, {"__builtins__": {}}, {}))  # only digits and operators remain
        except Exception:
            raise P4Error(f"malformed #if condition '{expr}'", path, line, col) from None


def preprocess(text: str, filename: str, include_dirs: list[str] | None = None) -> Source:
    """Run the preprocessor over `text` (the contents of `filename`)."""
    pp = _Preprocessor(list(include_dirs or []))
    pp.run_file(filename, text)
    return Source("\n".join(pp.out_lines), pp.line_map)
