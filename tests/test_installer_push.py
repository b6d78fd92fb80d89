"""The installer against real P4Runtime servers (one in-process embedded switch per topology
switch, real gRPC, aggnet.p4): install, read back, reinstall writes nothing, remove a job,
and aggregation packets pushed through the installed switches come back summed."""
import numpy as np
import pytest
from finsy import P4MulticastGroupEntry, P4TableAction, P4TableEntry, P4TableMatch

from controller.installer import (
    AGG_CHILD,
    AGG_HOST,
    AGG_JOB,
    IPV4_LPM,
    Installer,
    connect_all,
    load_program,
)
from controller.placement import Job, place_jobs
from controller.topology import load_topology, parse_topology
from hosts import codec
from p4target.runtime import RuntimeServer
from protocol import wire

AGG_IP = "10.0.255.254"


@pytest.fixture(scope="module")
def program():
    return load_program("p4src/aggnet.p4")


class Fabric:
    """One RuntimeServer per switch on free ports, and primary connections to all of them."""

    def __init__(self, path: str):
        topo = load_topology(path)
        self.servers = {name: RuntimeServer(device_id=sw.device_id, address="127.0.0.1:0")
                        for name, sw in topo.switches.items()}
        ports = {name: srv.start() for name, srv in self.servers.items()}
        self.topo = _with_grpc_ports(topo, ports)
        self.conns = connect_all(self.topo)

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        for srv in self.servers.values():
            srv.stop()

    def entries(self, switch: str, table: str) -> list:
        return self.conns[switch].read([P4TableEntry(table)])

    def send(self, host: str, frame: bytes) -> list[tuple[str, bytes]]:
        """Carry a frame from `host` through the switches' pipelines; (host, frame) for every delivery."""
        pending = [(self.topo.switch_of(host), self.topo.port_of(self.topo.switch_of(host), host), frame)]
        delivered = []
        while pending:
            switch, port, data = pending.pop(0)
            for out_port, out in self.servers[switch].pipeline.process(port, data):
                nxt = self.topo.neighbor_on(switch, out_port)
                if self.topo.is_host(nxt):
                    delivered.append((nxt, out))
                else:
                    pending.append((nxt, self.topo.port_of(nxt, switch), out))
        return delivered


def _with_grpc_ports(topo, ports):
    """The same topology with each switch's gRPC port set to where its test server listens."""
    data = {"name": topo.name,
            "hosts": [{"name": h.name, "ip": h.ip, "mac": h.mac} for h in topo.hosts.values()],
            "switches": [{"name": s.name, "device_id": s.device_id, "grpc_port": ports[s.name], "slots": s.slots}
                         for s in topo.switches.values()],
            "links": [{"a": link.a, "b": link.b} for link in topo.links]}
    return parse_topology(data, topo.source)


@pytest.fixture
def tree2():
    fabric = Fabric("topologies/tree2.yaml")
    yield fabric
    fabric.close()


def contribution(topo, spec, host, values, slot=0, seq=0):
    payload = codec.encode(spec.job_id, slot, seq, 0, np.asarray([values], dtype=np.int32)).tobytes()
    h = topo.hosts[host]
    return codec.frame(payload, h.mac, "ff:ff:ff:ff:ff:ff", h.ip, spec.agg_ip, sport=spec.agg_port)


def allreduce_once(fabric, spec, slot=0, seq=0):
    """Every worker sends one chunk; returns worker -> the result frames it received, and the expected sum."""
    rng = np.random.default_rng(seq)
    vectors = {w.name: rng.integers(-1000, 1000, spec.lanes).astype(np.int32) for w in spec.workers}
    received = {w.name: [] for w in spec.workers}
    for w in spec.workers:
        for host, out in fabric.send(w.name, contribution(fabric.topo, spec, w.name, vectors[w.name], slot, seq)):
            received[host].append(codec.parse_frame(out))
    return received, sum(vectors.values())


