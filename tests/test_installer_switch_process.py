"""The installer against real `aggnet switch` processes (no Mininet, no interfaces: gRPC and the
side channel only). Register access goes over the side channel here, the path BMv2 needs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from finsy import P4TableEntry
from procs import free_port, wait_for

from controller.installer import AGG_JOB, SLOT_REGISTERS, Installer, connect_all, load_program
from controller.monitor import snapshot
from controller.placement import Job, place_jobs
from controller.topology import load_topology, parse_topology
from p4target.sidechannel import send_command

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def switches(tmp_path):
    """tree2's three switches as processes; yields (topology with their ports, side channel ports)."""
    base = load_topology(str(REPO / "topologies" / "tree2.yaml"))
    grpc_ports, side_ports, procs = {}, {}, []
    try:
        for name, sw in base.switches.items():
            grpc_ports[name], side_ports[name] = free_port(), free_port()
            log = tmp_path / f"{name}.log"
            proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(sw.device_id),
                                     "--grpc-server-addr", f"127.0.0.1:{grpc_ports[name]}",
                                     "--thrift-port", str(side_ports[name]), "--log", str(log)], cwd=REPO)
            procs.append(proc)
            wait_for(grpc_ports[name], proc, log)
            wait_for(side_ports[name], proc, log)
        data = {"name": base.name, "hosts": [{"name": h} for h in base.hosts],
                "switches": [{"name": n, "device_id": s.device_id, "grpc_port": grpc_ports[n]}
                             for n, s in base.switches.items()],
                "links": [{"a": link.a, "b": link.b} for link in base.links]}
        yield parse_topology(data, base.source), side_ports
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)


def test_install_into_switch_processes_and_zero_registers_over_the_side_channel(switches):
    topo, side_ports = switches
    program = load_program(str(REPO / "p4src" / "aggnet.p4"))
    conns = connect_all(topo, side_channel_ports=side_ports)
    try:
        jobs = place_jobs(topo, [Job("a", ("h1", "h2", "h5", "h6"), root="s1", k=2, slots=2)])
        installer = Installer(topo, program, conns)
        specs, first = installer.install(jobs)
        assert all(r.pipeline for r in first.values())
        assert first["s2"].registers_zeroed == 0  # a pipeline just pushed: every register starts at zero
        assert {s: r.writes for s, r in installer.install(jobs)[1].items()} == {"s1": 0, "s2": 0, "s3": 0}
        assert send_command(side_ports["s1"], "register_read agg_count 0") == "0"
        counts = snapshot(topo, conns, [specs["a"].job_id])
        assert counts["s2"]["queues"] == {}  # these switches run without interfaces
        assert counts["s2"]["jobs"][1]["received"] == 0 and counts["s1"]["ports"][1]["rx_packets"] == 0

        send_command(side_ports["s2"], "register_write agg_bitmap 3 5")  # leftover state in the job's region
        assert conns["s2"].register_read("AggIngress.agg_bitmap", 3) == {3: 5}
        installer.remove_job("a")
        assert all(not conns[s].read([P4TableEntry(AGG_JOB)]) for s in topo.switches)
        specs, again = installer.install(jobs)
        # 2 slots x 2 pools, each a cell of every slot register and 32 lanes
        assert again["s2"].registers_zeroed == 2 * 2 * (len(SLOT_REGISTERS) + 32)
        assert conns["s2"].register_read("AggIngress.agg_bitmap", 3) == {3: 0}
        assert specs["a"].slot_base == 0
    finally:
        for conn in conns.values():
            conn.close()
