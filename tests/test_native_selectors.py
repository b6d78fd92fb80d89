"""Tables with an action profile or an action selector on the native engine, from every form of the program.

tests/data/native/profile.p4 (an action profile shared by two tables, misses told from hits) and
selector.p4 (a crc32 action selector, its action run feeding a switch) run natively with no fallback
to the Python engine: from our front end's IR, from its lowered form and from p4c's BMv2 JSON (each
printed by backends/c.py). The same members, groups and entries are written to every target, then changed
(members modified, groups re-formed, entries, members and groups deleted and created again, freed
handles reused), with packets between the steps; the native engine must send exactly the packets the
Python engine sends and simple_switch sends on the same p4c JSON, from the source and from that JSON.
That covers BMv2's corners: a miss (or an empty group) runs no action and no case of a `switch` on
the action run, and a selector leaves fields of invalid headers out of its hash (the TCP packets). The P4Runtime side (members and
groups written over gRPC, one-shot entries, rollback) runs on the native engine in
tests/test_runtime_profiles.py.
"""
from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

import bmv2_ref
import pytest
from scapy.layers.inet import IP, TCP, UDP
from scapy.layers.l2 import Ether

from p4target import state as st
from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.lowered.from_ir import lower_program
from p4target.native.engine import Trace
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.pipeline import Pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import fuzz_engine as fz  # noqa: E402

DATA = Path(__file__).parent / "data" / "native"
PROFILE, SELECTOR = "MyIngress.nhops", "MyIngress.ecmp_selector"



def lpm(net: int, length: int) -> dict[str, st.Match]:
    return {"hdr.ipv4.dstAddr": st.Lpm(net, length)}


def dst(address: int) -> dict[str, st.Match]:
    return {"hdr.ipv4.dstAddr": st.Exact(address)}


def ipv4(n: int) -> int:
    return int.from_bytes(bytes(map(int, f"10.0.0.{n}".split("."))), "big")


# Each program: steps of control-plane calls (state method name, arguments), each followed by the packets.
PROFILE_STEPS = [
    [("profile_member_insert", PROFILE, 1, "MyIngress.forward", {"dmac": 0xA1, "port": 1}),
     ("profile_member_insert", PROFILE, 2, "MyIngress.forward", {"dmac": 0xA2, "port": 2}),
     ("profile_member_insert", PROFILE, 3, "MyIngress.drop", {}),
     ("insert_entry", "MyIngress.routes", st.TableEntry(lpm(0x0A000000, 8), "", member_id=1)),
     ("insert_entry", "MyIngress.routes", st.TableEntry(lpm(0x0A010000, 16), "", member_id=2)),
     ("insert_entry", "MyIngress.routes", st.TableEntry(lpm(0x0B000000, 8), "", member_id=3)),
     ("insert_entry", "MyIngress.by_source", st.TableEntry({"hdr.ethernet.srcAddr": st.Exact(0xBB)}, "",
                                                            member_id=2))],
    [("profile_member_modify", PROFILE, 2, "MyIngress.forward", {"dmac": 0xB2, "port": 3}),  # both tables see it
     ("profile_member_modify", PROFILE, 1, "MyIngress.forward", {"dmac": 0xD1, "port": 5}),  # (simple_switch_CLI
     # fails modifying a member to an action without parameters)
     ("delete_entry", "MyIngress.routes", st.TableEntry(lpm(0x0B000000, 8), "")),
     ("profile_member_delete", PROFILE, 3),
     ("profile_member_insert", PROFILE, 4, "MyIngress.forward", {"dmac": 0xC4, "port": 4}),  # takes 3's handle
     ("insert_entry", "MyIngress.routes", st.TableEntry(lpm(0x0B000000, 8), "", member_id=4))],
]


def nhop(member_id: int, mark: int, port: int) -> tuple:
    return ("profile_member_insert", SELECTOR, member_id, "MyIngress.set_nhop", {"dmac": mark, "port": port})


SELECTOR_STEPS = [
    [nhop(10, 0xA0, 1), nhop(11, 0xA1, 2), nhop(12, 0xA2, 3), nhop(13, 0xA3, 4), nhop(14, 0xA4, 5),
     ("profile_member_insert", SELECTOR, 15, "MyIngress.drop", {}),
     ("profile_group_insert", SELECTOR, 1, {13: 1, 10: 1, 12: 1, 11: 1}),
     ("profile_group_insert", SELECTOR, 2, {12: 1, 15: 1}),
     ("insert_entry", "MyIngress.ecmp", st.TableEntry(dst(ipv4(1)), "", group_id=1)),
     ("insert_entry", "MyIngress.ecmp", st.TableEntry(dst(ipv4(2)), "", group_id=2)),
     ("insert_entry", "MyIngress.ecmp", st.TableEntry(dst(ipv4(3)), "", member_id=14))],
    [("profile_group_modify", SELECTOR, 1, {10: 1, 13: 1, 14: 1}),  # a member out, one in: the hash re-spreads
     ("profile_member_modify", SELECTOR, 13, "MyIngress.set_nhop", {"dmac": 0xEE, "port": 6}),
     ("profile_group_modify", SELECTOR, 2, {11: 1})],
    [("delete_entry", "MyIngress.ecmp", st.TableEntry(dst(ipv4(2)), "")),
     ("profile_group_delete", SELECTOR, 2),
     ("profile_member_delete", SELECTOR, 15),
     nhop(16, 0xA6, 7),  # takes 15's handle, so it sorts first in its groups
     ("profile_group_insert", SELECTOR, 3, {12: 1, 16: 1, 11: 1}),  # takes group 2's handle
     ("insert_entry", "MyIngress.ecmp", st.TableEntry(dst(ipv4(2)), "", group_id=3))],
]


