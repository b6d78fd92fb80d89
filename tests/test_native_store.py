"""The native engine's State (p4target/native/store.py): what the control plane writes lands in the engine's
memory, and no entry object points into an engine's memory once that engine is freed."""
from pathlib import Path

from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target import state as st
from p4target.frontend import load_program
from p4target.native.pipeline import NativePipeline
from p4target.pipeline import Pipeline

PROGRAM = Path(__file__).parent / "data" / "runtime" / "ipv4_cpu.p4"


def test_an_entry_outlives_its_engine_with_its_counts_and_goes_into_the_next():
    """A stored entry reads its direct counter from engine memory. It once kept doing so after the engine was
    freed, and inserted again (a test's step list run on several pipelines) its counter reset wrote into that
    freed memory: the intermittent segfaults in test_native_selectors."""
    program = load_program(str(PROGRAM))
    entry = st.TableEntry({"hdr.ethernet.etherType": st.Ternary(0x0800, 0xFFFF)}, "MyIngress.drop", priority=1)
    frame = bytes(Ether() / IP(dst="10.0.0.1") / UDP())
    first = NativePipeline(program)
    first.state.insert_entry("MyIngress.acl", entry)
    for _ in range(3):
        first.process(1, frame)
    first.close()
    assert type(entry) is st.TableEntry and (entry.packets, entry.bytes) == (3, 3 * len(frame))
    counts = []
    for pipeline in (NativePipeline(program), Pipeline(program)):
        pipeline.state.insert_entry("MyIngress.acl", entry)
        pipeline.process(1, frame)
        counts.append(pipeline.state.table("MyIngress.acl").entries()[0].packets)
        if isinstance(pipeline, NativePipeline):
            pipeline.close()
    assert counts == [1, 1]
