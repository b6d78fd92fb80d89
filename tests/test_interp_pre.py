"""Replication engine: multicast, clones, resubmit, recirculate, digests, truncate (pre.p4)."""
from pathlib import Path

import pytest

from p4target import load
from p4target.frontend import load_program
from p4target.load import ENGINES
from p4target.pipeline import (
    E2E_CLONE,
    I2E_CLONE,
    NORMAL,
    RECIRCULATED,
    REPLICATED,
    RESUBMITTED,
)

DATA = Path(__file__).parent / "data" / "interp"


@pytest.fixture(params=ENGINES)
def pipeline(request):
    return load.pipeline(load_program(str(DATA / "pre.p4")), request.param)


def hdr(data: bytes) -> dict[str, int]:
    names = ("op", "count", "itype", "rid", "port", "loops")
    return dict(zip(names, data[:6]))


def pkt(op: int, count: int = 0) -> bytes:
    return bytes([op, count, 0, 0, 0, 0]) + b"PAYLOAD"


def test_multicast_replicas_get_port_rid_and_instance_type(pipeline):
    pipeline.state.mc_group_insert(1, [(2, 10), (3, 11), (4, 12)])
    out = pipeline.process(1, pkt(1))
    # port 3's copy is dropped by mark_to_drop in egress
    assert [(port, hdr(d)["rid"], hdr(d)["port"], hdr(d)["itype"]) for port, d in out] == [
        (2, 10, 2, REPLICATED), (4, 12, 4, REPLICATED)]
    assert all(d.endswith(b"PAYLOAD") for _, d in out)


def test_multicast_to_missing_group_drops(pipeline):
    assert pipeline.process(1, pkt(1)) == []


def test_i2e_clone_is_the_original_packet(pipeline):
    pipeline.state.clone_session_insert(5, [(7, 1)])
    out = pipeline.process(1, pkt(2, count=9))
    got = {port: hdr(d) for port, d in out}
    assert set(got) == {1, 7}
    assert got[1]["count"] == 0x55 and got[1]["itype"] == NORMAL
    assert got[7]["count"] == 9 and got[7]["itype"] == I2E_CLONE  # ingress changes not in the clone


def test_clone_without_session_only_sends_original(pipeline):
    assert [port for port, _ in pipeline.process(1, pkt(2))] == [1]


def test_e2e_clone_with_truncation(pipeline):
    pipeline.state.clone_session_insert(6, [(8, 0)], packet_length=4)
    out = pipeline.process(1, pkt(5))
    assert [port for port, _ in out] == [8, 1]
    clone = out[0][1]
    assert len(clone) == 4 and clone[2] == E2E_CLONE
    assert hdr(out[1][1])["itype"] == NORMAL and out[1][1].endswith(b"PAYLOAD")


def test_resubmit_preserves_only_the_field_list(pipeline):
    out = pipeline.process(1, pkt(4))
    assert len(out) == 1
    h = hdr(out[0][1])
    assert h["loops"] == 9  # @field_list(1) survived the resubmit
    assert h["count"] == 0  # meta.scratch (not in the list) was reset, not 0x44
    assert h["itype"] == RESUBMITTED


def test_recirculate_loops_until_done(pipeline):
    out = pipeline.process(1, pkt(3))
    assert len(out) == 1
    h = hdr(out[0][1])
    assert h["count"] == 3 and h["loops"] == 3 and h["itype"] == RECIRCULATED


def test_digest_is_queued_and_packet_dropped(pipeline):
    assert pipeline.process(9, pkt(6, count=42)) == []
    assert pipeline.state.drain_digests() == [("learn_t", (42, 9))]
    assert pipeline.state.schema.digests == ("learn_t",)


def test_truncate(pipeline):
    out = pipeline.process(1, pkt(7))
    assert out[0][1] == bytes([7, 0, NORMAL])


FIELD_LIST_PROGRAM = """
#include <core.p4>
#include <v1model.p4>
const bit<8> KEEP = 3;
header h_t { bit<8> op; bit<8> kept; bit<8> lost; }
struct m_t { @field_list(KEEP) bit<8> kept; bit<8> lost; }
struct H { h_t h; }
parser P(packet_in pk, out H h, inout m_t m, inout standard_metadata_t sm) { state start { pk.extract(h.h); transition accept; } }
control V(inout H h, inout m_t m) { apply { } }
control I(inout H h, inout m_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        m.kept = 0x11;
        m.lost = 0x22;
        clone_preserving_field_list(CloneType.I2E, 5, KEEP);
    }
}
control E(inout H h, inout m_t m, inout standard_metadata_t sm) {
    apply { if (sm.instance_type == 1) { h.h.kept = m.kept; h.h.lost = m.lost; } }
}
control C(inout H h, inout m_t m) { apply { } }
control D(packet_out pk, in H h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_field_list_named_by_a_constant_is_preserved_in_clones():
    from p4target.frontend import load_source
    pipe = load.pipeline(load_source(FIELD_LIST_PROGRAM, "fl.p4"), "python")
    pipe.state.clone_session_insert(5, [(7, 0)])
    out = dict(pipe.process(1, bytes([0, 0, 0])))
    assert out[7] == bytes([0, 0x11, 0])  # the clone kept m.kept (list KEEP = 3), not m.lost
    assert out[1] == bytes([0, 0, 0])