def frame(host: int, i: int, proto: str = "udp") -> bytes:
    """Flow i to 10.0.0.host; a TCP one leaves the selector's UDP keys in an invalid header."""
    l4 = UDP(sport=1000 + 37 * i, dport=2000 + i) if proto == "udp" else TCP(sport=1000 + i, dport=80)
    return bytes(Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:bb") / IP(src=f"192.168.{i % 3}.{i}", dst=f"10.0.0.{host}") / l4)


PACKETS = {
    "profile": [(1, bytes(Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:bb") / IP(dst=dst_ip) / UDP()))
                for dst_ip in ("10.1.2.3", "10.2.3.4", "11.0.0.1", "12.0.0.1")]
               + [(2, bytes(Ether(src=src, type=0x86DD) / b"payload")) for src in ("00:00:00:00:00:bb", "00:00:00:00:00:cc")],
    "selector": [(1, frame(host, i)) for host in (1, 2, 3, 4) for i in range(16)]
                + [(1, frame(host, i, "tcp")) for host in (1, 2) for i in range(4)],
}
STEPS = {"profile": PROFILE_STEPS, "selector": SELECTOR_STEPS}


def run_steps(target, name: str) -> list[dict[int, list[bytes]]]:
    """Each step's writes on `target` (a pipeline or a Bmv2Switch), then the packets: what left, per port."""
    seen = []
    for step in STEPS[name]:
        for method, *args in step:
            getattr(target.state, method)(*args)
        seen.append(bmv2_ref.observe(target, PACKETS[name]).outputs)
    return seen


def native(program, caplog) -> NativePipeline:
    """The program on the native engine, asserting it did not fall back to the Python engine."""
    with caplog.at_level(logging.WARNING, logger="aggnet.native"):
        pipeline = make_pipeline(program, "native")
    assert isinstance(pipeline, NativePipeline), [r.getMessage() for r in caplog.records]
    assert [r for r in caplog.records if r.name == "aggnet.native"] == []
    return pipeline


@pytest.mark.parametrize("name", ["profile", "selector"])
def test_native_runs_profiles_and_selectors_as_the_python_engine(name, caplog):
    program = load_program(str(DATA / f"{name}.p4"))
    from_ir = native(program, caplog)
    lowered = native(lower_program(program), caplog)
    try:
        expected = run_steps(Pipeline(program), name)
        assert run_steps(from_ir, name) == expected
        assert run_steps(lowered, name) == expected
    finally:
        from_ir.close()
        lowered.close()
    marks = [data[5] for ports in expected for out in ports.values() for data in out]
    if name == "selector":  # the hash spreads group 1 over all its members; changed and new members run
        assert {0xA0, 0xA1, 0xA2, 0xA3, 0xA4, 0xEE, 0xA6} <= set(marks)
    else:
        assert {0xA1, 0xA2, 0xB2, 0xC4, 0xD1} <= set(marks)


@pytest.fixture(scope="module")
def p4c(p4c_compiler):
    missing = bmv2_ref.missing()
    if missing:
        pytest.skip(missing)
    return p4c_compiler


@pytest.mark.bmv2
@pytest.mark.parametrize("name", ["profile", "selector"])
def test_native_sends_what_simple_switch_sends_on_the_same_p4c_json(name, p4c, caplog):
    json_path = p4c.json(str(DATA / f"{name}.p4"))
    program = bmv2_json.loads(Path(json_path).read_bytes(), json_path)
    source = load_program(str(DATA / f"{name}.p4"))
    from_json, from_source = native(program, caplog), native(source, caplog)
    try:
        with bmv2_ref.Bmv2Switch(json_path, Pipeline(program).state.schema) as bmv2:
            expected = run_steps(bmv2, name)
        for target in (from_json, from_source, Pipeline(program), Pipeline(source)):
            assert run_steps(target, name) == expected, target
    finally:
        from_json.close()
        from_source.close()


@pytest.mark.parametrize("name", ["profile", "selector"])
def test_sanitized_engine_replays_member_and_group_writes_and_fuzzes_clean(name):
    trace = Trace()
    pipeline = NativePipeline(load_program(str(DATA / f"{name}.p4")), trace=trace)
    try:
        run_steps(pipeline, name)
        source, text = pipeline.source, trace.text()
    finally:
        pipeline.close()
    assert "group_set" in text or name == "profile"
    result = fz.run(name, source, text, 20_000, 1)
    assert result.ok, result.line
    replayed = re.match(r"replayed (\d+) packets \((\d+) with outputs differing from the trace\)", result.line)
    assert replayed and int(replayed[1]) == len(STEPS[name]) * len(PACKETS[name]) and replayed[2] == "0", result.line