def test_install_reads_back_reinstalls_nothing_and_removes_a_job(tree2, program):
    topo = tree2.topo
    jobs = place_jobs(topo, [Job("a", ("h1", "h2", "h5", "h6"), k=2, slots=8),
                             Job("b", ("h3", "h7"), k=0, slots=4)])
    installer = Installer(topo, program, tree2.conns, agg_ip=AGG_IP)
    specs, reports = installer.install(jobs)
    assert all(r.pipeline for r in reports.values())
    assert (specs["a"].job_id, specs["a"].slot_base, specs["b"].job_id) == (1, 0, 2)
    assert specs["b"].slot_base == 8  # b aggregates on its root, where a's region [0, 8) is taken
    assert len(tree2.entries("s1", IPV4_LPM)) == 8
    assert len(tree2.entries("s2", AGG_JOB)) == 2
    assert len(tree2.entries("s1", AGG_CHILD)) == 2 + 2
    assert len(tree2.entries("s2", AGG_HOST)) == 3  # h1, h2 (job a), h3 (job b)
    assert reports["s2"].registers_zeroed == 0  # a pipeline just pushed: every register starts at zero

    specs_again, again = installer.install(jobs)
    assert {s: r.writes for s, r in again.items()} == {"s1": 0, "s2": 0, "s3": 0}
    assert specs_again == specs

    fresh = Installer(topo, program, tree2.conns, agg_ip=AGG_IP)  # a restarted controller
    assert {s: r.writes for s, r in fresh.install(jobs)[1].items()} == {"s1": 0, "s2": 0, "s3": 0}

    removed = fresh.remove_job("a")
    assert removed["s2"].deleted == 1 + 2 + 2 + 1  # agg_job, 2 children, 2 host ports, 1 group
    for s in topo.switches:
        job_ids = [e.match["hdr.agg.job_id"] for e in tree2.entries(s, AGG_JOB)]
        assert 1 not in job_ids
    assert len(tree2.entries("s2", AGG_HOST)) == 1  # h3's port stays for job b
    assert len(tree2.entries("s1", IPV4_LPM)) == 8
    groups = [g.multicast_group_id for g in tree2.conns["s2"].read([P4MulticastGroupEntry()])]
    assert groups == [0x1000 + 2]
    assert {s: r.writes for s, r in fresh.install(jobs[1:])[1].items()} == {"s1": 0, "s2": 0, "s3": 0}


def test_stray_entries_are_deleted_and_changed_ones_modified(tree2, program):
    topo = tree2.topo
    installer = Installer(topo, program, tree2.conns)
    jobs = place_jobs(topo, [Job("a", ("h1", "h5"), k=0, slots=4)])
    installer.install(jobs)
    conn = tree2.conns["s1"]
    stray = P4TableEntry(IPV4_LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": ("192.168.0.0", 16)}),
                         action=P4TableAction("AggIngress.ipv4_forward", dstAddr=1, port=1))
    wrong = P4TableEntry(IPV4_LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": ("10.0.0.1", 32)}),
                         action=P4TableAction("AggIngress.ipv4_forward", dstAddr="00:00:00:00:00:01", port=2))
    conn.write([conn.insert(stray), conn.modify(wrong)])
    report = installer.install(jobs)[1]["s1"]
    assert (report.deleted, report.modified, report.inserted, report.pipeline) == (1, 1, 0, False)
    port_of_h1 = [e.action.args["port"] for e in tree2.entries("s1", IPV4_LPM)
                  if e.match["hdr.ipv4.dstAddr"] == (0x0A000001, 32)]
    assert port_of_h1 == [topo.port_of("s1", "s2")]


@pytest.mark.parametrize("k, workers", [(2, ("h1", "h2", "h3", "h5", "h6", "h7", "h8")),  # all aggregate
                                        (0, ("h1", "h2", "h5"))])  # leaves forward, root tells h1/h2 apart
def test_installed_tree_sums_a_chunk_for_every_worker(tree2, program, k, workers):
    topo = tree2.topo
    jobs = place_jobs(topo, [Job("a", workers, root="s1", k=k, slots=4)])
    specs, _ = Installer(topo, program, tree2.conns, agg_ip=AGG_IP).install(jobs)
    received, expected = allreduce_once(tree2, specs["a"], slot=1, seq=5)
    for w in specs["a"].workers:
        (result,) = received[w.name]
        arr = codec.decode(result.payload, 32)[0]
        assert (result.dst_ip, result.dst_mac, result.dport) == (w.ip, w.mac, 48864)
        assert arr["flags"] & wire.FLAG_RESULT and arr["seq"] == 5 and arr["workers"] == len(workers)
        assert np.array_equal(arr["values"], expected)


