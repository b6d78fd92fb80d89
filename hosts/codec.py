"""Fast numpy codec for AggNet aggregation packets (the data path; docs/protocol.md).

A packet's UDP payload is the `agg` header (protocol.wire) followed by `lanes` big-endian
int32 values. Many packets are encoded or decoded at once as one structured numpy array, so
streaming a tensor costs a few vectorized calls instead of a Python loop per packet.
`frame`/`parse_frame` add and strip Ethernet/IPv4/UDP for tests and host-side relays.
"""
from __future__ import annotations

import ipaddress
import struct
from typing import NamedTuple

import numpy as np

from protocol.wire import AGG_PORT, HEADER_DTYPE, HEADER_FIELDS, WireError, check_lanes

_DEFAULTS = {f.name: f.default for f in HEADER_FIELDS}


class CodecError(WireError):
    """A buffer that is not a whole number of well-formed aggregation packets."""


def packet_dtype(lanes: int) -> np.dtype:
    """The structured dtype of one whole packet payload with `lanes` int32 values."""
    return np.dtype(HEADER_DTYPE.descr + [("values", ">i4", (check_lanes(lanes),))])


def encode(job_id: int, slot: np.ndarray | int, seq: np.ndarray | int, flags: np.ndarray | int,
           values: np.ndarray, workers: int = _DEFAULTS["workers"], scale: int = 0) -> np.ndarray:
    """Packets for the rows of `values` (shape (n, lanes)); header arguments broadcast.

    Returns a structured array; `arr.tobytes()` is the n payloads back to back and
    `arr[i].tobytes()` one payload.
    """
    values = np.asarray(values)
    if values.ndim != 2:
        raise CodecError(f"values: expected shape (packets, lanes), got {values.shape}")
    if values.dtype != np.int32:
        raise CodecError(f"values: expected int32, got {values.dtype}")
    out = np.zeros(values.shape[0], dtype=packet_dtype(values.shape[1]))
    out["job_id"] = job_id
    out["slot"] = slot
    out["seq"] = np.asarray(seq, dtype=np.int64) & 0xFFFFFFFF
    out["flags"] = flags
    out["lanes"] = values.shape[1]
    out["workers"] = workers
    out["scale"] = scale
    out["values"] = values
    return out


def decode(data: bytes | bytearray | memoryview, lanes: int) -> np.ndarray:
    """View the back-to-back payloads in `data` as a structured array (no copy)."""
    dtype = packet_dtype(lanes)
    if len(data) == 0 or len(data) % dtype.itemsize:
        raise CodecError(f"payload: {len(data)} bytes is not a whole number of {dtype.itemsize}-byte "
                         f"packets with {lanes} lanes")
    arr = np.frombuffer(data, dtype=dtype)
    bad = arr["lanes"] != lanes
    if bad.any():
        raise CodecError(f"payload: packet {int(np.argmax(bad))} says lanes={int(arr['lanes'][bad][0])}, "
                         f"expected {lanes}")
    return arr


# ---------------------------------------------------------------------------
# Ethernet / IPv4 / UDP framing (tests, relays, pcap inspection)


class Frame(NamedTuple):
    """The addressing of an Ethernet/IPv4/UDP frame plus its UDP payload."""

    dst_mac: str
    src_mac: str
    src_ip: str
    dst_ip: str
    sport: int
    dport: int
    payload: bytes


_ETH_IP_UDP = struct.Struct("!6s6sH BBHHHBBH4s4s HHHH")
FRAME_OVERHEAD = _ETH_IP_UDP.size  # 42 bytes


def _mac_bytes(mac: str) -> bytes:
    parts = mac.split(":")
    if len(parts) != 6:
        raise CodecError(f"MAC address {mac!r}: expected six ':'-separated bytes")
    return bytes(int(p, 16) for p in parts)


def _mac_str(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw)


def ipv4_checksum(header: bytes) -> int:
    """The ones'-complement checksum of an IPv4 header (checksum field zeroed)."""
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def frame(payload: bytes, src_mac: str, dst_mac: str, src_ip: str, dst_ip: str,
          sport: int, dport: int = AGG_PORT, ttl: int = 64) -> bytes:
    """Wrap a UDP payload in Ethernet/IPv4 (no options, valid checksum)/UDP (checksum 0)."""
    src = ipaddress.IPv4Address(src_ip).packed
    dst = ipaddress.IPv4Address(dst_ip).packed
    ip_len = 20 + 8 + len(payload)
    ip_header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0x4000, ttl, 17, 0, src, dst)
    csum = ipv4_checksum(ip_header)
    return _ETH_IP_UDP.pack(_mac_bytes(dst_mac), _mac_bytes(src_mac), 0x0800,
                            0x45, 0, ip_len, 0, 0x4000, ttl, 17, csum, src, dst,
                            sport, dport, 8 + len(payload), 0) + payload


def parse_frame(data: bytes) -> Frame:
    """Split an Ethernet/IPv4(no options)/UDP frame; raises CodecError for anything else."""
    if len(data) < FRAME_OVERHEAD:
        raise CodecError(f"frame: {len(data)} bytes is too short for Ethernet/IPv4/UDP")
    (dmac, smac, ethertype, vihl, _tos, ip_len, _id, _frag, _ttl, proto, _csum, src, dst,
     sport, dport, udp_len, _ucsum) = _ETH_IP_UDP.unpack_from(data)
    if ethertype != 0x0800 or vihl != 0x45 or proto != 17:
        raise CodecError(f"frame: not Ethernet/IPv4(no options)/UDP (ethertype={ethertype:#06x}, "
                         f"version/ihl={vihl:#04x}, protocol={proto})")
    if udp_len < 8 or 14 + 20 + udp_len > len(data) or ip_len != 20 + udp_len:
        raise CodecError(f"frame: inconsistent lengths (ip total {ip_len}, udp {udp_len}, frame {len(data)})")
    return Frame(_mac_str(dmac), _mac_str(smac), str(ipaddress.IPv4Address(src)),
                 str(ipaddress.IPv4Address(dst)), sport, dport,
                 bytes(data[FRAME_OVERHEAD:FRAME_OVERHEAD + udp_len - 8]))
