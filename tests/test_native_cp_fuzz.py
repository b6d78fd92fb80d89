"""The control plane on the native engine against the Python engine: seeded write sequences with packets between
them (scripts/fuzz_control_plane.py) send the same packets and end with the same registers and counters, the
sanitized driver replays the native trace clean, and the same writes are refused alike. With the fix of 243e44d
(entries modified to an action with more parameters) reverted, 9 of the 21 programs fail within these 600 steps:
aggnet.p4's engine corrupts the heap (glibc aborts the child), basic.p4 and others send other packets."""
from __future__ import annotations

import collections
import sys
from pathlib import Path

import bmv2_ref
import pytest

from p4target import state as st
from p4target.frontend import load_program
from p4target.lowered import model as lowered
from p4target.native.engine import Trace
from p4target.native.pipeline import NativePipeline
from p4target.pipeline import Pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import fuzz_control_plane as cp  # noqa: E402
import fuzz_engine as fz  # noqa: E402

DATA = Path(__file__).parent / "data"
STEPS = 600


def test_control_plane_sequences_agree_and_replay_clean():
    programs = {n: p for n, p in cp.PROGRAMS.items() if p.is_file()}  # the corpus ones need AGGNET_P4C_CORPUS
    assert len(programs) >= 12
    total = collections.Counter()
    for name in programs:
        outcome = cp.isolated(name, STEPS, 1)  # a child process: a crash of the engine fails only this test
        assert outcome.ok, f"{name}: {outcome.line}"
        assert "(0 with outputs differing from the trace)" in outcome.line
        assert outcome.counts["packets"] > 100, name
        total += outcome.counts
    for kind in ("inserts", "modifies", "action-changing modifies", "deletes", "member ops",
                 "action-changing member modifies", "group ops", "defaults", "register writes", "counter writes",
                 "meter configs", "value set writes", "multicast writes", "clone writes", "resets", "refused"):
        assert total[kind] > 0, kind
    assert total["hits"] > 1000 and total["misses"] > 1000, total


def test_a_program_printed_from_its_lowered_form_keeps_defaultonly_actions(tmp_path):
    """A table without a default_action gets an implicit @defaultonly NoAction; when the native engine prints a
    program from its lowered form (here: a range over 96 bits), its state once lost that scope and took entries
    running NoAction that the Python engine and simple_switch_grpc refuse."""
    path = tmp_path / "wide_range.p4"
    path.write_text((DATA / "native_gaps" / "wide_range.p4").read_text().replace("default_action = drop();", ""))
    program = load_program(str(path))
    native, python = NativePipeline(program), Pipeline(program)
    try:
        assert isinstance(native.program, lowered.Program)
        for pipeline in (native, python):
            match = {"hdr.w.addr": st.Range(1, 2**90), "hdr.w.kind": st.Exact(1)}
            with pytest.raises(st.InvalidArgument, match="@defaultonly"):
                pipeline.state.insert_entry("WrIngress.classify", st.TableEntry(match, "NoAction", priority=1))
            pipeline.state.insert_entry("WrIngress.classify", st.TableEntry(match, "WrIngress.drop", priority=1))
            assert pipeline.state.table("WrIngress.classify").schema.default_only == {"NoAction"}
    finally:
        native.close()


def test_a_register_written_back_after_a_packet_changed_it_is_replayed():
    """tables.p4 keeps the last packet's k in a register and writes the one before into the next packet. A packet
    changed the cell, then the control plane wrote back the value it had before that packet (as a reset does):
    the Trace once left that write out (it compared the cells with what it had last recorded, not with what the
    packet left), so the sanitized driver's replay sent a different packet."""
    trace = Trace()
    native = NativePipeline(load_program(str(DATA / "interp" / "tables.p4")), trace=trace)
    try:
        sent = [native.process(1, bytes([k, 0, 0, 0, 0, 8, 0]))[0][1][1] for k in (5, 6)]
        native.state.register_write("Ing.last_k", 0, 5)  # what it held before the last packet
        sent.append(native.process(1, bytes([7, 0, 0, 0, 0, 8, 0]))[0][1][1])
        source, text = native.source, trace.text()
    finally:
        native.close()
    assert sent == [0, 5, 5]  # each packet carries the k before it
    result = fz.run("tables", source, text, 0, 1)
    assert result.ok and "(0 with outputs differing from the trace)" in result.line, result.line


@pytest.mark.bmv2
def test_a_direct_meter_read_on_a_miss_leaves_its_field_as_simple_switch(p4c_compiler):
    """The fuzz's meters.p4 finding once the native engine printed every program from its lowered form: with
    `police` (dm.read(hdr.h.dcolor)) as the default action, a miss runs no direct meter, and simple_switch (the
    lowered form: a meter's result_target is written on a hit only) leaves dcolor as it came; the Python engine
    on the IR (interp/codegen.py, gone since) wrote green (0) there."""
    missing = bmv2_ref.missing()
    if missing:
        pytest.skip(missing)
    path = str(DATA / "interp" / "meters.p4")
    program = load_program(path)
    native = NativePipeline(program)
    try:
        with bmv2_ref.Bmv2Switch(p4c_compiler.json(path), Pipeline(program).state.schema) as bmv2:
            sent = {}
            for name, target in (("native", native), ("bmv2", bmv2)):
                target.state.set_default("Ing.t", "Ing.police")
                sent[name] = target.process(1, bytes([1, 0x78, 0x29]))  # a miss: no entry for index 1
                target.state.insert_entry("Ing.t", st.TableEntry({"hdr.h.idx": st.Exact(1)}, "Ing.police"))
                sent[name] += target.process(1, bytes([1, 0x78, 0x29]))  # a hit: green
    finally:
        native.close()
    assert sent["native"] == sent["bmv2"] == [(1, bytes([1, 0, 0x29])), (1, bytes([1, 0, 0]))]
