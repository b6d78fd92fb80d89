"""What every part of one printer shares: the program and its slot layout, the lines printed so far and the
names made for the program's objects (p4target.backends.source_text). Each back end adds its own module-wide
state (python_module.py, c_module.py); the parts that print (values, primitives, parsers, actions, tables) all
write through one of these."""
from __future__ import annotations

from p4target.backends.layout import Layout, Unsupported
from p4target.backends.source_text import Identifiers
from p4target.lowered import model as m


class Code:
    """The printed lines of one program and what every part looks up in it."""

    CHUNK_BITS: int | None = None  # a field's slot holds at most this many bits (see Layout)

    def __init__(self, p: m.Program):
        if len(p.parsers) != 1 or len(p.deparsers) != 1:
            raise Unsupported("a v1model program has one parser and one deparser", p.source)
        self.p = p
        self.L = Layout(p, self.CHUNK_BITS)
        self.errors = dict(p.errors)
        self.out: list[str] = []
        self._tmp = 0
        self.actions = {a.id: a for a in p.actions}
        self.learn_lists = {ll.id: ll for ll in p.learn_lists}
        self.calcs = {c.name: c for c in p.calculations}
        self.current: m.Primitive | None = None  # the primitive being printed
        self.names = Identifiers()  # every identifier printed for an object of the program (never its name)

    def fail(self, message: str) -> Unsupported:
        return Unsupported(message, self.p.source)

    def emit(self, line: str, ind: int) -> None:
        self.out.append("    " * ind + line)

    def tmp(self, prefix: str = "t") -> str:
        self._tmp += 1
        return f"_{prefix}{self._tmp}"

    def error_code(self, name: str) -> int:
        return self.errors.get(name, 0)

    def where(self) -> str:
        """' at FILE:LINE:COL' of the primitive being printed, where its source is known (BMv2's source_info)."""
        return f" at {self.current.source}" if self.current is not None and self.current.source else ""
