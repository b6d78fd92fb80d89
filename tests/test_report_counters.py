"""Counters collected from real in-process switches (aggnet.p4, P4Runtime servers on 127.0.0.1).

Traffic is carried hop by hop through the switches' pipelines while the test writes down
every frame on every link; the counters read back, the bytes per link and the table must
agree with that record.
"""
from collections import Counter

import numpy as np
import pytest
from finsy import P4CounterEntry
from rich.console import Console

from controller.installer import Installer, connect_all, load_program
from controller.p4rt import SwitchConnection
from controller.placement import Job, place_jobs
from controller.topology import load_topology, parse_topology
from hosts import codec
from p4target.runtime import RuntimeServer
from protocol import wire
from testbed import report

AGG_IP = "10.0.255.254"


class Fabric:
    """tree2 with one RuntimeServer per switch; `send` carries a frame and records each hop."""

    def __init__(self, path: str):
        topo = load_topology(path)
        self.servers = {n: RuntimeServer(device_id=s.device_id, address="127.0.0.1:0") for n, s in topo.switches.items()}
        ports = {n: srv.start() for n, srv in self.servers.items()}
        data = {"name": topo.name,
                "hosts": [{"name": h.name, "ip": h.ip, "mac": h.mac} for h in topo.hosts.values()],
                "switches": [{"name": s.name, "device_id": s.device_id, "grpc_port": ports[s.name]}
                             for s in topo.switches.values()],
                "links": [{"a": link.a, "b": link.b} for link in topo.links]}
        self.topo = parse_topology(data, topo.source)
        self.conns = connect_all(self.topo)
        self.rx = Counter()     # (switch, port, "packets"|"bytes") seen entering
        self.tx = Counter()     # ... leaving
        self.on_link = Counter()  # link name -> bytes, both directions

    def close(self) -> None:
        for conn in self.conns.values():
            conn.close()
        for srv in self.servers.values():
            srv.stop()

    def _hop(self, src: str, dst: str, data: bytes) -> None:
        self.on_link[report.link_name(self.topo, self.topo.link_between(src, dst))] += len(data)

    def send(self, host: str, frame: bytes) -> list[tuple[str, bytes]]:
        first = self.topo.switch_of(host)
        self._hop(host, first, frame)
        pending, delivered = [(first, self.topo.port_of(first, host), frame)], []
        while pending:
            switch, port, data = pending.pop(0)
            self.rx[switch, port, "packets"] += 1
            self.rx[switch, port, "bytes"] += len(data)
            for out_port, out in self.servers[switch].pipeline.process(port, data):
                self.tx[switch, out_port, "packets"] += 1
                self.tx[switch, out_port, "bytes"] += len(out)
                nxt = self.topo.neighbor_on(switch, out_port)
                self._hop(switch, nxt, out)
                if self.topo.is_host(nxt):
                    delivered.append((nxt, out))
                else:
                    pending.append((nxt, self.topo.port_of(nxt, switch), out))
        return delivered

    def expected_ports(self, switch: str) -> dict[int, dict[str, int]]:
        ports = sorted(link.port_on(switch) for link in self.topo.links_of(switch))
        return {p: {"rx_packets": self.rx[switch, p, "packets"], "rx_bytes": self.rx[switch, p, "bytes"],
                    "tx_packets": self.tx[switch, p, "packets"], "tx_bytes": self.tx[switch, p, "bytes"],
                    "ecn_marks": 0}  # packets go through one at a time: no queue ever builds
                for p in ports}


def contribution(topo, spec, host: str, values, seq: int = 0, flags: int = 0) -> bytes:
    payload = codec.encode(spec.job_id, 0, seq, flags, np.asarray([values], dtype=np.int32)).tobytes()
    h = topo.hosts[host]
    return codec.frame(payload, h.mac, "ff:ff:ff:ff:ff:ff", h.ip, spec.agg_ip, sport=spec.agg_port)


def udp(topo, src: str, dst: str, size: int) -> bytes:
    a, b = topo.hosts[src], topo.hosts[dst]
    return codec.frame(bytes(size), a.mac, b.mac, a.ip, b.ip, sport=40000, dport=40001)


@pytest.fixture(scope="module")
def traffic():
    """tree2, job 1 = h1, h2, h5, h6 aggregated on s2, s3 and s1; one all-reduce round, one
    retransmission after completion, and ordinary UDP across the root."""
    fabric = Fabric("topologies/tree2.yaml")
    topo = fabric.topo
    jobs = place_jobs(topo, [Job("a", ("h1", "h2", "h5", "h6"), root="s1", k=2, slots=4)])
    spec = Installer(topo, load_program("p4src/aggnet.p4"), fabric.conns, agg_ip=AGG_IP).install(jobs)[0]["a"]
    rng = np.random.default_rng(3)
    vectors = {w.name: rng.integers(-500, 500, spec.lanes) for w in spec.workers}
    results = {}
    for w in spec.workers:
        for host, out in fabric.send(w.name, contribution(topo, spec, w.name, vectors[w.name])):
            results.setdefault(host, []).append(out)
    retx = fabric.send("h2", contribution(topo, spec, "h2", vectors["h2"], flags=wire.FLAG_RETX))
    plain = [fabric.send("h1", udp(topo, "h1", "h7", n)) for n in (20, 300, 1000)]
    yield fabric, spec, vectors, results, retx, plain
    fabric.close()


