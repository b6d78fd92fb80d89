"""A small client of BMv2's Thrift runtime API for tests that run without /opt/p4ref: multiplexed
strict binary protocol on a plain TCP stream, as simple_switch_CLI sends it.

`call(service, method, *args)` takes the arguments as (type, value) pairs in field-id order
(p4target.runtime.bmv2_thrift.wire shapes) and returns the result's field 0, or raises
BmError(code) for a declared exception and AppError for an application exception."""
from __future__ import annotations

import socket
from typing import Any

from p4target.runtime.bmv2_thrift import wire


class BmError(Exception):
    """The method's declared exception; `code` is its error code."""

    def __init__(self, code: int):
        super().__init__(f"code {code}")
        self.code = code


class AppError(Exception):
    """A TApplicationException: `kind` 1 is an unknown method."""

    def __init__(self, message: str, kind: int):
        super().__init__(message)
        self.kind = kind


class BmClient:
    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self._reader = wire.Reader(self.sock.makefile("rb").read)
        self._seqid = 0

    def call(self, service: str, method: str, *args: tuple[int, Any]) -> Any:
        self._seqid += 1
        body = {i + 1: arg for i, arg in enumerate(args)}
        self.sock.sendall(wire.message(f"{service}:{method}", wire.CALL, self._seqid, body))
        reply = self._reader.message()
        assert reply is not None, "the switch closed the connection"
        name, mtype, seqid, result = reply
        assert (name, seqid) == (method, self._seqid)
        if mtype == wire.EXCEPTION:
            raise AppError(result.get(1, b"").decode(), result.get(2, 0))
        if 1 in result:
            raise BmError(result[1][1])
        return result.get(0)

    def std(self, method: str, *args: tuple[int, Any]) -> Any:
        """A call of service `standard` with context id 0 first, as every table/extern call has."""
        return self.call("standard", method, (wire.I32, 0), *args)

    def close(self) -> None:
        self.sock.close()


def exact(value: bytes) -> dict:
    return {1: (wire.I32, 0), 2: (wire.STRUCT, {1: (wire.STRING, value)})}


def lpm(value: bytes, prefix: int) -> dict:
    return {1: (wire.I32, 1), 3: (wire.STRUCT, {1: (wire.STRING, value), 2: (wire.I32, prefix)})}


def ternary(value: bytes, mask: bytes) -> dict:
    return {1: (wire.I32, 2), 4: (wire.STRUCT, {1: (wire.STRING, value), 2: (wire.STRING, mask)})}


def range_(low: bytes, high: bytes) -> dict:
    return {1: (wire.I32, 4), 6: (wire.STRUCT, {1: (wire.STRING, low), 2: (wire.STRING, high)})}


def match_key(*params: dict) -> tuple[int, Any]:
    return wire.LIST, (wire.STRUCT, list(params))


def action_data(*values: bytes) -> tuple[int, Any]:
    return wire.LIST, (wire.STRING, list(values))


def priority(value: int) -> tuple[int, Any]:
    return wire.STRUCT, {1: (wire.I32, value)}
