"""P4 arithmetic through the whole pipeline: bit<8> wrap, int<8> two's complement, saturation."""
from pathlib import Path

import pytest

from p4target import load
from p4target.frontend import load_program
from p4target.load import ENGINES

DATA = Path(__file__).parent / "data" / "interp"

# (name, width, signed) of out_t in arith.p4, in order.
OUT_FIELDS = [
    ("add", 8, 0), ("sub", 8, 0), ("sadd", 8, 0), ("ssub", 8, 0), ("mul", 8, 0),
    ("iadd", 8, 1), ("isub", 8, 1), ("isadd", 8, 1), ("issub", 8, 1),
    ("shl3", 8, 0), ("shlv", 8, 0), ("shr2", 8, 0), ("ishr1", 8, 1), ("hi", 4, 0), ("lo", 4, 0),
    ("cat", 16, 0), ("neg", 8, 0), ("cmpl", 8, 0), ("sext", 16, 1), ("zext", 16, 0), ("ucast", 8, 0),
    ("lt", 8, 0), ("ilt", 8, 0),
]


@pytest.fixture(scope="module", params=ENGINES)
def pipeline(request):
    return load.pipeline(load_program(str(DATA / "arith.p4")), request.param)


def decode(data: bytes) -> dict[str, int]:
    total = sum(w for _, w, _ in OUT_FIELDS)
    value = int.from_bytes(data, "big")
    out = {}
    for name, w, signed in OUT_FIELDS:
        total -= w
        v = (value >> total) & ((1 << w) - 1)
        out[name] = v - (1 << w) if signed and v >> (w - 1) else v
    return out


def sat(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


def wrap_s8(v: int) -> int:
    return ((v + 128) & 0xFF) - 128


def expected(a: int, b: int, c: int, d: int) -> dict[str, int]:
    return {
        "add": (a + b) & 0xFF, "sub": (a - b) & 0xFF, "sadd": min(a + b, 255), "ssub": max(a - b, 0),
        "mul": (a * b) & 0xFF, "iadd": wrap_s8(c + d), "isub": wrap_s8(c - d),
        "isadd": sat(c + d, -128, 127), "issub": sat(c - d, -128, 127),
        "shl3": (a << 3) & 0xFF, "shlv": (a << b) & 0xFF if b < 8 else 0, "shr2": a >> 2, "ishr1": c >> 1,
        "hi": a >> 4, "lo": a & 0xF, "cat": (a << 8) | b, "neg": -a & 0xFF, "cmpl": ~a & 0xFF,
        "sext": c, "zext": a, "ucast": c & 0xFF, "lt": int(a < b), "ilt": int(c < d),
    }


@pytest.mark.parametrize("a, b, c, d", [
    (255, 1, 127, 1),
    (0, 1, -128, 1),
    (200, 100, -128, -1),
    (128, 128, 100, 100),
    (1, 7, -100, -100),
    (3, 200, -1, 127),
    (0, 0, 0, 0),
])
def test_arithmetic_edge_cases(pipeline, a, b, c, d):
    packet = bytes([a, b, c & 0xFF, d & 0xFF])
    out = pipeline.process(0, packet)
    assert [port for port, _ in out] == [1]
    data = out[0][1]
    assert data[:4] == packet
    assert decode(data[4:]) == expected(a, b, c, d)
