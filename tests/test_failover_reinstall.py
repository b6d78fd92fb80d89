"""Failover against real `aggnet switch` processes (gRPC only, no Mininet): a killed spine is
noticed within the stated time, and routes and the job's tree move to the other spine."""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from finsy import P4TableEntry
from procs import free_port, wait_for

from controller.failover import (
    Failover,
    FailoverError,
    FailureDetector,
    replan,
    surviving_topology,
)
from controller.installer import AGG_JOB, IPV4_LPM, connect_all, load_program
from controller.placement import Job
from controller.routing import compute_routes, trace
from controller.topology import load_topology, parse_topology

REPO = Path(__file__).resolve().parent.parent

LEAFSPINE = str(REPO / "topologies" / "leafspine.yaml")
WORKERS = ("h1", "h3", "h5", "h7")


def test_surviving_topology_and_replan_avoid_the_failure():
    topo = load_topology(LEAFSPINE)
    job = Job("j", WORKERS)
    assert replan(topo, job).tree.root == "s1"
    without_s1 = surviving_topology(topo, dead_switches=("s1",))
    assert "s1" not in without_s1.switches and all("s1" not in (link.a, link.b) for link in without_s1.links)
    assert replan(without_s1, job).tree.root == "s2"
    routes = compute_routes(without_s1)
    for a in WORKERS:
        for b in WORKERS:
            if a != b:
                assert "s1" not in trace(without_s1, routes, a, b)
    no_link = surviving_topology(topo, down_links=(("s3", "s1"),))
    tree = replan(no_link, job).tree
    assert ("s3", "s1") not in tree.parent.items() and tree.parent["s3"] is not None
    assert trace(no_link, compute_routes(no_link), "h1", "h3") == ["s3", "s2", "s4"]


def test_unrecoverable_failures_are_named():
    topo = load_topology(LEAFSPINE)
    with pytest.raises(FailoverError, match=r"network falls apart without s1, s2"):
        surviving_topology(topo, dead_switches=("s1", "s2"))
    with pytest.raises(FailoverError, match=r"^job j: worker\(s\) h1 cut off"):
        replan(surviving_topology(topo, dead_switches=("s3",)), Job("j", WORKERS))
    with pytest.raises(FailoverError, match="no switch named 's9'"):
        surviving_topology(topo, dead_switches=("s9",))


@pytest.fixture
def leafspine_switches(tmp_path):
    base = load_topology(LEAFSPINE)
    procs, ports = {}, {}
    try:
        for name, sw in base.switches.items():
            ports[name] = (free_port(), free_port())
            log = tmp_path / f"{name}.log"
            procs[name] = subprocess.Popen(
                [sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(sw.device_id), "--grpc-server-addr",
                 f"127.0.0.1:{ports[name][0]}", "--thrift-port", str(ports[name][1]), "--log", str(log)], cwd=REPO)
        for name in base.switches:
            wait_for(ports[name][0], procs[name], tmp_path / f"{name}.log")
            wait_for(ports[name][1], procs[name], tmp_path / f"{name}.log")
        data = {"name": base.name, "hosts": [{"name": h} for h in base.hosts],
                "switches": [{"name": n, "device_id": s.device_id, "grpc_port": ports[n][0]}
                             for n, s in base.switches.items()],
                "links": [{"a": link.a, "b": link.b} for link in base.links]}
        yield parse_topology(data, base.source), procs, {n: p[1] for n, p in ports.items()}
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_killed_spine_is_detected_and_the_job_moves(leafspine_switches):
    topo, procs, side_ports = leafspine_switches
    conns = connect_all(topo, side_channel_ports=side_ports)
    failover = Failover(topo, load_program(str(REPO / "p4src" / "aggnet.p4")), conns, Job("job1", WORKERS))
    try:
        spec = failover.install()
        assert failover.placement.tree.root == "s1"
        roots = [s for s, c in conns.items() if c.read([P4TableEntry(AGG_JOB)])]
        assert sorted(roots) == ["s1", "s3", "s4", "s5", "s6"]
        detector = FailureDetector(failover.topo, failover.connections, interval_s=0.1, link_state=lambda _: "up")
        assert detector.poll() is None
        procs["s1"].send_signal(signal.SIGKILL)
        failure = detector.detect(timeout_s=30)
        assert (failure.kind, failure.name) == ("switch", "s1") and failure.detected_after_s > 0
        new_spec = failover.recover(failure)
        assert failover.placement.tree.root == "s2" and new_spec.workers == spec.workers
        assert "s1" not in failover.connections
        # every leaf now sends toward s2 and routes nothing through s1's port
        for leaf in ("s3", "s4", "s5", "s6"):
            c = failover.connections[leaf]
            job = c.read([P4TableEntry(AGG_JOB)])
            s1_port, s2_port = topo.port_of(leaf, "s1"), topo.port_of(leaf, "s2")
            assert len(job) == 1 and job[0].action.args["parent_port"] == s2_port
            routes = c.read([P4TableEntry(IPV4_LPM)])
            out_ports = {e.action.args["port"] for e in routes}
            assert s1_port not in out_ports and s2_port in out_ports
        # a second detector over the survivors sees nothing wrong
        assert FailureDetector(failover.topo, failover.connections, link_state=lambda _: "up").poll() is None
    finally:
        for c in failover.connections.values():
            c.close()
