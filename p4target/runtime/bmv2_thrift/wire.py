"""Thrift's binary protocol (strict, version 1), the encoding of BMv2's runtime API.

BMv2 serves that API over a buffered transport: messages follow each other on the TCP stream
with no framing. A message is `i32 0x8001000T` (T: CALL 1, REPLY 2, EXCEPTION 3, ONEWAY 4),
the method name (`service:method` when multiplexed), an i32 sequence id and one struct: the
arguments of a call, or the result of a reply (field 0 the return value, field 1.. the declared
exceptions). Reading needs no schema (every field carries its type); binary and string are the
same on the wire and read as bytes. Writing takes (type, value) pairs: a struct is a dict
{field id: (type, value)} whose None values are left out, a list is (element type, items).

A call read here costs at most THRIFT_BYTES and THRIFT_VALUES values (fields, elements, map
entries; p4target.limits), whatever sizes it announces: past either the connection is dropped, as
BMv2 drops one that sends what it cannot parse. (Decoded, a value costs some 100 bytes, so a call
of empty structs would otherwise grow the switch 70-fold its size.)
"""
from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from p4target.limits import THRIFT_BYTES, THRIFT_VALUES

STOP, BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST = 0, 2, 3, 4, 6, 8, 10, 11, 12, 13, 14, 15
CALL, REPLY, EXCEPTION, ONEWAY = 1, 2, 3, 4
VERSION_1 = 0x80010000
FIRST_BYTE = 0x80  # a strict message's first byte; never a printable command's

MAX_DEPTH = 32
_FIXED = {BOOL: ">?", BYTE: ">b", DOUBLE: ">d", I16: ">h", I32: ">i", I64: ">q"}

Struct = dict[int, Any]


class WireError(Exception):
    """Bytes that are not a Thrift binary message (or a peer that closed mid-message)."""


class Reader:
    """Decodes messages from `read(n)`, which returns up to n bytes (b"" at the end)."""

    def __init__(self, read: Callable[[int], bytes]):
        self._read = read
        self._bytes_left = self._values_left = 0  # what the message being read may still take

    def _take(self, n: int) -> bytes:
        self._bytes_left -= n
        if self._bytes_left < 0:
            raise WireError(f"a call larger than {THRIFT_BYTES} bytes")
        data = self._read(n)
        if len(data) != n:
            raise WireError("connection closed inside a message")
        return data

    def _count(self, n: int) -> None:
        self._values_left -= n
        if self._values_left < 0:
            raise WireError(f"a call of more than {THRIFT_VALUES} values")

    def _fixed(self, ttype: int) -> Any:
        fmt = _FIXED[ttype]
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _size(self) -> int:
        size = self._fixed(I32)
        if size < 0:
            raise WireError(f"size {size} out of range")
        return size

    def value(self, ttype: int, depth: int = 0) -> Any:
        if depth > MAX_DEPTH:
            raise WireError("structures nested too deep")
        if ttype in _FIXED:
            return self._fixed(ttype)
        if ttype == STRING:
            return self._take(self._size())
        if ttype == STRUCT:
            out: Struct = {}
            while (ftype := self._fixed(BYTE)) != STOP:
                self._count(1)
                fid = self._fixed(I16)
                out[fid] = self.value(ftype, depth + 1)
            return out
        if ttype in (LIST, SET):
            etype = self._fixed(BYTE)
            size = self._size()
            self._count(size)  # before any element is made
            return [self.value(etype, depth + 1) for _ in range(size)]
        if ttype == MAP:
            ktype, vtype = self._fixed(BYTE), self._fixed(BYTE)
            size = self._size()
            self._count(2 * size)
            return {self.value(ktype, depth + 1): self.value(vtype, depth + 1) for _ in range(size)}
        raise WireError(f"unknown field type {ttype}")

    def message(self) -> tuple[str, int, int, Struct] | None:
        """(name, message type, sequence id, body struct); None at a clean end of stream."""
        self._bytes_left, self._values_left = THRIFT_BYTES, THRIFT_VALUES
        first = self._read(4)
        if not first:
            return None
        if len(first) != 4:
            raise WireError("connection closed inside a message")
        version = struct.unpack(">I", first)[0]
        if version & 0xFFFF0000 != VERSION_1:
            raise WireError("not a strict binary protocol message")
        name = self._take(self._size()).decode("utf-8", "replace")
        seqid = self._fixed(I32)
        return name, version & 0xFF, seqid, self.value(STRUCT)


def write(out: bytearray, ttype: int, value: Any) -> None:
    """Append `value` of type `ttype` to `out` (see the module docstring for the shapes)."""
    if ttype in _FIXED:
        out += struct.pack(_FIXED[ttype], value)
    elif ttype == STRING:
        data = value.encode() if isinstance(value, str) else bytes(value)
        out += struct.pack(">i", len(data)) + data
    elif ttype == STRUCT:
        for fid, (ftype, fvalue) in value.items():
            if fvalue is not None:
                out += struct.pack(">bh", ftype, fid)
                write(out, ftype, fvalue)
        out.append(STOP)
    elif ttype in (LIST, SET):
        etype, items = value
        out += struct.pack(">bi", etype, len(items))
        for item in items:
            write(out, etype, item)
    elif ttype == MAP:
        ktype, vtype, items = value
        out += struct.pack(">bbi", ktype, vtype, len(items))
        for k, v in items.items():
            write(out, ktype, k)
            write(out, vtype, v)
    else:
        raise ValueError(f"unknown field type {ttype}")


def message(name: str, mtype: int, seqid: int, body: Struct) -> bytes:
    """One whole message, ready for the socket."""
    out = bytearray(struct.pack(">I", VERSION_1 | mtype))
    write(out, STRING, name)
    out += struct.pack(">i", seqid)
    write(out, STRUCT, body)
    return bytes(out)


def app_exception(message_text: str, kind: int) -> Struct:
    """The body of an EXCEPTION message (TApplicationException: 1 unknown method, 6 internal error)."""
    return {1: (STRING, message_text), 2: (I32, kind)}


def signed64(value: int) -> int:
    """An unsigned value of up to 64 bits as Thrift's i64 carries it (bits above 64 dropped, as BMv2 does)."""
    value &= (1 << 64) - 1
    return value - (1 << 64) if value >> 63 else value
