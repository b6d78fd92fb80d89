"""Errors the embedded target reports to users: one line, never a traceback."""
from __future__ import annotations


class P4Error(Exception):
    """A problem in a P4 program or its inputs, reported as `FILE:LINE:COL: error: MESSAGE`.

    `exit_code` is what the command line exits with (2: the input is malformed).
    """

    exit_code = 2

    def __init__(self, message: str, file: str | None = None, line: int | None = None, col: int | None = None):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        super().__init__(str(self))

    def __str__(self) -> str:
        where = ":".join(str(p) for p in (self.file, self.line, self.col) if p is not None)
        return f"{where}: error: {self.message}" if where else f"error: {self.message}"


class PacketError(Exception):
    """A packet the program cannot process (failed assert/assume, division by zero, ...): it is dropped and logged."""
