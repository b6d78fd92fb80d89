"""The aggregation packet format, defined once (docs/protocol.md).

`HEADER_FIELDS` lists the 16-byte `agg` header in wire order. Everything else is derived
from it: the struct format and byte offsets for single-packet code, the numpy dtype of the
vectorized codec (hosts.codec), the scapy layer (protocol.layer) and the P4 view of the
header (`p4_fields`), which a test holds `agg_t` in p4src/aggnet.p4 to. The lanes follow
the header: `lanes` big-endian int32 values, lane 0 first; in P4 they are one `bit<32>`
field per lane, `v0` .. `v<N-1>` of `agg_values_t` (p4c's BMv2 back end accepts no field
wider than 2048 bits and no shift past 256, which one wide field would need).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

AGG_PORT = 48864  # 0xBEE0: the UDP destination port switches recognise as aggregation traffic
LANE_BYTES = 4  # one int32 per lane
IPV4_MTU = 1500


@dataclass(frozen=True)
class Field:
    """One header field: `bits` wide (a multiple of 8), optionally signed, `default` where a
    worker fills it in. `flags` names one-bit flags packed into it from the most significant
    bit down; the bits left over are reserved (`<name>_reserved` in P4 and scapy)."""

    name: str
    bits: int
    signed: bool = False
    flags: tuple[str, ...] = ()
    default: int = 0


HEADER_FIELDS = (
    Field("job_id", 16),
    Field("slot", 16),  # relative to the job's slot region
    Field("seq", 32),  # chunk number mod 2^32
    Field("flags", 8, flags=("pool", "result", "retx", "overflow", "ecn", "ps", "spill")),
    Field("reserved", 8),
    Field("lanes", 16),  # int32 values that follow; a switch drops other counts than its own
    Field("workers", 16, default=1),  # contributions summed in the values (a worker sends 1)
    Field("scale", 16, signed=True),  # fractional bits of the fixed-point values
)

HEADER_BYTES = sum(f.bits for f in HEADER_FIELDS) // 8
OFFSETS = {f.name: sum(g.bits for g in HEADER_FIELDS[:i]) // 8 for i, f in enumerate(HEADER_FIELDS)}
FLAG = {name: 0x80 >> i for f in HEADER_FIELDS for i, name in enumerate(f.flags)}
FLAG_POOL = FLAG["pool"]  # worker: which of the slot's two pools (shadow copies) this chunk uses
FLAG_RESULT = FLAG["result"]  # switch: the lanes hold the complete sum (travelling down the tree)
FLAG_RETX = FLAG["retx"]  # worker (or a switch resending stored state): a retransmission
FLAG_OVERFLOW = FLAG["overflow"]  # switch: some lane saturated while summing; the values are clamped
FLAG_ECN = FLAG["ecn"]  # switch: a queue on the way was deep (congestion): the worker backs off
FLAG_PS = FLAG["ps"]  # worker, parameter server: a spilled chunk on its way to or from the server (plain IPv4)
FLAG_SPILL = FLAG["spill"]  # shared pool: with result, "this chunk spilled to the server"; without, "free its slot"
# Aggregation packets leave a switch port marked (FLAG_ECN) once the packets queued ahead of them fill
# this fraction of the port's queue: AIMD then backs off before the queue tail-drops where unaggregated
# streams meet (0: no marking; `aggnet run --ecn-fraction`).
DEFAULT_ECN_FRACTION = 0.25

_STRUCT_CODES = {8: "b", 16: "h", 32: "i"}
HEADER_STRUCT = struct.Struct("!" + "".join(
    _STRUCT_CODES[f.bits] if f.signed else _STRUCT_CODES[f.bits].upper() for f in HEADER_FIELDS))
HEADER_DTYPE = np.dtype([(f.name, f"{'>' if f.bits > 8 else ''}{'i' if f.signed else 'u'}{f.bits // 8}")
                         for f in HEADER_FIELDS])

# Lanes per packet a switch program is built for; the largest fills a 1500-byte IPv4 packet.
MTU_LANES = (IPV4_MTU - 20 - 8 - HEADER_BYTES) // LANE_BYTES
BASE_LANES = 32  # p4src/aggnet.p4's own; the other programs are generated from it (p4src/gen_lanes.py)
LANE_COUNTS = (BASE_LANES, 64, 128, 256, MTU_LANES)
# What a run uses unless told: a full packet. At 32 lanes the 58 bytes of headers a packet carries
# ate the gain of aggregating (star8 at 100 Mb/s: in-network 0.96x the ring's goodput).
DEFAULT_LANES = MTU_LANES


class WireError(ValueError):
    """A lane count or payload that is not a packet of this protocol."""

    exit_code = 2


def check_lanes(lanes: int) -> int:
    """`lanes` if some switch program handles it, else WireError naming the choices."""
    if lanes not in LANE_COUNTS:
        raise WireError(f"lanes: {lanes} is not supported (choose one of {', '.join(map(str, LANE_COUNTS))})")
    return lanes


def packet_bytes(lanes: int) -> int:
    """UDP payload size of one packet with `lanes` values."""
    return HEADER_BYTES + LANE_BYTES * check_lanes(lanes)


def program_name(lanes: int) -> str:
    """The file in p4src/ built for `lanes` values per packet."""
    return "aggnet.p4" if check_lanes(lanes) == BASE_LANES else f"aggnet_l{lanes}.p4"


def p4_fields() -> list[tuple[str, int]]:
    """(name, width) of every field of `agg_t` as P4 declares it: flags as bit<1> each."""
    out: list[tuple[str, int]] = []
    for f in HEADER_FIELDS:
        if f.flags:
            out += [(name, 1) for name in f.flags] + [(f"{f.name}_reserved", f.bits - len(f.flags))]
        else:
            out.append((f.name, f.bits))
    return out


def lane_field(k: int) -> str:
    """The P4 field of `agg_values_t` holding lane k."""
    return f"v{k}"
