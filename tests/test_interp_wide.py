"""Wide bit<W> fields, which the embedded target stores in 32-bit chunks, behave as P4 says:
slices within and across chunks, slice writes, copies, whole-value arithmetic, emission of a
field that is not on a byte boundary, and a saturating lane add, against a Python-int model."""
import random
from pathlib import Path

import pytest

from p4target import load
from p4target.frontend import load_program

DATA = Path(__file__).parent / "data" / "interp"
IN_BITS, OUT_BITS = 4 + 200 + 4 + 256, 256 + 200 + 32 + 16 + 48 + 8 + 8 + 200


@pytest.fixture(scope="module")
def pipeline():
    return load.pipeline(load_program(str(DATA / "wide.p4")), "python")


def bits(v: int, hi: int, lo: int) -> int:
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


def put(v: int, hi: int, lo: int, x: int) -> int:
    m = ((1 << (hi - lo + 1)) - 1) << lo
    return (v & ~m) | ((x << lo) & m)


def expected_out(w: int, v: int) -> int:
    t = put(w, 100, 37, bits(v, 63, 0))
    ov = put(v, 31, 0, min(bits(v, 255, 224) + bits(v, 31, 0), 2**32 - 1))
    ov = put(ov, 255, 224, 7)
    ov = put(ov, 131, 124, 0xAB)
    fields = [(ov, 256), (t, 200), (bits(v, 255, 224), 32), (bits(v, 47, 32), 16), (bits(v, 79, 32), 48),
              (bits(w, 199, 192), 8), (int(t == w), 8), ((w + 1) % 2**200, 200)]
    out = 0
    for value, width in fields:
        out = (out << width) | value
    return out


@pytest.mark.parametrize("seed", range(6))
def test_wide_fields_match_the_int_model(pipeline, seed):
    rng = random.Random(seed)
    pre, post = rng.getrandbits(4), rng.getrandbits(4)
    w = rng.getrandbits(200) if seed else 2**200 - 1  # all ones: w + 1 wraps to 0
    v = rng.getrandbits(256) if seed != 1 else 2**256 - 1  # all ones: the lane add saturates
    if seed == 2:
        v = put(v, 63, 0, bits(w, 100, 37))  # the slice write leaves w unchanged
    packet_in = ((((pre << 200 | w) << 4 | post) << 256) | v).to_bytes(IN_BITS // 8, "big")
    out = pipeline.process(1, packet_in + b"payload")
    assert len(out) == 1 and out[0][0] == 2
    data = out[0][1]
    assert data[:IN_BITS // 8] == packet_in  # the unaligned wide field is emitted unchanged
    assert data[IN_BITS // 8:-7] == expected_out(w, v).to_bytes(OUT_BITS // 8, "big")
    assert data[-7:] == b"payload"

