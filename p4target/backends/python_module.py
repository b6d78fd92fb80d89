"""The printed Python module of one program: its namespace (the objects the code reads: the State's tables and
cells, the runtime helpers, the texts a program names) and the names of what it binds there. Every part of
the Python printer writes through it (p4target/backends/python.py composes them)."""
from __future__ import annotations

import random
import time
from typing import Any

from p4target import state as st
from p4target.backends import hashes
from p4target.backends.code import Code
from p4target.backends.python_runtime import (
    _at,
    _bits,
    _copy_header,
    _div,
    _log_format,
    _mod,
    _Reject,
    _sat,
    _shl,
    _sx,
    _usat,
)
from p4target.errors import JumpLimit, PacketError
from p4target.lowered import model as m


class PyModule(Code):
    """The printed module's namespace, bound to one State (see the module docstring)."""

    def __init__(self, p: m.Program, state: st.State, rng: random.Random):
        super().__init__(p)
        self.state = state
        self.globals: dict[int, str] = {}  # id(object) -> its name in the printed module
        self.codecs: list[str] = []  # per header type: its extract and emit functions (printed before the rest)
        self.ns: dict[str, Any] = {
            "_Reject": _Reject, "_PacketError": PacketError, "_JumpLimit": JumpLimit, "_sx": _sx, "_sat": _sat, "_usat": _usat,
            "_shl": _shl, "_div": _div, "_mod": _mod, "_at": _at, "_bits": _bits,
            "_copy": _copy_header, "_logf": _log_format, "_rng": rng, "_S": state,
            "_DG": state.digests, "_LOG": state.log, "_now": time.monotonic, "_pack": hashes.pack_fields,
        }
        for name, fn in hashes.ALGORITHMS.items():
            self.ns["_h_" + name] = fn
        self.param_widths: list[int] = []  # of the action being printed
        # what tells that an action ran `exit` (nothing to test when no action can)
        self.exited = f"F[{self.L.hidden['exit']}]" if any(prim.op == "exit" for a in p.actions
                                                           for prim in a.primitives) else ""
        for hname, t in self.L.types.items():
            self.ns[self.field_specs(hname)] = tuple((f.width, f.signed) for f in t.fields)
        for s, headers in self.L.stacks.items():
            self.ns[self.stack_bases(s)] = tuple(self.L.base[h] for h in headers) + (self.L.scratch[s],)
        for s, names in self.L.union_stacks.items():
            self.ns[self.union_stack_unions(s)] = (*names, "")

    # -- the printer's names for the program's objects, strings and arrays

    def text(self, s: str) -> str:
        """The printed module's name for string `s` (a name, a log format, a source location): bound in its namespace,
        never a literal in the printed code (p4target.backends.source_text)."""
        return self.global_of("_S", s)

    def field_specs(self, header_type: str) -> str:
        """The printed module's tuple of a header type's (width, signed) per field."""
        return self.names("_FS", header_type, header_type)

    def stack_bases(self, stack: str) -> str:
        """The printed module's tuple of a header stack's base slots, then its scratch header's."""
        return self.names("_STK", stack, stack)

    def union_stack_unions(self, stack: str) -> str:
        """The printed module's tuple of a union stack's union names, then ""."""
        return self.names("_UST", stack, stack)

    def global_of(self, prefix: str, obj: object) -> str:
        """`obj` (a register's cells, a counter's) as a global of the printed module: no lookup by name per packet."""
        name = self.globals.get(id(obj))
        if name is None:
            name = self.globals[id(obj)] = f"{prefix}{len(self.globals)}"
            self.ns[name] = obj
        return name
