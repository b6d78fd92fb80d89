"""Tables, counters, registers and exit through the pipeline (tables.p4)."""
from pathlib import Path

import pytest

from p4target import load
from p4target import state as st
from p4target.frontend import load_program
from p4target.load import ENGINES

DATA = Path(__file__).parent / "data" / "interp"


@pytest.fixture(params=ENGINES)
def pipeline(request):
    p = load.pipeline(load_program(str(DATA / "tables.p4")), request.param)
    s = p.state
    s.insert_entry("Ing.tern", st.TableEntry({"hdr.h.k": st.Ternary(0x10, 0xF0)}, "Ing.mark", {"v": 1}, priority=10))
    s.insert_entry("Ing.tern", st.TableEntry({"hdr.h.k": st.Ternary(0x12, 0xFF)}, "Ing.mark", {"v": 2}, priority=20))
    s.insert_entry("Ing.by_len", st.TableEntry({"hdr.h.len": st.Range(100, 199)}, "Ing.size_class", {"c": 7},
                                               priority=1))
    return p


def pkt(k: int, t: int = 0, length: int = 0) -> bytes:
    return bytes([k, t, 0, 0]) + length.to_bytes(2, "big") + b"\x00" + b"tail"


def fields(out) -> dict[str, int]:
    assert len(out) == 1
    port, data = out[0]
    return {"port": port, "t": data[1], "r1": data[2], "r2": data[3], "prev": data[6], "tail": data[7:]}


def test_ternary_priority_hit_miss_and_const_entries(pipeline):
    f = fields(pipeline.process(3, pkt(0x12, t=1)))
    assert (f["port"], f["r1"], f["r2"]) == (1, 2, 1 + 10)  # priority 20 beats 10; cls hit set_tag(10)
    f = fields(pipeline.process(3, pkt(0x13, t=2)))
    assert (f["r1"], f["r2"]) == (1, 1 + 20)
    f = fields(pipeline.process(3, pkt(0x23, t=9)))
    assert (f["r1"], f["r2"]) == (0xEE, 2 + 100)  # miss: default action; cls miss -> NoAction branch
    assert f["tail"] == b"tail"
    with pytest.raises(st.PermissionDenied):
        pipeline.state.insert_entry("Ing.cls", st.TableEntry({"hdr.h.t": st.Exact(3)}, "Ing.set_tag", {"tag": 1}))


def test_direct_and_indirect_counters(pipeline):
    for k in (0x12, 0x12, 0x15, 0x99):
        pipeline.process(3, pkt(k))
    pipeline.process(5, pkt(0x99))
    tern = pipeline.state.table("Ing.tern")
    hi = tern.find({"hdr.h.k": st.Ternary(0x12, 0xFF)}, priority=20)
    lo = tern.find({"hdr.h.k": st.Ternary(0x10, 0xF0)}, priority=10)
    assert (hi.packets, hi.bytes) == (2, 2 * len(pkt(0)))
    assert lo.packets == 1
    assert pipeline.state.counter_read("Ing.port_ctr", 3) == (4, 4 * len(pkt(0)))
    assert pipeline.state.counter_read("Ing.port_ctr", 5)[0] == 1
    assert pipeline.state.counter_read("Ing.port_ctr", 0) == (0, 0)


def test_register_carries_state_between_packets_and_control_plane(pipeline):
    assert fields(pipeline.process(1, pkt(0x31)))["t"] == 0
    assert fields(pipeline.process(1, pkt(0x32)))["t"] == 0x31
    assert pipeline.state.register_read("Ing.last_k", 0) == 0x32
    pipeline.state.register_write("Ing.last_k", 0, 0x77)
    assert fields(pipeline.process(1, pkt(0x33)))["t"] == 0x77


def test_range_table(pipeline):
    assert fields(pipeline.process(1, pkt(0, length=150)))["prev"] == 7
    assert fields(pipeline.process(1, pkt(0, length=200)))["prev"] == 0


def test_exit_skips_the_rest_of_ingress(pipeline):
    f = fields(pipeline.process(1, pkt(0xFF)))
    assert (f["port"], f["r1"], f["r2"]) == (2, 0, 0)
