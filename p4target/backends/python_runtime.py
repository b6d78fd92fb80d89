"""Helpers the printed Python calls (p4target/backends/python.py puts them in its namespace)."""
from __future__ import annotations

from typing import Any

from p4target.errors import PacketError

_SHIFT_LIMIT = 4096  # BMv2 fields are at most this wide; a longer shift leaves nothing of them


class _Reject(Exception):
    """The parser went to reject; `code` is the error's number (None: keep parser_error)."""

    def __init__(self, code: int | None, offset: int):
        super().__init__(code, offset)
        self.code = code
        self.offset = offset


def _log_format(msg: str, values: tuple) -> str:
    """log_msg: each `{}` in msg takes the next value (other braces are literal)."""
    parts = msg.split("{}")
    out = [parts[0]]
    for i, rest in enumerate(parts[1:]):
        out.append(str(values[i]) if i < len(values) else "{}")
        out.append(rest)
    return "".join(out)


def _sx(value: int, width: int) -> int:
    """Truncate to a signed `width`-bit value (two's complement)."""
    value &= (1 << width) - 1
    return value - (1 << width) if width and value >> (width - 1) else value


def _sat(value: int, width: int) -> int:
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    return max(lo, min(hi, value))


def _usat(value: int, width: int) -> int:
    return max(0, min((1 << width) - 1, value))


def _shl(value: int, amount: int) -> int:
    return value << amount if amount < _SHIFT_LIMIT else 0


def _div(a: int, b: int) -> int:
    if b == 0:
        raise PacketError("division by zero")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise PacketError("modulo by zero")
    return a % b


def _at(items: tuple, index: int, what: str) -> Any:
    """Element `index` of a stack; out of range (P4: an undefined value), the stack's scratch header, which
    reads as invalid zeros and takes writes that nothing reads back meaningfully. Union stacks have none."""
    if not 0 <= index < len(items) - 1:
        if isinstance(items[-1], str):
            raise PacketError(f"index {index} out of range for {what}")
        return items[-1]
    return items[index]


def _bits(data: bytes, o: int, offset: int, width: int, too_short: int) -> int:
    """`width` bits of `data` starting `offset` bits past byte `o` (a parser lookahead)."""
    start, end = o * 8 + offset, o * 8 + offset + width
    nbytes = (end + 7) // 8
    if nbytes > len(data):
        raise _Reject(too_short, o)
    chunk = int.from_bytes(data[start // 8:nbytes], "big")
    return (chunk >> (nbytes * 8 - end)) & ((1 << width) - 1)


FieldSpec = tuple[tuple[int | None, bool], ...]  # per field: (width or None for varbit, signed)


def _extract(fields: FieldSpec, F: list, b: int, data: bytes, o: int, vl: int, too_short: int) -> int:
    """Fill header `b`'s fields from `data` at byte `o`; the new offset. `vl`: varbit bits."""
    total = sum(w if w is not None else vl for w, _ in fields)
    end = o + total // 8
    if end > len(data):
        raise _Reject(too_short, o)
    value = int.from_bytes(data[o:end], "big")
    pos = total
    for k, (w, signed) in enumerate(fields):
        width = w if w is not None else vl
        pos -= width
        v = (value >> pos) & ((1 << width) - 1)
        F[b + 1 + k] = _sx(v, width) if signed else v
    if any(w is None for w, _ in fields):
        F[b + 1 + len(fields)] = vl
    F[b] = True
    return end


def _packed(fields: FieldSpec, F: list, b: int) -> bytes:
    """Header `b`'s fields as wire bytes."""
    value = total = 0
    for k, (w, _) in enumerate(fields):
        width = w if w is not None else F[b + 1 + len(fields)]
        value = (value << width) | (F[b + 1 + k] & ((1 << width) - 1))
        total += width
    pad = -total % 8
    return (value << pad).to_bytes((total + pad) // 8, "big")


def _constant(value: Any) -> Any:
    return value


def _copy_header(F: list, dst: int, src: int, n: int) -> None:
    F[dst:dst + n] = F[src:src + n]


# -- the printer ------------------------------------------------------------------------------
