"""Errors the embedded target reports to users: one line, never a traceback."""
from __future__ import annotations

ECHO_CHARS = 64  # of a client's or file's value that a message shows
MESSAGE_CHARS = 1024  # the longest message answered to a client: whatever names it chose, an answer stays small


def shorten(value: str | bytes, limit: int = ECHO_CHARS) -> str:
    """A value as an error or log line shows it: bytes as 0x-hex, text with control characters escaped, both cut
    to about `limit` characters and then the full length named. Every message that repeats what a client sent
    goes through here, so no answer grows with the request (a 3 MB action parameter is not echoed in 6 MB of hex).
    """
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        cut = max(1, limit // 2)
        return "0x" + data[:cut].hex() + (f"... ({len(data)} bytes)" if len(data) > cut else "")
    text = value if len(value) <= limit else value[:limit]
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text + (f"... ({len(value)} characters)" if len(value) > limit else "")


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


class JumpLimit(PacketError):
    """An action that jumped back more than MAX_BACKWARD_JUMPS times in one run (a loop that may never end): the
    packet is dropped like any packet error, but logged only the first time for each action (`action`)."""

    def __init__(self, action: str, limit: int):
        self.action = action
        super().__init__(f"action {shorten(action)}: more than {limit} jumps back in one run (a loop that may never end)")
