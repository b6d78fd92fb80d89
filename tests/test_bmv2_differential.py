"""The embedded target sends exactly the packets BMv2 sends: the same program, table entries and
packets go through both (BMv2's simple_switch via tests/bmv2_ref.py), and the packets out must be
identical byte for byte, per port and in order; register and counter contents afterwards too.

- every STF test under tests/: its commands and packets on both, all outputs compared (not just
  the test's expectations), the register and counter values it reads, and every register and
  counter cell afterwards.
- p4src/aggnet.p4 at every lane count: one switch plays every role of the protocol at once (root
  of a star, an aggregating switch below a parent, a forwarder for workers that share a port, and
  two misconfigured jobs), fed seeded random and adversarial traffic (`Traffic`).

p4c runs in the background ahead of the tests (fixture `p4c`); the STF tests come first so the
big aggnet programs compile while they run.
"""
from __future__ import annotations

import ipaddress
import random
from dataclasses import dataclass, field
from pathlib import Path

import bmv2_ref
import corpus
import fabric
import numpy as np
import pytest

from hosts import codec
from p4target import load
from p4target import state as st
from p4target.frontend import load_program
from p4target.lowered import bmv2_json, to_json
from p4target.lowered.from_ir import lower_program
from p4target.pipeline import Pipeline
from p4target.stf import StfError, StfRunner, parse_stf
from protocol import wire

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.bmv2, pytest.mark.skipif(bool(bmv2_ref.missing()), reason=bmv2_ref.missing() or "-")]

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
AGG_IP, SWITCH_MAC = fabric.AGG_IP, fabric.SWITCH_MAC


@pytest.fixture(scope="module")
def p4c(request, p4c_compiler):
    """p4c for this module's tests (the session's), compiling the programs of the selected tests ahead, in test order."""
    p4c_compiler.prefetch(program_of(item) for item in request.session.items
                          if item.module is request.module and "p4c" in item.fixturenames)
    return p4c_compiler


def program_of(item) -> str:
    """The P4 program a test of this module runs."""
    params = item.callspec.params
    return params["program"] if "program" in params else str(REPO / "p4src" / wire.program_name(params["lanes"]))


def bmv2_twin(embedded: Pipeline, program: str, p4c: bmv2_ref.Compiler) -> bmv2_ref.Bmv2Switch:
    """simple_switch running `program`, the source of the embedded pipeline."""
    return bmv2_ref.Bmv2Switch(p4c.json(program), embedded.state.schema)


def bmv2_on_our_json(embedded: Pipeline, program: str, folder: Path) -> bmv2_ref.Bmv2Switch:
    """simple_switch running OUR lowering of `program` (`aggnet p4 compile --bmv2-json`)."""
    path = folder / (Path(program).stem + ".aggnet.json")
    path.write_text(to_json.dumps(lower_program(load_program(program))))
    return bmv2_ref.Bmv2Switch(str(path), embedded.state.schema)


# --------------------------------------------------------------------------- STF tests

def stf_cases() -> list:
    """(program, stf) for every STF test under tests/ with a program: NAME.stf and NAME_*.stf test NAME.p4.

    The malformed_*.stf files test the runner's error messages, not a program
    (tests/test_stf_programs.py runs them)."""
    cases = [(REPO / "p4src" / "aggnet.p4", stf) for stf in sorted((REPO / "tests" / "data" / "aggnet").glob("*.stf"))]
    for stf in sorted((REPO / "tests" / "data" / "stf").glob("*.stf")):
        programs = [p for p in stf.parent.glob("*.p4") if stf.stem.startswith(p.stem)]
        if programs:
            cases.append((max(programs, key=lambda p: len(p.stem)), stf))
    return [pytest.param(str(p), str(s), id=s.name, marks=_known(s.name)) for p, s in cases]


