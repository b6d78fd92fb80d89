"""Hash and checksum algorithms of v1model, computed exactly as BMv2 computes them.

BMv2 (src/bm_sim/calculations.cpp) defines:
- crc16: poly 0x8005, init 0, input and output reflected, no final xor (CRC-16/ARC);
- crc32: the IEEE CRC-32 of zlib/Ethernet (poly 0x04C11DB7 reflected, init and xorout 0xFFFFFFFF);
- crc16_custom / crc32_custom: same defaults as crc16 / crc32 until reconfigured;
- csum16: the internet checksum (ones' complement of the ones' complement sum of 16-bit words);
- xor16: xor of the big-endian 16-bit words, the last one zero-padded on the right;
- identity: the first 8 bytes as a big-endian integer.
The input is the hash's field list packed bit by bit (MSB first) and zero-padded to whole
bytes, which is what `pack_fields` builds.
"""
from __future__ import annotations

import random
import zlib
from collections.abc import Callable, Iterable


def pack_fields(fields: Iterable[tuple[int, int]]) -> bytes:
    """Concatenate (value, bitwidth) pairs MSB first; pad the tail with zero bits to a byte."""
    acc = 0
    nbits = 0
    for value, width in fields:
        acc = (acc << width) | (value & ((1 << width) - 1))
        nbits += width
    pad = -nbits % 8
    return (acc << pad).to_bytes((nbits + pad) // 8, "big")


def _reflected_table(poly_reflected: int) -> list[int]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly_reflected if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC16_TABLE = _reflected_table(0xA001)  # 0x8005 bit-reversed


def crc16(data: bytes) -> int:
    """CRC-16/ARC, BMv2's `crc16`."""
    crc = 0
    table = _CRC16_TABLE
    for b in data:
        crc = (crc >> 8) ^ table[(crc ^ b) & 0xFF]
    return crc


def crc32(data: bytes) -> int:
    """IEEE CRC-32, BMv2's `crc32`."""
    return zlib.crc32(data)


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071), BMv2's `csum16`; an odd last byte is padded with zero.

    The ones' complement sum of 16-bit words is the number modulo 0xFFFF (2**16 == 1 there),
    except that a non-zero multiple of 0xFFFF sums to 0xFFFF; one big-int op, no loop.
    """
    if len(data) % 2:
        data += b"\x00"
    n = int.from_bytes(data, "big")
    total = n % 0xFFFF or (0xFFFF if n else 0)
    return ~total & 0xFFFF


def xor16(data: bytes) -> int:
    """Xor of big-endian 16-bit words, BMv2's `xor16`."""
    if len(data) % 2:
        data += b"\x00"
    out = 0
    for i in range(0, len(data), 2):
        out ^= (data[i] << 8) | data[i + 1]
    return out


def identity(data: bytes) -> int:
    """The first 8 bytes as a big-endian integer, BMv2's `identity`."""
    return int.from_bytes(data[:8], "big")


# v1model HashAlgorithm member -> function of the packed input bytes.
ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc16_custom": crc16,
    "crc32": crc32,
    "crc32_custom": crc32,
    "csum16": csum16,
    "xor16": xor16,
    "identity": identity,
}


def v1model_hash(algo: str, base: int, data: bytes, max_value: int, rng: random.Random | None = None) -> int:
    """`hash(result, algo, base, data, max)`: base + h % max as BMv2 does (max 0 = no modulo).

    `random` (no BMv2 counterpart with a fixed value) draws 32 bits from `rng`.
    """
    h = (rng or random).getrandbits(32) if algo == "random" else ALGORITHMS[algo](data)
    return base + (h % max_value if max_value else h)