def test_traffic_did_what_the_protocol_says(traffic):
    fabric, spec, vectors, results, retx, plain = traffic
    total = sum(vectors.values())
    assert sorted(results) == ["h1", "h2", "h5", "h6"]
    for frames in results.values():
        assert np.array_equal(codec.decode(codec.parse_frame(frames[0]).payload, spec.lanes)[0]["values"], total)
    assert [host for host, _ in retx] == ["h2"]  # answered from s2's stored result
    assert all([host for host, _ in p] == ["h7"] for p in plain)


def test_collect_counters_matches_the_traffic(traffic):
    fabric, spec, *_ = traffic
    counters = report.collect_counters(fabric.topo, fabric.conns)
    assert list(counters) == ["s1", "s2", "s3"]
    for switch in counters:
        assert counters[switch]["ports"] == fabric.expected_ports(switch)
    job = spec.job_id
    # s2: h1, h2, the result from s1, h2's retransmission (a duplicate answered with the result)
    assert counters["s2"]["jobs"] == {job: {"received": 4, "aggregated": 2, "completed": 1, "duplicates": 1,
                                            "retx_answered": 1, "overflows": 0, "spilled": 0}}
    assert counters["s3"]["jobs"] == {job: {"received": 3, "aggregated": 2, "completed": 1, "duplicates": 0,
                                            "retx_answered": 0, "overflows": 0, "spilled": 0}}
    assert counters["s1"]["jobs"][job]["completed"] == 1


def test_job_ids_given_are_reported_even_when_idle(traffic):
    fabric, spec, *_ = traffic
    counters = report.collect_counters(fabric.topo, {"s3": fabric.conns["s3"]}, job_ids=[spec.job_id, 7])
    assert list(counters) == ["s3"]
    assert counters["s3"]["jobs"][7] == dict.fromkeys(report.JOB_COUNTERS, 0)
    assert counters["s3"]["jobs"][spec.job_id]["aggregated"] == 2


def test_read_only_observer_sees_the_same_and_leaves_the_primary_alone(traffic):
    fabric, *_ = traffic
    primary_view = report.collect_counters(fabric.topo, fabric.conns)
    observers = {name: SwitchConnection(conn.address, conn.device_id, name=name, read_only=True)
                 for name, conn in fabric.conns.items()}
    try:
        assert report.collect_counters(fabric.topo, observers) == primary_view
    finally:
        for o in observers.values():
            o.close()
    conn = fabric.conns["s1"]  # still primary: a write goes through
    conn.write([conn.modify(P4CounterEntry(report.PORT_RX, index=200))])


def test_link_bytes_equal_the_bytes_that_crossed_each_link(traffic):
    fabric, *_ = traffic
    got = report.link_bytes(fabric.topo, report.collect_counters(fabric.topo, fabric.conns))
    assert got == {name: fabric.on_link[name] for name in got}
    assert set(got) == {report.link_name(fabric.topo, link) for link in fabric.topo.links}
    assert got["s2-s1"] > 0 and got["s3-s1"] > 0 and got["s2-h3"] == 0


def test_link_bytes_from_one_end_only(traffic):
    fabric, *_ = traffic
    only_s1 = report.collect_counters(fabric.topo, {"s1": fabric.conns["s1"]})
    got = report.link_bytes(fabric.topo, only_s1)
    assert set(got) == {"s2-s1", "s3-s1"}  # host links hang off s2/s3, which were not read
    assert got["s2-s1"] == fabric.on_link["s2-s1"]


def test_counters_table_lists_every_job_and_port(traffic):
    fabric, spec, *_ = traffic
    counters = report.collect_counters(fabric.topo, fabric.conns)
    console = Console(width=80, record=True)
    report.print_counters(counters, fabric.topo, console)
    rows = [line.split() for line in console.export_text().splitlines()]
    job_rows = [r for r in rows if len(r) == 9 and r[0] in counters and r[2].isdigit()]  # switch, job, 7 counts
    port_rows = [r for r in rows if len(r) == 8 and r[0] in counters and not r[2].isdigit()]  # switch, port, peer
    job = str(spec.job_id)
    assert job_rows == [[s, job, *map(str, counters[s]["jobs"][spec.job_id].values())] for s in ("s1", "s2", "s3")]
    assert len(port_rows) == sum(len(fabric.topo.links_of(s)) for s in fabric.topo.switches)
    for switch, port, peer, *values in port_rows:
        assert peer == fabric.topo.neighbor_on(switch, int(port))
        assert [int(v.replace(",", "")) for v in values] == list(counters[switch]["ports"][int(port)].values())