# Differences found, with why they are not (yet) fixed in the embedded target.
KNOWN_DIFFERENCES = {
    "parser_reject.stf": "a select with no matching case and no default: the P4 spec and the embedded target "
                         "reject with error.NoMatch; p4c 1.2.5's BMv2 back end lacks the HandleNoMatch pass "
                         "(p4lang/p4c#5746), so BMv2 accepts with NoError",
    "union_stack_index.stf": "p4c 1.2.5.16 dies with SIGSEGV (Compiler Bug) on a run-time index into a stack of "
                             "header unions in a control (u[i].a.setValid(), reading a union copied from t[i]); "
                             "the embedded target runs it on both engines (test_stf_programs.py)",
    "for_loops.stf": "p4c 1.2.5's BMv2 back end accepts for loops but writes no loop into its JSON: each body "
                     "runs once with the loop variable never set (loops in BMv2 actions came later, p4lang/p4c#5552); "
                     "the embedded target unrolls them as P4 1.2.4 defines",
}


def _known(name: str) -> list:
    reason = KNOWN_DIFFERENCES.get(name)
    return [pytest.mark.xfail(strict=True, reason=reason)] if reason else []


def run_stf(target, stf: str) -> tuple[bmv2_ref.Observation, list[str]]:
    """Every packet out per port and every register and counter cell afterwards, and the register
    and counter values the test read on the way. A command either target refuses ends the run."""
    runner = StfRunner(target, stf)
    try:
        log = runner.run(parse_stf(Path(stf).read_text(), stf)).log
    except StfError as exc:
        log = runner.result.log + [f"refused at line {exc.line}"]
    outputs = bmv2_ref.per_port((port, o.data) for port, outs in runner.got.items() for o in outs)
    return bmv2_ref.Observation(outputs, *bmv2_ref.read_cells(target, *bmv2_ref.all_cells(target.state.schema))), log


@pytest.mark.parametrize("program, stf", stf_cases())
def test_stf_matches_bmv2(program, stf, p4c, tmp_path):
    """simple_switch on p4c's JSON against: our front end's program; p4c's JSON on our Python and native
    engines; our lowering on both engines; and simple_switch on our lowering's JSON."""
    embedded = load.pipeline(load_program(program), "python")
    from_json = load.pipeline(bmv2_json.load_file(p4c.json(program)), "python")
    lowered = load.pipeline(lower_program(load_program(program)), "python")
    natives = [load.pipeline(bmv2_json.load_file(p4c.json(program)), "native"),
               load.pipeline(lower_program(load_program(program)), "native")]
    assert [n.engine_name for n in natives] == ["native", "native"]
    try:
        with bmv2_twin(embedded, program, p4c) as bmv2:
            theirs, their_log = run_stf(bmv2, stf)
        sides = [run_stf(embedded, stf), run_stf(from_json, stf), run_stf(lowered, stf), *(run_stf(n, stf) for n in natives)]
        if Path(stf).name not in KNOWN_DIFFERENCES:  # a known difference would only wait out BMv2's timeout here
            with bmv2_on_our_json(embedded, program, tmp_path) as bmv2_ours:
                sides.append(run_stf(bmv2_ours, stf))
        for ours, our_log in sides:
            assert bmv2_ref.first_difference(ours, theirs) == ""
            assert our_log == their_log
    finally:
        for n in natives:
            n.close()


# --------------------------------------------------------------------------- the corpus on our JSON

@pytest.mark.parametrize("name", corpus.params())
def test_corpus_program_passes_its_stf_on_simple_switch_from_our_json(name, tmp_path):
    """simple_switch runs our lowering's JSON of each corpus program (`aggnet p4 compile --bmv2-json`)
    and passes the program's STF test, as it does on p4c's JSON (tests/test_bmv2_json.py)."""
    program = str(corpus.CORPUS / f"{name}.p4")
    stf = corpus.CORPUS / f"{name}.stf"
    with bmv2_on_our_json(load.pipeline(lower_program(load_program(program)), "python"), program, tmp_path) as bmv2:
        result = StfRunner(bmv2, str(stf)).run(parse_stf(stf.read_text(), str(stf)))
    assert result.passed, result.report(name)