def test_fattree_promoted_tree_sums_correctly(program):
    fabric = Fabric("topologies/fattree4.yaml")
    try:
        workers = tuple(f"h{i}" for i in range(1, 9))
        jobs = place_jobs(fabric.topo, [Job("a", workers, k=3, slots=2)])
        installer = Installer(fabric.topo, program, fabric.conns, agg_ip=AGG_IP)
        specs, _ = installer.install(jobs)
        assert installer.plans["a"].promoted == ("s5",)
        received, expected = allreduce_once(fabric, specs["a"])
        for w in specs["a"].workers:
            (result,) = received[w.name]
            assert np.array_equal(codec.decode(result.payload, 32)[0]["values"], expected)
        assert {s: r.writes for s, r in installer.install(jobs)[1].items()} == {s: 0 for s in fabric.topo.switches}
        on_tree = sorted((s for s in fabric.topo.switches if fabric.entries(s, AGG_JOB)), key=lambda s: int(s[1:]))
        assert on_tree == ["s1", "s5", "s7", "s13", "s14", "s15", "s16"]
    finally:
        fabric.close()


def test_monitor_reads_what_one_allreduce_counted(tree2, program):
    from controller.monitor import snapshot

    topo = tree2.topo
    jobs = place_jobs(topo, [Job("a", ("h1", "h2", "h5", "h6"), root="s1", k=2, slots=4)])
    specs, _ = Installer(topo, program, tree2.conns, agg_ip=AGG_IP).install(jobs)
    allreduce_once(tree2, specs["a"])
    counts = snapshot(topo, tree2.conns, [1])
    assert counts["s1"]["jobs"][1] == {"received": 2, "aggregated": 2, "completed": 1, "duplicates": 0,
                                       "retx_answered": 0, "overflows": 0, "spilled": 0}
    # s2: two contributions from h1, h2 and the result coming back down from s1
    assert counts["s2"]["jobs"][1] == {"received": 3, "aggregated": 2, "completed": 1, "duplicates": 0,
                                       "retx_answered": 0, "overflows": 0, "spilled": 0}
    up = topo.port_of("s2", "s1")
    frame_len = len(contribution(topo, specs["a"], "h1", [0] * 32))
    assert counts["s2"]["ports"][up] == {"rx_packets": 1, "rx_bytes": frame_len, "tx_packets": 1,
                                         "tx_bytes": frame_len}
    assert counts["s2"]["ports"][1]["tx_packets"] == 1 and counts["s2"]["ports"][3]["tx_packets"] == 0
    assert "queues" not in counts["s1"]  # no side channel on in-process servers


def test_two_jobs_on_leafspine_use_both_spines_and_both_sum_correctly(program):
    fabric = Fabric("topologies/leafspine.yaml")
    try:
        jobs = place_jobs(fabric.topo, [Job("a", ("h1", "h3", "h5", "h7"), k=1, slots=4),
                                        Job("b", ("h2", "h4", "h6", "h8"), k=1, slots=4)])
        installer = Installer(fabric.topo, program, fabric.conns, agg_ip=AGG_IP)
        specs, _ = installer.install(jobs)
        assert (installer.plans["a"].tree.root, installer.plans["b"].tree.root) == ("s1", "s2")
        assert (specs["a"].job_id, specs["b"].job_id) == (1, 2)
        # three chunks per job, the two jobs taking turns on the shared leaves
        for seq in range(3):
            got_a, want_a = allreduce_once(fabric, specs["a"], slot=seq, seq=seq)
            got_b, want_b = allreduce_once(fabric, specs["b"], slot=seq, seq=100 + seq)
            for got, want, spec in ((got_a, want_a, specs["a"]), (got_b, want_b, specs["b"])):
                for w in spec.workers:
                    (result,) = got[w.name]
                    arr = codec.decode(result.payload, 32)[0]
                    assert arr["job_id"] == spec.job_id and arr["workers"] == 4
                    assert np.array_equal(arr["values"], want)
    finally:
        fabric.close()
