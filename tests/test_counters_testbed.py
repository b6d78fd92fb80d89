"""`aggnet counters` on a real Mininet network: star4 running aggnet.p4 on the embedded target,
routes installed by the controller (which stays connected as primary), pings between hosts;
the per-port counters the command prints grow by exactly what the hosts' interfaces sent and
received."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow]
REPO = Path(__file__).resolve().parent.parent
STAR4 = REPO / "topologies" / "star4.yaml"


def aggnet_counters(run_dir: str) -> dict[int, dict[str, object]]:
    """Run the command as a user would; port -> its printed row."""
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "counters", "s1", "--run", run_dir,
                           "--topo", str(STAR4)], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()]
    assert ["no", "aggregation", "job", "seen"] in rows
    return {int(r[1]): {"peer": r[2], "rx_packets": int(r[3]), "rx_bytes": int(r[4]),
                        "tx_packets": int(r[5]), "tx_bytes": int(r[6]), "ecn_marks": int(r[7])}
            for r in rows if len(r) == 8 and r[0] == "s1"}


def host_stats(host, intf: str) -> dict[str, int]:
    names = ("tx_packets", "tx_bytes", "rx_packets", "rx_bytes")
    out = host.cmd(" ".join(["cat"] + [f"/sys/class/net/{intf}/statistics/{n}" for n in names]))
    return dict(zip(names, (int(v) for v in out.split())))


def test_counters_of_a_running_network_match_the_pings(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for Mininet")
    from controller.installer import Installer, connect_all, load_program
    from controller.topology import load_topology
    from testbed.network import Testbed

    topo = load_topology(str(STAR4))
    program = str(REPO / "p4src" / "aggnet.p4")
    run_dir = str(tmp_path / "run")
    with Testbed(topo, "embedded", run_dir, program=program) as tb:
        conns = connect_all(topo)
        try:
            Installer(topo, load_program(program), conns).install([])
            hosts = {h: tb.host(h) for h in topo.hosts}
            before_switch = aggnet_counters(tb.run_dir)
            before = {h: host_stats(node, f"{h}-eth0") for h, node in hosts.items()}
            for src, dst, count in (("h1", "h2", 3), ("h3", "h1", 2), ("h4", "h2", 1)):
                out = hosts[src].cmd(f"ping -c {count} -i 0.2 -W 2 {topo.hosts[dst].ip}")
                assert f"{count} received" in out, out
            after = {h: host_stats(node, f"{h}-eth0") for h, node in hosts.items()}
            after_switch = aggnet_counters(tb.run_dir)
        finally:
            for conn in conns.values():
                conn.close()
    assert sorted(after_switch) == [1, 2, 3, 4]
    for h in topo.hosts:
        port = topo.port_of("s1", h)
        grew = {k: after_switch[port][k] - before_switch[port][k] for k in before[h]}
        assert after_switch[port]["peer"] == h
        assert grew["rx_packets"] == after[h]["tx_packets"] - before[h]["tx_packets"], h
        assert grew["rx_bytes"] == after[h]["tx_bytes"] - before[h]["tx_bytes"], h
        assert grew["tx_packets"] == after[h]["rx_packets"] - before[h]["rx_packets"], h
        assert grew["tx_bytes"] == after[h]["rx_bytes"] - before[h]["rx_bytes"], h
    # echo requests + replies: h1 sent 3 + 2, h2 3 + 1, h3 2, h4 1 (98-byte frames)
    sent = {h: after_switch[topo.port_of("s1", h)]["rx_packets"] - before_switch[topo.port_of("s1", h)]["rx_packets"]
            for h in topo.hosts}
    assert sent == {"h1": 5, "h2": 4, "h3": 2, "h4": 1}
    assert after_switch[1]["rx_bytes"] - before_switch[1]["rx_bytes"] == 5 * 98
    assert all(row["ecn_marks"] == 0 for row in after_switch.values())  # pings are no aggregation packets
