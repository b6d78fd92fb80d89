"""P4Runtime failures as gRPC status codes plus p4.v1.Error details.

Every check in the runtime raises `RuntimeStatus`; the gRPC layer turns it into
the RPC's status. Write batches are the exception to "one status per RPC": the
spec wants UNKNOWN with one p4.v1.Error per update (OK ones included) in the
google.rpc.Status details, which `batch_status` builds.
"""
from __future__ import annotations

from collections.abc import Callable

import grpc
from finsy.proto import p4r, rpc_status
from google.protobuf import any_pb2

from p4target.errors import ECHO_CHARS, MESSAGE_CHARS, shorten
from p4target.state import StateError

ERROR_SPACE = "aggnet-embedded"


class RuntimeStatus(Exception):
    """A request failure: a gRPC status code and a one-line message (at most MESSAGE_CHARS characters)."""

    def __init__(self, code: grpc.StatusCode, message: str):
        message = shorten(message, MESSAGE_CHARS)
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


def invalid(message: str) -> RuntimeStatus:
    """The request does not match the P4Info or the spec's canonical forms."""
    return RuntimeStatus(grpc.StatusCode.INVALID_ARGUMENT, message)


def unimplemented(message: str) -> RuntimeStatus:
    return RuntimeStatus(grpc.StatusCode.UNIMPLEMENTED, message)


def state_call(fn: Callable, *args, **kwargs):
    """Call into the switch state, turning its StateError into the gRPC status its `code` names."""
    try:
        return fn(*args, **kwargs)
    except StateError as exc:
        raise RuntimeStatus(grpc.StatusCode[exc.code], str(exc)) from None


def echoed_packet(packet: p4r.PacketOut) -> p4r.PacketOut:
    """The PacketOut a StreamError names: its metadata and the first ECHO_CHARS bytes of its payload, so
    errors about a flood of large PacketOuts stay small."""
    return p4r.PacketOut(payload=packet.payload[:ECHO_CHARS], metadata=packet.metadata)


def code_number(code: grpc.StatusCode) -> int:
    """The numeric google.rpc.Code of a grpc.StatusCode."""
    return code.value[0]


def update_error(failure: RuntimeStatus | None) -> p4r.Error:
    """The p4.v1.Error for one update of a batch (canonical_code OK when it succeeded)."""
    if failure is None:
        return p4r.Error(canonical_code=0)
    return p4r.Error(canonical_code=code_number(failure.code), message=failure.message, space=ERROR_SPACE)


def batch_status(failures: list[RuntimeStatus | None]) -> rpc_status.Status:
    """google.rpc.Status for a Write with at least one failed update: UNKNOWN + per-update errors."""
    bad = sum(f is not None for f in failures)
    status = rpc_status.Status(code=code_number(grpc.StatusCode.UNKNOWN),
                               message=f"Write failed: {bad} of {len(failures)} updates rejected")
    for failure in failures:
        detail = any_pb2.Any()
        detail.Pack(update_error(failure))
        status.details.append(detail)
    return status


async def abort(context: grpc.aio.ServicerContext, code: grpc.StatusCode, message: str,
                status: rpc_status.Status | None = None) -> None:
    """End the RPC with `code`; attach a rich google.rpc.Status when given (raises)."""
    if status is None:
        status = rpc_status.Status(code=code_number(code), message=message)
    await context.abort(code, message, trailing_metadata=(("grpc-status-details-bin", status.SerializeToString()),))
