"""Statements and externs through the pipeline (misc.p4), and load-time/run-time errors."""
from pathlib import Path

import pytest

from p4target import load
from p4target.backends import hashes
from p4target.errors import P4Error
from p4target.frontend import load_program, load_source
from p4target.load import ENGINES

DATA = Path(__file__).parent / "data" / "interp"


@pytest.fixture(scope="module", params=ENGINES)
def pipeline(request):
    return load.pipeline(load_program(str(DATA / "misc.p4")), request.param)


def a_hdr(x: int, y: int, sw: int) -> bytes:
    return bytes([x, y, 0, 0, 0x12, 0x34, 0x56, 0x78, sw, 0])


@pytest.mark.parametrize("sw, bv", [(1, 10), (2, 20), (3, 20), (4, 30)])
def test_statements(pipeline, sw, bv):
    out = pipeline.process(0, a_hdr(1, 2, sw) + b"rest")
    assert len(out) == 1
    d = out[0][1]
    assert (d[0], d[1]) == (2, 1)  # swapped through inout action params
    assert d[9] == (2 + 1) + 1  # list -> struct, struct copy, in/inout action call
    assert int.from_bytes(d[2:4], "big") == hashes.crc16(bytes([2, 1]))
    assert d[4:8] == bytes([0x12, 0x34, 0xAB, 0x78])  # slice assignment
    assert d[10:13] == bytes([bv, bv, 0x11])  # b, its copy b2, st[0] (st[1] invalid)
    assert d[13:] == b"rest"


def test_set_invalid_and_header_copy_keeps_validity(pipeline):
    d = pipeline.process(0, a_hdr(1, 2, 9))[0][1]
    assert d[10:] == bytes([30, 0x11])  # b invalid (not emitted), b2 copied before: still valid


def test_log_msg_and_failed_assert_drops_the_packet(pipeline):
    pipeline.process(0, a_hdr(5, 6, 1))
    assert pipeline.state.log[-1] == "x=6 y=5"
    assert pipeline.process(0, a_hdr(1, 2, 0xEE)) == []
    assert "assert failed at" in pipeline.state.log[-1]


RUNTIME_HASH_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct m_t { }
struct h_t2 { h_t h; }
parser P(packet_in p, out h_t2 h, inout m_t m, inout standard_metadata_t s) { state start { transition accept; } }
control V(inout h_t2 h, inout m_t m) { apply { } }
control I(inout h_t2 h, inout m_t m, inout standard_metadata_t s) {
    apply {
        HashAlgorithm alg = HashAlgorithm.crc16;
        hash(h.h.a, alg, 8w0, { h.h.b }, 8w255);
    }
}
control E(inout h_t2 h, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout h_t2 h, inout m_t m) { apply { } }
control D(packet_out p, in h_t2 h) { apply { } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_unsupported_construct_is_a_one_line_p4_error():
    program = load_source(RUNTIME_HASH_PROGRAM, "hash.p4")  # p4c accepts a run-time hash algorithm
    with pytest.raises(P4Error) as info:
        load.pipeline(program, "python")
    text = str(info.value)
    assert text.startswith("hash.p4:12:") and "a run-time hash algorithm" in text and "\n" not in text
    assert info.value.exit_code == 2
