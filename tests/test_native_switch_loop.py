"""The switch's packet loop on the native engine, in-process and without ports (no root):
PacketOut in, PacketIn out through the engine's event queue, digests and log_msg reaching
Python, an engine swap to a Python pipeline and back, and a clean stop."""
import queue
import threading

from p4target.frontend import load_source
from p4target.native.pipeline import NativePipeline
from p4target.pipeline import Pipeline
from p4target.switch import Switch

PUNT = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct m_t { }
struct hs_t { h_t h; }
struct learn_t { bit<8> a; bit<9> port; }
parser P(packet_in p, out hs_t hs, inout m_t m, inout standard_metadata_t s) {
    state start { p.extract(hs.h); transition accept; } }
control V(inout hs_t hs, inout m_t m) { apply { } }
control I(inout hs_t hs, inout m_t m, inout standard_metadata_t s) {
    apply {
        hs.h.b = hs.h.a + 1;
        s.egress_spec = 255;
        log_msg("punting a={}", {hs.h.a});
        digest<learn_t>(1, {hs.h.a, s.ingress_port});
    } }
control E(inout hs_t hs, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout hs_t hs, inout m_t m) { apply { } }
control D(packet_out p, in hs_t hs) { apply { p.emit(hs.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_packet_out_in_digests_logs_engine_swap_and_stop():
    program = load_source(PUNT, "punt.p4")
    switch = Switch({}, cpu_port=255)
    punted: queue.Queue = queue.Queue()
    switch.packet_in = punted.put
    native = NativePipeline(program)
    switch.set_pipeline(native)
    loop = threading.Thread(target=switch.run, daemon=True)
    loop.start()
    try:
        switch.inject(255, bytes([7, 0]))
        assert punted.get(timeout=10) == bytes([7, 8])
        assert native.state.drain_digests() == [("learn_t", (7, 255))]
        assert "punting a=7" in native.state.log
        python = Pipeline(program)
        switch.set_pipeline(python)  # the engine's loop ends, the Python loop takes over
        switch.inject(3, bytes([1, 0]))
        assert punted.get(timeout=10) == bytes([1, 2])
        again = NativePipeline(program)
        switch.set_pipeline(again)
        switch.inject(4, bytes([2, 0]))
        assert punted.get(timeout=10) == bytes([2, 3])
        assert again.state.drain_digests() == [("learn_t", (2, 4))]
    finally:
        switch.stop()
        loop.join(10)
        switch.close()
    assert not loop.is_alive()
