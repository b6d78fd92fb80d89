"""The native engine built with AddressSanitizer and UndefinedBehaviorSanitizer (scripts/fuzz_engine.py), bounded:
every program of p4c's corpus the target passes and aggnet.p4 with a job installed replay their traces with the
same outputs as the ordinary build, then take a million fuzzed frames (seed 1) with no finding; the same for
p4c's JSON of a sample of them (p4target/backends/c.py). The same run by hand: `python scripts/fuzz_engine.py
[--json]`."""
import re
import shutil
import sys
from pathlib import Path

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target import state as st
from p4target.frontend import load_program
from p4target.native.engine import Trace
from p4target.native.pipeline import NativePipeline
from p4target.pipeline import Pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import fuzz_engine as fz  # noqa: E402

SAMPLE = ["arith-bmv2", "checksum2-bmv2", "parser_error-bmv2", "issue1755-bmv2", "table-entries-ternary-bmv2",
          "union-valid-bmv2", fz.AGGNET]
FRAMES = 30_000  # p4c's JSON of a sample (p4c takes about a second a program)
MILLION = 1_000_000

pytestmark = [pytest.mark.skipif(not fz.CORPUS.is_dir(), reason="p4c's corpus is not at ../shared/p4c-corpus")]
COUNTS = re.compile(r"replayed (\d+) packets \((\d+) with outputs differing from the trace\); fuzzed (\d+) frames")


def test_every_corpus_program_and_aggnet_replay_and_take_a_million_frames_with_no_finding():
    """Issue 20's sanitizer run, in full: every corpus program the target passes and aggnet.p4 with a job."""
    names = [*fz.corpus_names(), fz.AGGNET]
    lines: list[str] = []
    results = fz.fuzz(names, MILLION, seed=1, report=lines.append)
    assert [r.name for r in results] == names, lines  # none skipped: all run natively
    assert all(r.ok for r in results), "\n".join(f"{r.name}: {r.line}" for r in results if not r.ok)
    counts = [COUNTS.match(r.line) for r in results]
    assert all(counts), lines
    assert all(int(m.group(1)) > 0 and int(m.group(2)) == 0 for m in counts), lines  # same outputs as the trace
    assert sum(int(m.group(3)) for m in counts) == MILLION
    aggnet = counts[-1]
    assert int(aggnet.group(1)) > 100 and int(aggnet.group(3)) == MILLION // 2


@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not on PATH (source /opt/p4ref/env.sh)")
def test_sample_from_p4c_json_replays_and_fuzzes_with_no_finding(tmp_path):
    sample = [*SAMPLE[:-1], "checksum1-bmv2", fz.AGGNET]  # checksum1: a varbit of 320 bits, in 64-bit chunks
    lines: list[str] = []
    results = fz.fuzz(sample, FRAMES, seed=1, report=lines.append, json_dir=str(tmp_path))
    assert [r.name for r in results] == sample, lines
    assert all(r.ok for r in results), "\n".join(lines)
    counts = [COUNTS.match(r.line) for r in results]
    assert all(counts) and all(int(m.group(1)) > 0 and int(m.group(2)) == 0 for m in counts), lines


def test_the_sanitizer_reports_an_out_of_bounds_write():
    source, trace = fz.trace_aggnet()
    size = int(re.search(r"static const u64 REG_SIZE\[\] = \{(\d+)", source).group(1))
    result = fz.run(fz.AGGNET, source, trace + f"reg 0 {size} 1\n", 0, 1)  # one cell past register 0
    assert not result.ok and "AddressSanitizer: heap-buffer-overflow" in result.line


def test_a_replay_with_other_outputs_fails():
    source, trace = fz.trace_aggnet()
    changed = re.sub(r"^out (\d+) (\d+) ([0-9a-f]{2})", lambda m: f"out {m[1]} {m[2]} {int(m[3], 16) ^ 1:02x}",
                     trace, count=1, flags=re.M)
    assert changed != trace
    result = fz.run(fz.AGGNET, source, changed, 0, 1)
    assert not result.ok and "(1 with outputs differing from the trace)" in result.line


def test_entries_modified_to_actions_with_more_parameters_forward_as_python_and_replay_clean():
    """An entry inserted with `drop` (no parameters) and modified to `ipv4_forward` (two) once had them written
    over its own key: it then missed, and its delete left a freed entry in its bucket."""
    program = load_program(str(Path(__file__).parent / "data" / "tutorial_basic" / "basic.p4"))
    trace = Trace()
    native, python = NativePipeline(program, trace=trace), Pipeline(program)
    routes = [{"hdr.ipv4.dstAddr": st.Lpm(0x0A000000 + n, 32)} for n in range(1, 5)]
    frames = [bytes(Ether() / IP(dst=f"10.0.0.{n}") / UDP()) for n in range(6)]
    outputs = {}
    try:
        for name, pipeline in (("native", native), ("python", python)):
            sent = []
            for key in routes:
                pipeline.state.insert_entry("MyIngress.ipv4_lpm", st.TableEntry(key, "MyIngress.drop", {}))
            for n, key in enumerate(routes):
                pipeline.state.modify_entry("MyIngress.ipv4_lpm", st.TableEntry(
                    key, "MyIngress.ipv4_forward", {"dstAddr": 0xAABBCCDDEE00 + n, "port": n + 1}))
            sent += [pipeline.process(0, f) for f in frames]
            for key in routes[:2]:  # back to fewer parameters, then deleted
                pipeline.state.modify_entry("MyIngress.ipv4_lpm", st.TableEntry(key, "MyIngress.drop", {}))
            for key in routes[1:3]:
                pipeline.state.delete_entry("MyIngress.ipv4_lpm", st.TableEntry(key, "", {}))
            sent += [pipeline.process(0, f) for f in frames]
            outputs[name] = sent
        source, text = native.source, trace.text()
    finally:
        native.close()
    assert outputs["native"] == outputs["python"]
    assert [len(o) for o in outputs["python"]] == [0, 1, 1, 1, 1, 0] + [0, 0, 0, 0, 1, 0]
    result = fz.run("basic", source, text, 2_000, 1)  # ASan and LeakSanitizer: the entries' blocks all freed
    assert result.ok, result.line


def test_the_driver_replays_every_call_a_trace_records():
    """A call the Trace records but the driver does not know stops a replay with 'unknown command'; this says which
    before a run does."""
    driver = fz.DRIVER.read_text()
    assert [n for n in Trace.RECORDED if f'"{n.removeprefix("eng_")}"' not in driver] == []


def test_every_engine_call_the_native_store_makes_is_traced_or_only_reads():
    """What the control plane does to a native engine (p4target/native/store.py) reaches the sanitized driver only
    through the Trace: each library call behind the Engine methods the store uses is recorded, or hands out a
    view (whose register writes the Trace watches), takes the lock or drains events."""
    import inspect
    import re

    from p4target.native import store
    from p4target.native.engine import Engine

    methods = {m for m in re.findall(r"engine\.(\w+)", inspect.getsource(store)) if callable(getattr(Engine, m, None))}
    assert {"table_add", "table_modify", "member_set", "group_set", "mc_set"} <= methods
    calls = {c for m in methods for c in re.findall(r"lib\.(eng_\w+)", inspect.getsource(getattr(Engine, m)))}
    reads = {"eng_entry_counters", "eng_entry_last_hit", "eng_register", "eng_counter", "eng_lock", "eng_unlock",
             "eng_event"}
    assert calls - reads - set(Trace.RECORDED) == set()
