"""The installer against a real simple_switch_grpc (aggnet.p4 compiled by p4c, pushed over P4Runtime; no
interfaces, so no root): BMv2's read answers decode to the same typed entities the controller wants, so a
second install writes nothing, a changed entry is modified in place and a removed job's entries are deleted."""
from __future__ import annotations

import shutil
import socket
import subprocess

import pytest
from finsy import P4MulticastGroupEntry, P4TableAction, P4TableEntry, P4TableMatch
from procs import wait_until

from controller.installer import AGG_JOB, IPV4_LPM, Installer, connect_all, load_program
from controller.placement import Job, place_jobs
from controller.topology import load_topology, parse_topology
from testbed.nodes import port_open

pytestmark = [pytest.mark.bmv2,
              pytest.mark.skipif(any(shutil.which(p) is None for p in ("simple_switch_grpc", "simple_switch_CLI", "p4c")),
                                 reason="needs p4c, simple_switch_grpc and simple_switch_CLI on PATH "
                                        "(source /opt/p4ref/env.sh)")]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def star4_on_bmv2(tmp_path):
    """star4's one switch as a real simple_switch_grpc with no ports; (topology, its primary connection)."""
    grpc_port, side_port = _free_port(), _free_port()
    log = open(tmp_path / "s1.log", "w")
    proc = subprocess.Popen(["simple_switch_grpc", "--device-id", "1", "--thrift-port", str(side_port), "--log-console",
                             "--log-level", "warn", "--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
                            stdout=log, stderr=log)
    conns = {}
    try:
        wait_until(lambda: port_open(grpc_port) and port_open(side_port), proc, (tmp_path / "s1.log").read_text)
        base = load_topology("topologies/star4.yaml")
        topo = parse_topology({"name": base.name,
                               "hosts": [{"name": h.name, "ip": h.ip, "mac": h.mac} for h in base.hosts.values()],
                               "switches": [{"name": "s1", "device_id": 1, "grpc_port": grpc_port}],
                               "links": [{"a": link.a, "b": link.b} for link in base.links]}, base.source)
        conns = connect_all(topo, side_channel_ports={"s1": side_port}, target="bmv2")
        yield topo, conns
    finally:
        for conn in conns.values():
            conn.close()
        proc.terminate()
        proc.wait(10)
        log.close()


def test_installer_on_bmv2_writes_only_differences(star4_on_bmv2, tmp_path):
    topo, conns = star4_on_bmv2
    program = load_program("p4src/aggnet.p4", "bmv2", str(tmp_path / "build"))
    installer = Installer(topo, program, conns)
    jobs = place_jobs(topo, [Job("a", ("h1", "h2", "h3"), k=0, slots=1)])
    first = installer.install(jobs)[1]["s1"]
    # routes, agg_job, 3 children, 3 host ports, the group, an ecn_mark entry per port
    assert (first.pipeline, first.inserted, first.registers_zeroed) == (True, 4 + 1 + 3 + 3 + 1 + 4, 0)
    assert installer.install(jobs)[1]["s1"].writes == 0

    conn = conns["s1"]
    conn.write([conn.modify(P4TableEntry(IPV4_LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": ("10.0.0.1", 32)}),
                                         action=P4TableAction("AggIngress.ipv4_forward", dstAddr=9, port=4)))])
    repaired = installer.install(jobs)[1]["s1"]
    assert (repaired.modified, repaired.inserted, repaired.deleted) == (1, 0, 0)
    (route,) = [e for e in conn.read([P4TableEntry(IPV4_LPM)]) if e.match["hdr.ipv4.dstAddr"] == (0x0A000001, 32)]
    assert route.action == P4TableAction("AggIngress.ipv4_forward", dstAddr=1, port=topo.port_of("s1", "h1"))

    removed = installer.remove_job("a")["s1"]
    assert removed.deleted == 1 + 3 + 3 + 1  # agg_job, 3 children, 3 host ports, the group
    assert conn.read([P4TableEntry(AGG_JOB)]) == [] and conn.read([P4MulticastGroupEntry()]) == []
    assert len(conn.read([P4TableEntry(IPV4_LPM)])) == 4
