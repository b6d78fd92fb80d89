"""The native engine against the Python engine: same program, same control-plane writes, same
packets (valid, mutated, truncated, random bytes) -> byte-identical packets out, per port and in
order, and identical register and counter contents afterwards.

Covers p4src/aggnet*.p4 (every lane count) and the STF programs of tests/data/stf.
"""
import glob
import os
import random
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "data", "aggnet"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
import fabric as fb  # noqa: E402
from fuzz_control_plane import mutate  # noqa: E402

from p4target import state as st  # noqa: E402
from p4target.frontend import load_program  # noqa: E402
from p4target.native.pipeline import NativePipeline, make_pipeline  # noqa: E402
from p4target.pipeline import Pipeline  # noqa: E402
from p4target.stf import StfRunner, parse_stf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STF = os.path.join(ROOT, "tests", "data", "stf")
LANES = sorted(32 if os.path.basename(p) == "aggnet.p4" else int(os.path.basename(p)[8:-3])
               for p in glob.glob(os.path.join(ROOT, "p4src", "aggnet*.p4")) if "lanes" not in p)
STF_PROGRAMS = ["lpm_forward", "ternary_priority", "registers_counters", "multicast_clone", "recirculate",
                "parser_reject", "arithmetic"]
INT_MAX = 2**31 - 1



def registers_and_counters(state: st.State) -> dict:
    out = {}
    for name, reg in state.registers.items():
        out[name] = [int(v) for v in reg.values]
    for name, c in state.counters.items():
        out[name] = ([int(v) for v in c.packets], [int(v) for v in c.bytes])
    return out


def assert_same(py: Pipeline, nat: NativePipeline, packets: list[tuple[int, bytes]]) -> None:
    for i, (port, data) in enumerate(packets):
        assert nat.process(port, data) == py.process(port, data), f"packet {i} on port {port}: {data.hex()}"
    assert registers_and_counters(nat.state) == registers_and_counters(py.state)


def aggnet_setup(sw, lanes: int) -> None:
    """Job 1 aggregates at this root (children on ports 1-3), job 2 only forwards (parent port 4),
    job 3 aggregates below a parent on port 4; routes and host addresses for every port."""
    fb.install_job(sw, 1, 0, 8, [fb.Child(p, p - 1) for p in (1, 2, 3)])
    fb.install_job(sw, 2, 8, 4, [fb.Child(1, 0), fb.Child(2, 1)], is_root=False, parent_port=4, aggregate=False)
    fb.install_job(sw, 3, 12, 4, [fb.Child(2, 0), fb.Child(3, 1, src_ip=fb.host_ip(3))], is_root=False,
                   parent_port=4)
    for p in range(1, 5):
        fb.install_host(sw, p, fb.host_mac(p), fb.host_ip(p))
        sw.state.insert_entry("AggIngress.ipv4_lpm", st.TableEntry(
            {"hdr.ipv4.dstAddr": st.Lpm(0x0A000000 | p, 32)}, "AggIngress.ipv4_forward",
            {"dstAddr": 0x020000000000 | p, "port": p}))


def aggnet_packets(rng: random.Random, lanes: int, n: int) -> list[tuple[int, bytes]]:
    out = []
    for _ in range(n):
        choice = rng.random()
        if choice < 0.1:
            out.append((rng.randrange(1, 6), bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))))
            continue
        values = [rng.choice([rng.randrange(-2**20, 2**20), INT_MAX - rng.randrange(3), -INT_MAX - rng.randrange(2)])
                  for _ in range(lanes)]
        frame = fb.packet(rng.choice([1, 1, 1, 2, 3, 7]), rng.randrange(10), rng.randrange(2**32), values,
                          pool=rng.randrange(2), retx=rng.random() < 0.2, src=rng.randrange(1, 5), lanes=lanes,
                          workers=rng.randrange(1, 4), flags=rng.choice([0, 0, 0x40, 0x10]))
        if choice < 0.3:
            frame = mutate(rng, frame)
        out.append((rng.randrange(1, 6), frame))
    return out


