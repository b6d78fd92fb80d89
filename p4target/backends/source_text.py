"""The only ways text from a program reaches the code the printers write: as data, never as code.

A name in P4 source or in p4c's JSON (an action's, a table's, a header's, a parse state's), an
annotation, a log_msg format or a source location may hold anything: `*/`, a newline, quotes,
backslashes, NUL, `??` trigraphs, any Unicode, 64 KiB of it. The switch prints the programs its
clients send as C or Python and runs them, so such text reaches printed code in three ways only,
all made here:

- a C string literal: `c_string` (the one escaping function of the C printer);
- a Python string: bound in the printed module's namespace under a name of the printer's own
  (`PyValues.text`), so no literal of it is ever parsed;
- a reader's hint: `hint`, the name's ASCII letters, digits and underscores, in an identifier after
  the printer's own prefix and number (`Identifiers`), or in a comment.

Every identifier made from a program's objects comes from `Identifiers` and is checked against
`IDENTIFIER`; `check_source` checks the whole printed text once more before it is compiled.
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Hashable

from p4target.backends.layout import Unsupported

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
HINT_CHARS = 32  # of a name shown to a reader: enough to tell tables and actions apart
_NOT_HINT = re.compile(r"[^A-Za-z0-9_]")
_NOT_SOURCE = re.compile(r"[^\n\x20-\x7e]")  # printed code is printable ASCII lines


def c_string(text: str | bytes) -> str:
    """`text` (str as UTF-8) as a C string literal: printable ASCII but `"`, `\\` and `?` (no trigraphs) as it is,
    every other byte (NUL, newline, non-ASCII) as a three-digit octal escape (so no digit after it joins it)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    out = ['"']
    for byte in data:
        ch = chr(byte)
        if 32 <= byte < 127 and ch not in '"\\?':
            out.append(ch)
        else:
            out.append(f"\\{byte:03o}")
    out.append('"')
    return "".join(out)


def hint(name: str) -> str:
    """A reader's hint of `name` for identifiers and comments: its first HINT_CHARS characters, each but an ASCII
    letter, digit or underscore made `_`."""
    return _NOT_HINT.sub("_", name[:HINT_CHARS])


def identifier(name: str) -> str:
    """`name`, checked to be an identifier of printed code (C's and Python's ASCII ones)."""
    if not IDENTIFIER.fullmatch(name):
        raise Unsupported(f"the printer made {name[:80]!r}, not an identifier")
    return name


class Identifiers:
    """The identifiers of one printed program: a prefix of the printer's, a number per distinct key (the program
    object's id or name, as the printer looks it up) in the order asked, and a hint of the object's name."""

    def __init__(self) -> None:
        self._numbers: dict[tuple[str, Hashable], int] = {}
        self._used: Counter[str] = Counter()

    def __call__(self, prefix: str, key: Hashable, name: str = "") -> str:
        number = self._numbers.get((prefix, key))
        if number is None:
            number = self._numbers[prefix, key] = self._used[prefix]
            self._used[prefix] += 1
        return identifier(f"{prefix}{number}_{hint(name)}" if name else f"{prefix}{number}")


def check_source(source: str, what: str) -> None:
    """Raise Unsupported unless `source` is printable ASCII lines, as every printed program is: a character outside
    them came from a program's text by some way other than the three above."""
    bad = _NOT_SOURCE.search(source)
    if bad is not None:
        line = source.count("\n", 0, bad.start()) + 1
        raise Unsupported(f"{what}: printed code holds {bad.group()!r} at line {line}: text from the program leaked")
