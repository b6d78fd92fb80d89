"""The native engine's State (p4target/native/store.py): what the control plane writes lands in the engine's
memory, and a caller's objects never point into an engine's memory."""
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target import state as st
from p4target.frontend import load_program
from p4target.native.build import compiler
from p4target.native.pipeline import NativePipeline

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler for the native engine")
PROGRAM = Path(__file__).parent / "data" / "runtime" / "ipv4_cpu.p4"


def test_one_entry_object_inserted_into_two_engines_counts_in_each_its_own():
    """Insert once made the caller's entry the stored one, over this engine's counter cells: inserted again into a
    second engine, the first engine's entry read the second's cells (and, that engine freed, insert's counter reset
    wrote into freed memory: the crashes of tests that run the same steps on several pipelines)."""
    program = load_program(str(PROGRAM))
    entry = st.TableEntry({"hdr.ethernet.etherType": st.Ternary(0x0800, 0xFFFF)}, "MyIngress.drop", priority=1)
    first, second = NativePipeline(program), NativePipeline(program)
    try:
        for pipeline in (first, second):
            pipeline.state.insert_entry("MyIngress.acl", entry)
        assert type(entry) is st.TableEntry  # the caller's object stays theirs
        frame = bytes(Ether() / IP(dst="10.0.0.1") / UDP())
        for _ in range(3):
            first.process(1, frame)
        second.process(1, frame)
        counts = [p.state.table("MyIngress.acl").entries()[0].packets for p in (first, second)]
    finally:
        first.close()
        second.close()
    assert counts == [3, 1]