@pytest.mark.parametrize("lanes", LANES)
def test_aggnet_engines_agree(lanes):
    py, nat = fb.switch(lanes, "python"), fb.switch(lanes, "native")
    assert isinstance(nat, NativePipeline)
    for sw in (py, nat):
        aggnet_setup(sw, lanes)
    assert_same(py, nat, aggnet_packets(random.Random(lanes), lanes, 1500))
    assert nat.state.counter_read("AggIngress.agg_completed", 1)[0] > 0  # the stream really aggregated


def stf_pipelines(name: str):
    program = load_program(os.path.join(STF, name + ".p4"))
    return Pipeline(program), make_pipeline(program, "native")


@pytest.mark.parametrize("name", STF_PROGRAMS)
def test_stf_programs_engines_agree(name):
    path = os.path.join(STF, name + ".stf")
    with open(path) as f:
        commands = parse_stf(f.read(), path)
    runs = []
    for pipeline in stf_pipelines(name):
        runner = StfRunner(pipeline, path)
        result = runner.run(commands)
        runs.append((runner, result))
    (rp, resp), (rn, resn) = runs
    assert isinstance(rn.pipeline, NativePipeline)
    assert resn.failures == resp.failures == []
    assert {p: [o.data for o in outs] for p, outs in rn.got.items()} == \
        {p: [o.data for o in outs] for p, outs in rp.got.items()}
    rng = random.Random(name)
    sent = [(int(c.rest.split()[0]), bytes.fromhex("".join(c.rest.split()[1:])))
            for c in commands if c.verb == "packet"]
    packets = [(port, mutate(rng, data)) for _ in range(300) for port, data in [rng.choice(sent)]]
    packets += [(rng.randrange(0, 8), bytes(rng.randrange(256) for _ in range(rng.randrange(64)))) for _ in range(100)]
    assert_same(rp.pipeline, rn.pipeline, packets)


def test_native_state_reads_and_writes_go_to_engine_memory():
    sw = fb.star(2, engine="native")
    sw.state.register_write("AggIngress.agg_bitmap", 5, 0xABCD)
    assert sw.state.register_read("AggIngress.agg_bitmap", 5) == 0xABCD
    outs = fb.send(sw, 1, fb.packet(1, 0, 0, [3], src=1))
    assert outs == [] and sw.state.register_read("AggIngress.agg_bitmap", 0) == 1
    assert sw.state.counter_read("AggIngress.port_rx", 1)[0] == 1
    with pytest.raises(st.InvalidArgument):
        sw.state.register_write("AggIngress.agg_bitmap", 5, 1 << 32)
    assert sw.state.register_read("AggIngress.agg_bitmap", 5) == 0xABCD
    sw.state.reset()
    assert sw.state.register_read("AggIngress.agg_bitmap", 0) == 0
    assert fb.send(sw, 1, fb.packet(1, 0, 0, [3], src=1)) == []  # job gone: no route either, dropped
    assert np.count_nonzero(sw.state.registers["AggIngress.agg_bitmap"].values) == 0


HELD_LOCAL = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<8> b; }
struct m_t { bit<8> t; }
struct hs_t { h_t h; }
parser P(packet_in p, out hs_t hs, inout m_t m, inout standard_metadata_t s) {
    state start { p.extract(hs.h); transition accept; } }
control V(inout hs_t hs, inout m_t m) { apply { } }
control I(inout hs_t hs, inout m_t m, inout standard_metadata_t s) {
    apply {
        m.t = hs.h.a + 1;
        m.t = m.t + m.t;
        log_msg("return; t={}", {m.t});
        hs.h.b = m.t;
        s.egress_spec = 1;
    } }
control E(inout hs_t hs, inout m_t m, inout standard_metadata_t s) { apply { } }
control C(inout hs_t hs, inout m_t m) { apply { } }
control D(packet_out p, in hs_t hs) { apply { p.emit(hs.h); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def test_a_metadata_local_and_a_log_message_come_out_as_on_python():
    """The C printer holds an action's metadata locals in C locals; a string in the action stays as written."""
    from p4target.frontend import load_source

    program = load_source(HELD_LOCAL, "held_local.p4")
    native, python = NativePipeline(program), Pipeline(program)
    for engine in (native, python):
        assert engine.process(0, bytes([3, 0])) == [(1, bytes([3, 8]))]
    assert list(native.state.log) == list(python.state.log) == ["return; t=8"]
