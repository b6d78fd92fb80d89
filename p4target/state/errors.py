"""What a rejected control-plane write raises, and the checks every kind of state makes before it writes.

Errors are `StateError` subclasses whose `code` names the matching gRPC status (the P4Runtime server
maps them 1:1)."""
from __future__ import annotations


class StateError(Exception):
    """A rejected control-plane operation. `code` is the gRPC status name."""

    code = "UNKNOWN"
    exit_code = 2


class InvalidArgument(StateError):
    """Unknown name, value too wide, bad prefix, wrong params, ..."""

    code = "INVALID_ARGUMENT"


class AlreadyExists(StateError):
    """Insert of an entry/group/session whose key is already present."""

    code = "ALREADY_EXISTS"


class NotFound(StateError):
    """Modify/delete/read of something that is not there."""

    code = "NOT_FOUND"


class ResourceExhausted(StateError):
    """Table full (its `size`)."""

    code = "RESOURCE_EXHAUSTED"


class OutOfRange(StateError):
    """Index past the end of a register, counter or meter array."""

    code = "OUT_OF_RANGE"


class FailedPrecondition(StateError):
    """The object is still in use (a member in a group or entry, a group in an entry) or unusable (empty group)."""

    code = "FAILED_PRECONDITION"


class PermissionDenied(StateError):
    """Write to something the program declared const (const entries, const default_action)."""

    code = "PERMISSION_DENIED"


def check_width(what: str, value: int, bitwidth: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidArgument(f"{what}: value must be an integer, got {value!r}")
    if value < 0:
        raise InvalidArgument(f"{what}: value {value} is negative")
    if value >> bitwidth:
        raise InvalidArgument(f"{what}: value {value:#x} does not fit in {bitwidth} bits")


def check_index(what: str, index: int, size: int) -> int:
    """`index` if it addresses one of `size` cells; OutOfRange otherwise."""
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < size:
        raise OutOfRange(f"{what}: index {index} out of range 0..{size - 1}")
    return index
