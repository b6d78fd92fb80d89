"""Register cells wider than 64 bits on the native engine, through the control plane and packets
(BMv2's Thrift API cannot read them, so tests/test_bmv2_differential.py sees them only in packets;
the packets of tests/data/stf/wide_values.stf are checked there and in test_stf_programs.py)."""
from pathlib import Path

import pytest

from p4target.frontend import load_program
from p4target.native.pipeline import ENGINES, NativePipeline, make_pipeline
from p4target.state import InvalidArgument

PROGRAM = Path(__file__).resolve().parent / "data" / "stf" / "wide_values.p4"
C_200 = (0xAB << 192) | (0x1234 << 100) | 0x77  # a 200-bit value with bits in each of its four words



@pytest.fixture(params=ENGINES)
def pipeline(request):
    p = make_pipeline(load_program(str(PROGRAM)), request.param)
    assert isinstance(p, NativePipeline) == (request.param == "native")  # native: no fallback to Python
    yield p
    if isinstance(p, NativePipeline):
        p.close()


def test_wide_register_cells_read_and_write_through_the_control_plane_and_packets(pipeline):
    state = pipeline.state
    state.register_write("WIngress.last_c", 0, (1 << 199) | 5)
    state.register_write("WIngress.acc", 1, (1 << 127) | 1)
    assert state.register_read("WIngress.last_c", 0) == (1 << 199) | 5
    a = 0xFF000000000000000000000000000001
    packet = a.to_bytes(16, "big") + (7).to_bytes(16, "big") + C_200.to_bytes(25, "big") + bytes(16)
    pipeline.process(0, packet)  # no entry for a: dropped, but the registers are written
    assert state.register_read("WIngress.last_c", 0) == ((1 << 199) | 5) ^ C_200
    assert state.register_read("WIngress.acc", 1) == ((1 << 127) + 1 + a) % (1 << 128)
    assert state.register_read("WIngress.low96", 1) == a & ((1 << 96) - 1)
    assert state.register_read("WIngress.last_c", 1) == 0


def test_a_value_too_wide_for_a_wide_register_is_refused_and_changes_nothing(pipeline):
    state = pipeline.state
    state.register_write("WIngress.last_c", 1, 3)
    with pytest.raises(InvalidArgument, match=r"register WIngress.last_c\[1\]: value 0x1.* does not fit in 200 bits"):
        state.register_write("WIngress.last_c", 1, 1 << 200)
    assert state.register_read("WIngress.last_c", 1) == 3