# --------------------------------------------------------------------------- aggnet.p4

UPLINK = 4  # the parent of jobs 2 and 3
FOREIGN = 9  # a host that belongs to no job
MISSING_GROUP = 50  # a multicast group deleted after job 5 was installed


@dataclass(frozen=True)
class Job:
    """One job on the switch: `fabric.install_job`'s arguments."""

    job_id: int
    slot_base: int
    slot_count: int
    children: list
    role: dict = field(default_factory=dict)  # is_root, parent_port, aggregate, mcast_grp
    shared: bool = False  # a root sharing its slots with other jobs (fabric.install_shared_job)


ROLES = (
    # root of a star of three workers on ports 1-3
    Job(1, 0, 4, [fabric.Child(1, 0), fabric.Child(2, 1), fabric.Child(3, 2)]),
    # aggregating, not the root: partials go up to UPLINK, results come down from it
    Job(2, 8, 4, [fabric.Child(5, 0), fabric.Child(6, 1)], {"is_root": False, "parent_port": UPLINK}),
    # forwarder for two workers behind port 7 (told apart by source address) and one on port 8
    Job(3, 16, 4, [fabric.Child(7, 0, "10.0.0.71"), fabric.Child(7, 1, "10.0.0.72"), fabric.Child(8, 2)],
        {"is_root": False, "parent_port": UPLINK, "aggregate": False}),
    # a region the controller got wrong: slots 2 and 3 index past the end of the registers
    Job(4, 1022, 4, [fabric.Child(1, 0), fabric.Child(2, 1)]),
    # a root whose multicast group is gone: completed results go nowhere
    Job(5, 1000, 2, [fabric.Child(1, 0), fabric.Child(3, 1)], {"mcast_grp": MISSING_GROUP}),
    # two roots sharing one pool of two slots, ATP's way: a chunk holds a slot, others spill
    Job(6, 40, 2, [fabric.Child(1, 0), fabric.Child(2, 1)], shared=True),
    Job(7, 40, 2, [fabric.Child(3, 0), fabric.Child(5, 1)], shared=True),
)
HOST_PORTS = {1: 1, 2: 2, 3: 3, 5: 5, 6: 6, 71: 7, 72: 7, 8: 8, 9: FOREIGN}  # host number -> port


def install_roles(sw) -> None:
    """The same control-plane calls on either target (`sw.state` is a State or a Bmv2State)."""
    for job in ROLES:
        if job.shared:
            fabric.install_shared_job(sw, job.job_id, job.slot_base, job.slot_count, job.children)
        else:
            fabric.install_job(sw, job.job_id, job.slot_base, job.slot_count, job.children, **job.role)
    sw.state.mc_group_delete(MISSING_GROUP)
    for host, port in HOST_PORTS.items():
        if host == min(h for h, p in HOST_PORTS.items() if p == port):  # agg_host: one host per port
            fabric.install_host(sw, port, fabric.host_mac(host), fabric.host_ip(host))
        sw.state.insert_entry("AggIngress.ipv4_lpm", _route(fabric.host_ip(host), 32, port))
    sw.state.insert_entry("AggIngress.ipv4_lpm", _route("10.0.0.0", 8, UPLINK))


def _route(ip: str, plen: int, port: int) -> st.TableEntry:
    return st.TableEntry({"hdr.ipv4.dstAddr": st.Lpm(int(ipaddress.IPv4Address(ip)), plen)},
                         "AggIngress.ipv4_forward", {"dstAddr": 0x020000000000 | port, "port": port})


