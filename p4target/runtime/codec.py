"""P4Runtime byte strings <-> Python ints (P4Runtime spec section 8.3, "Bytestrings").

Writes accept any big-endian string whose value fits the field (the canonical, shortest
form and the zero-padded form alike); reads always answer in canonical form: the
shortest string holding the value, one zero byte for 0.
"""
from __future__ import annotations

from typing import Any

from finsy.proto import p4r

from p4target import state as st
from p4target.errors import shorten
from p4target.runtime.errors import invalid, state_call, unimplemented


def decode(data: bytes, bitwidth: int, what: str) -> int:
    """The unsigned value of `data`; INVALID_ARGUMENT if empty or wider than `bitwidth` bits."""
    if not data:
        raise invalid(f"{what}: empty byte string")
    value = int.from_bytes(data, "big")
    if value >> bitwidth:
        raise invalid(f"{what}: value {shorten(data)} does not fit in {bitwidth} bits")
    return value


def encode(value: int) -> bytes:
    """Canonical byte string of a non-negative int."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def pack_fields(values: list[int], widths: list[int]) -> bytes:
    """Concatenate fields bit by bit, as a P4 header is laid out on the wire (MSB first)."""
    total = 0
    for value, width in zip(values, widths):
        total = (total << width) | value
    nbits = sum(widths)
    return total.to_bytes((nbits + 7) // 8, "big") if nbits else b""


def unpack_fields(data: bytes, widths: list[int]) -> list[int]:
    """Split the first sum(widths) bits of `data` into fields (the inverse of pack_fields)."""
    nbits = sum(widths)
    nbytes = (nbits + 7) // 8
    total = int.from_bytes(data[:nbytes], "big") >> (nbytes * 8 - nbits)
    values = []
    for width in reversed(widths):
        values.append(total & ((1 << width) - 1))
        total >>= width
    return values[::-1]


def bitwidth(type_spec: Any) -> int:
    """Width of a register's or digest field's bit<W> P4DataTypeSpec."""
    if type_spec.WhichOneof("type_spec") != "bitstring":
        raise unimplemented("only bit<W> register and digest field types are supported")
    bits = type_spec.bitstring
    return getattr(bits, bits.WhichOneof("type_spec")).bitwidth


def meter_config_in(config: p4r.MeterConfig, what: str) -> st.MeterConfig:
    """A validated state MeterConfig; INVALID_ARGUMENT for negative values or pir < cir."""
    if config.eburst:
        raise unimplemented(f"{what}: eburst (single-rate three-color meters) is not supported")
    values = st.MeterConfig(config.cir, config.cburst, config.pir, config.pburst)
    state_call(st.check_meter_config, values)
    return values


def meter_config_out(config: st.MeterConfig) -> p4r.MeterConfig:
    return p4r.MeterConfig(cir=config.cir, cburst=config.cburst, pir=config.pir, pburst=config.pburst)
