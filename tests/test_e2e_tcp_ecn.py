"""TCP incast on real Mininet, as the parameter server's link sees it: three hosts send to a fourth
through the embedded switch running aggnet.p4 with the controller's entries (a port marks from a
quarter of its 64-packet queue). The hosts' TCP (ECN and Reno, testbed.nodes) gets the switch's
CE marks and backs off: the receiver's port marks packets, the receiver's IP counts them as CE,
and the port's queue drops nothing, so no sender resends. Each sender's window is bounded (iperf3 -w,
which also sizes the receiver's buffer): together they keep more than the marking quarter (16 packets)
queued but never more than the queue's 64, however slowly this machine runs the switch (on a busy
machine, unbounded windows grew past the queue before the marks came back, and the port dropped). (How
much of the link the senders keep busy depends on how busy this machine is: a figure for a benchmark,
not a test.)"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
REPO = Path(__file__).resolve().parent.parent
STAR4 = REPO / "topologies" / "star4.yaml"
LINK_MBPS = 20
SECONDS = 4
SENDERS = ("h1", "h2", "h3")
WINDOW = "16K"  # a sender's socket buffers: at most about 11 full-sized packets in flight, 3 senders under 64


def nstat(host, name: str) -> int:
    """A counter of the host's namespace (nstat -a: absolute, not since the last call)."""
    out = host.cmd(f"nstat -az {name}").split()
    return int(out[out.index(name) + 1])


def wait_listening(host, ports) -> None:
    """Until `host` listens on every TCP port in `ports` (servers started in the background)."""
    while not all(re.search(rf":{p}\s", host.cmd("ss -ltnH")) for p in ports):
        time.sleep(0.05)


def test_tcp_incast_is_ce_marked_instead_of_tail_dropped(tmp_path):
    from controller.installer import Installer, connect_all, load_program
    from controller.monitor import queue_stats
    from controller.topology import load_topology
    from testbed import report
    from testbed.network import Testbed
    from testbed.run import shape_links

    topo = shape_links(load_topology(str(STAR4)), LINK_MBPS, None)
    program = str(REPO / "p4src" / "aggnet.p4")
    with Testbed(topo, "embedded", str(tmp_path / "run"), program=program) as tb:
        conns = connect_all(topo, side_channel_ports={"s1": tb.side_channel_port("s1")})
        try:
            Installer(topo, load_program(program), conns).install([])
            sink, port = tb.host("h4"), topo.port_of("s1", "h4")
            assert sink.cmd("sysctl -n net.ipv4.tcp_congestion_control net.ipv4.tcp_ecn").split() == ["reno", "1"]
            servers = {h: 5201 + i for i, h in enumerate(SENDERS)}
            for p in servers.values():  # -1: one test, then the server exits by itself
                sink.cmd(f"iperf3 -s -1 -p {p} >/dev/null 2>&1 &")
            wait_listening(sink, servers.values())  # else a client may connect first and be refused
            reports = {h: tmp_path / f"{h}.json" for h in SENDERS}
            for h in SENDERS:
                tb.host(h).cmd(f"iperf3 -c {topo.hosts['h4'].ip} -p {servers[h]} -t {SECONDS} -w {WINDOW} -J "
                               f"--connect-timeout 5000 > {reports[h]} 2>&1 &")
            for h in SENDERS:
                tb.host(h).cmd("wait")
            ce_received = nstat(sink, "IpExtInCEPkts")
            drops = queue_stats(conns["s1"])
            counters = report.collect_counters(topo, conns)
        finally:
            for conn in conns.values():
                conn.close()
    sent = {h: json.loads(reports[h].read_text())["end"]["sum_sent"] for h in SENDERS}
    assert all(s["bytes"] > 0 for s in sent.values())
    port_queue = drops.get(str(port), drops.get(port))
    assert port_queue["tail_drops"] == 0, port_queue
    assert {h: s["retransmits"] for h, s in sent.items()} == dict.fromkeys(SENDERS, 0)
    assert ce_received > 0
    assert counters["s1"]["ports"][port]["ecn_marks"] > 0