class Traffic:
    """Seeded random and adversarial packets for a switch with `install_roles` (see `packets`)."""

    def __init__(self, lanes: int, seed: int):
        self.lanes = lanes
        self.rng = random.Random(seed)
        self.np = np.random.default_rng(seed)
        self.seq = {job.job_id: 0 for job in ROLES}
        self.sent: list[tuple[int, bytes]] = []  # (port, frame) of every agg packet, to replay

    def values(self, lanes: int | None = None) -> np.ndarray:
        lanes = self.lanes if lanes is None else lanes
        kind = self.rng.random()
        if kind < 0.3:  # near the int32 limits: sums saturate
            return self.np.choice([INT32_MAX, INT32_MAX - 1, INT32_MIN, INT32_MIN + 1, 1 << 30, -(1 << 30)],
                                  size=lanes).astype(np.int64)
        if kind < 0.6:
            return self.np.integers(-1000, 1000, size=lanes)
        return self.np.integers(INT32_MIN, INT32_MAX, size=lanes, endpoint=True)

    def agg(self, host: int, job: int, slot: int, seq: int, flags: int = 0, lanes_field: int | None = None,
            values: np.ndarray | None = None, workers: int = 1, reserved: int = 0, scale: int = 0,
            src: str | None = None, port: int | None = None) -> tuple[int, bytes]:
        """An aggregation packet from `host` (arriving on its port unless `port` says otherwise)."""
        values = self.values() if values is None else values
        header = wire.HEADER_STRUCT.pack(job, slot & 0xFFFF, seq & 0xFFFFFFFF, flags, reserved,
                                         len(values) if lanes_field is None else lanes_field, workers, scale)
        payload = header + np.asarray(values, dtype=">i4").tobytes()
        frame = codec.frame(payload, fabric.host_mac(host), SWITCH_MAC, src or fabric.host_ip(host), AGG_IP,
                            wire.AGG_PORT)
        return (HOST_PORTS[host] if port is None else port), frame

    def round(self, job: Job) -> list[tuple[int, bytes]]:
        """One chunk from every child of `job`, in random order, with losses, duplicates and retries."""
        g = self.seq[job.job_id]
        self.seq[job.job_id] += 1
        slot, pool = g % job.slot_count, (g // job.slot_count) % 2
        flags = wire.FLAG_POOL if pool else 0
        if job.shared:  # a hashed slot, spilled chunks' releases and their trips to the server
            slot = self.rng.randrange(job.slot_count)
            flags |= self.rng.choice([0, 0, 0, wire.FLAG_SPILL, wire.FLAG_PS])
        hosts = [(c.port if c.src_ip is None else int(c.src_ip.rsplit(".", 1)[1])) for c in job.children]
        out = []
        for host in self.rng.sample(hosts, len(hosts)):
            if self.rng.random() < 0.1:
                continue  # lost on the way
            extra = self.rng.choice([0, 0, 0, wire.FLAG_OVERFLOW, 0x0F])  # overflow, reserved flag bits
            pkt = self.agg(host, job.job_id, slot, g, flags | extra, workers=self.rng.choice([1, 1, 2, 0xFFFF]))
            if self.rng.random() < 0.05:
                pkt = (pkt[0], pkt[1] + self.np.bytes(self.rng.randrange(1, 9)))  # bytes after the lanes
            out.append(pkt)
            if self.rng.random() < 0.15:
                out.append(pkt)  # duplicate
        if self.rng.random() < 0.3 and hosts:  # a retransmission after the round
            out.append(self.agg(self.rng.choice(hosts), job.job_id, slot, g, flags | wire.FLAG_RETX))
        if job.role.get("parent_port") and self.rng.random() < 0.6:  # the result from the parent
            out.append(self.agg(1, job.job_id, slot, g, flags | wire.FLAG_RESULT,
                                workers=len(hosts), port=job.role["parent_port"]))
        return out

    def oddity(self) -> tuple[int, bytes]:
        """One packet off the happy path."""
        job = self.rng.choice(ROLES)
        host = self.rng.choice([h for h in HOST_PORTS if HOST_PORTS[h] != FOREIGN])
        g = self.seq[job.job_id]
        choice = self.rng.randrange(14)
        if choice == 0:  # stale pool / old chunk
            return self.agg(host, job.job_id, self.rng.randrange(job.slot_count), g - job.slot_count,
                            self.rng.choice([0, wire.FLAG_POOL]))
        if choice == 1:  # a lane count this program is not built for, with and without matching length
            lanes = self.rng.choice([self.lanes // 2, self.lanes + 1, 0, 364 if self.lanes != 364 else 32])
            return self.agg(host, job.job_id, 0, g, lanes_field=lanes,
                            values=self.values(self.rng.choice([lanes, self.lanes])))
        if choice == 2:  # unknown job: plain IPv4 traffic
            return self.agg(host, self.rng.choice([0, 99, 1023, 0xFFFF]), 0, g)
        if choice == 3:  # slot past the job's region
            return self.agg(host, job.job_id, self.rng.choice([job.slot_count, 0xFFFF]), g)
        if choice == 4:  # from a host of no job, or the right job from a wrong port
            return self.agg(9, job.job_id, 0, g, port=self.rng.choice([FOREIGN, UPLINK, 2, 7]))
        if choice == 5:  # a result from a port that is not the parent
            return self.agg(host, job.job_id, self.rng.randrange(job.slot_count), g, wire.FLAG_RESULT)
        if choice == 6:  # several children on one port: an unknown source there
            return self.agg(71, 3, 0, g, src="10.0.0.73")
        if choice == 7:  # replay of an earlier aggregation packet
            return self.rng.choice(self.sent) if self.sent else self.agg(host, job.job_id, 0, g)
        if choice == 8:  # truncated somewhere in the headers or lanes
            port, frame = self.agg(host, job.job_id, 0, g)
            return port, frame[:self.rng.randrange(1, len(frame))]
        if choice == 9:  # random bytes
            return self.rng.choice(list(HOST_PORTS.values())), self.np.bytes(self.rng.randrange(1, 120))
        if choice == 10:
            return self.other_ipv4(host)
        if choice == 11:  # ARP, IPv6, VLAN: not IPv4
            ethertype = self.rng.choice([0x0806, 0x86DD, 0x8100])
            src_mac = bytes.fromhex(fabric.host_mac(host).replace(":", ""))
            return HOST_PORTS[host], b"\xff" * 6 + src_mac + ethertype.to_bytes(2, "big") + self.np.bytes(46)
        if choice == 12:  # reserved header byte, odd scale, big worker count
            return self.agg(host, job.job_id, 0, g, reserved=self.rng.randrange(256),
                            scale=self.rng.randrange(-32768, 32768), workers=self.rng.randrange(65536))
        return self.agg(host, job.job_id, self.rng.randrange(job.slot_count), self.rng.randrange(1 << 32),
                        self.rng.randrange(256))  # any flags, any seq

    def other_ipv4(self, host: int) -> tuple[int, bytes]:
        """IPv4 that is not aggregation: UDP to any port, TCP, ICMP, a header with options; any TTL."""
        dst = self.rng.choice([fabric.host_ip(2), AGG_IP, "10.9.9.9", "192.168.1.1"])
        frame = bytearray(codec.frame(self.np.bytes(self.rng.randrange(0, 60)), fabric.host_mac(host), SWITCH_MAC,
                                      fabric.host_ip(host), dst, self.rng.randrange(65536), self.rng.randrange(65536),
                                      ttl=self.rng.choice([0, 1, 64, 255])))
        kind = self.rng.randrange(4)
        if kind == 1:
            frame[23] = 6  # TCP
        elif kind == 2:
            frame[23] = 1  # ICMP
        elif kind == 3:
            frame[14] = 0x46  # IPv4 with options (ihl 6): not parsed as UDP
        return HOST_PORTS[host], bytes(frame)

    def packets(self, count: int) -> list[tuple[int, bytes]]:
        """About `count` packets: rounds of every job interleaved with oddities."""
        out: list[tuple[int, bytes]] = []
        while len(out) < count:
            if self.rng.random() < 0.75:
                batch = self.round(self.rng.choice(ROLES))
                self.sent += batch
                out += batch
            else:
                out.append(self.oddity())
        return out[:count]


def aggnet_cells(lanes: int, schema: st.ProgramSchema) -> tuple[dict, dict]:
    """The register and counter cells the roles touch: (registers, counters) for bmv2_ref.observe."""
    slots = [s for job in ROLES for s in range(job.slot_base, job.slot_base + job.slot_count)]
    idx = [i for i in (2 * s + pool for s in slots for pool in (0, 1))
           if i < schema.registers["AggIngress.agg_bitmap"].size]
    registers = {f"AggIngress.agg_{name}": idx for name in ("bitmap", "count", "done", "overflow", "workers",
                                                             "owner", "seq")}
    registers["AggIngress.agg_values"] = [i * lanes + k for i in idx for k in range(lanes)]
    jobs = sorted({job.job_id for job in ROLES} | {0, 99, 1023})
    counters = {f"AggIngress.agg_{name}": jobs for name in ("received", "aggregated", "completed", "duplicates",
                                                            "retx_answered", "overflows", "spilled")}
    counters["AggIngress.port_rx"] = counters["AggEgress.port_tx"] = list(range(0, 11))
    return registers, counters


# Packets per lane count: BMv2 takes a few ms per packet at 364 lanes on this machine.
PACKETS = {32: 3000, 64: 2000, 128: 1200, 256: 800, 364: 600}


@pytest.mark.slow
@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_aggnet_matches_bmv2(lanes, p4c, tmp_path):
    packets = Traffic(lanes, seed=lanes).packets(PACKETS[lanes])
    embedded = fabric.switch(lanes)
    program = str(REPO / "p4src" / wire.program_name(lanes))
    from_json = load.pipeline(bmv2_json.load_file(p4c.json(program)), "python")  # p4c's lowering on our engine
    lowered = load.pipeline(lower_program(load_program(program)), "python")  # our lowering on the same engine
    native_from_json = load.pipeline(bmv2_json.load_file(p4c.json(program)), "native")  # ... printed as C
    native = load.pipeline(load_program(program), "native")  # our front end's program printed as C
    assert native_from_json.engine_name == native.engine_name == "native"
    registers, counters = aggnet_cells(lanes, embedded.state.schema)
    try:
        with bmv2_twin(embedded, program, p4c) as bmv2:
            for sw in (embedded, from_json, lowered, native_from_json, native, bmv2):
                install_roles(sw)
            ours = bmv2_ref.observe(embedded, packets, registers, counters)
            ours_from_json = bmv2_ref.observe(from_json, packets, registers, counters)
            ours_lowered = bmv2_ref.observe(lowered, packets, registers, counters)
            ours_native_from_json = bmv2_ref.observe(native_from_json, packets, registers, counters)
            ours_native = bmv2_ref.observe(native, packets, registers, counters)
            theirs = bmv2_ref.observe(bmv2, packets, registers, counters)
    finally:
        native_from_json.close()
        native.close()
    assert bmv2_ref.first_difference(ours, theirs) == ""
    assert bmv2_ref.first_difference(ours_from_json, theirs) == ""
    assert bmv2_ref.first_difference(ours_lowered, theirs) == ""
    assert bmv2_ref.first_difference(ours_native_from_json, theirs) == ""
    assert bmv2_ref.first_difference(ours_native, theirs) == ""
    if lanes in (wire.LANE_COUNTS[0], wire.LANE_COUNTS[-1]):  # BMv2 is slow: the smallest and largest suffice
        with bmv2_on_our_json(embedded, program, tmp_path) as bmv2_ours:
            install_roles(bmv2_ours)
            on_our_json = bmv2_ref.observe(bmv2_ours, packets, registers, counters)
        assert bmv2_ref.first_difference(on_our_json, theirs) == ""
    # and the traffic reached every outcome: rounds completed, retransmissions answered, sums saturated
    for name in ("completed", "retx_answered", "duplicates", "overflows", "spilled"):
        assert sum(packets for packets, _ in ours.counters[f"AggIngress.agg_{name}"]) > 0, name
    assert sum(map(len, ours.outputs.values())) > len(packets) // 4
