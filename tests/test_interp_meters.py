"""Meters (trTCM, RFC 2698): unconfigured = green; green, yellow, red as buckets drain."""
from pathlib import Path

import pytest

from p4target import load
from p4target import state as st
from p4target.frontend import load_program
from p4target.load import ENGINES

DATA = Path(__file__).parent / "data" / "interp"
GREEN, YELLOW, RED = st.GREEN, st.YELLOW, st.RED
# 1 unit/s refills nothing measurable during a test; bursts of 1 (committed) and 2 (peak).
SLOW = st.MeterConfig(cir=1, cburst=1, pir=1, pburst=2)


@pytest.fixture(params=ENGINES)
def pipeline(request):
    p = load.pipeline(load_program(str(DATA / "meters.p4")), request.param)
    p.state.insert_entry("Ing.t", st.TableEntry({"hdr.h.idx": st.Exact(1)}, "Ing.police"))
    return p


def colors(pipeline, idx: int) -> tuple[int, int]:
    out = pipeline.process(0, bytes([idx, 9, 9]))
    return out[0][1][1], out[0][1][2]


def test_unconfigured_meters_are_green(pipeline):
    assert [colors(pipeline, 1) for _ in range(3)] == [(GREEN, GREEN)] * 3


def test_indirect_meter_colors(pipeline):
    pipeline.state.meter_set("Ing.m", 2, SLOW)
    assert [colors(pipeline, 2)[0] for _ in range(4)] == [GREEN, YELLOW, RED, RED]
    assert colors(pipeline, 3)[0] == GREEN  # other cells unaffected
    assert pipeline.state.meter_get("Ing.m", 2) == SLOW
    with pytest.raises(st.OutOfRange, match="out of range"):
        pipeline.state.meter_set("Ing.m", 4, SLOW)


def test_direct_meter_colors_per_entry(pipeline):
    pipeline.state.direct_meter_set("Ing.dm", {"hdr.h.idx": st.Exact(1)}, 0, SLOW)
    assert [colors(pipeline, 1)[1] for _ in range(3)] == [GREEN, YELLOW, RED]


def test_meter_refills_over_time():
    cell = st.MeterCell()
    cell.configure(st.MeterConfig(cir=10, cburst=1, pir=10, pburst=1), now=0.0)
    assert cell.execute(1, 0.0) == GREEN
    assert cell.execute(1, 0.01) == RED  # 0.1 token back: not enough
    assert cell.execute(1, 0.2) == GREEN  # refilled (capped at the burst)
