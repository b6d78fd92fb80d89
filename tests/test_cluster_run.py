"""Issue 22, item 1: `aggnet run --servers` places a network over two servers (Mininet's cluster
edition), here on one machine. The second server is a network namespace `srv2` with its own
address on a veth to this machine (a private /30 that exists only on that pair), its own sshd
(a throwaway host key, a throwaway root key) and its own empty run root (a tmpfs mounted only
in sshd's mount namespace), so the run folder really is copied there and back. s2, h3 and h4
(the default placement: the second of two switches, with its hosts) and h2 (`--placement h2=srv2`)
run on srv2; the all-reduce's tree crosses the VXLAN tunnels s2-s1 and h2-s1 and must be exact;
1% loss on every link (switch queues, and the hosts' nftables hook, also on srv2's hosts) makes the
workers retransmit; a run that fails there (out of time) leaves nothing behind on either side.
Run it under `flock /tmp/aggnet-net.lock`.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import e2e
import pytest
from procs import wait_until

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and Mininet"),
              pytest.mark.skipif(shutil.which("sshd") is None and not os.path.exists("/usr/sbin/sshd"),
                                 reason="needs openssh-server (scripts/setup.sh)")]

NETNS = "aggnet-srv2"
HERE, THERE = "10.213.0.1", "10.213.0.2"  # the /30 on the veth between this machine and srv2
VETH_HERE, VETH_THERE = "aggsrv-a", "aggsrv-b"
TOPO = e2e.REPO / "tests" / "data" / "line2.yaml"


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def netns_pids() -> list[int]:
    return [int(p) for p in sh("ip", "netns", "pids", NETNS).split()]


def links(kind: str, netns: str | None = None) -> list[str]:
    """Names of the interfaces of type `kind` in the root namespace, or in `netns`."""
    out = sh("ip", *(["-n", netns] if netns else []), "-o", "link", "show", "type", kind)
    return [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]


@pytest.fixture
def srv2(tmp_path: Path) -> Iterator[tuple[Path, Path, int]]:
    """A second server: (the ssh_config that reaches it as root@srv2, the run root it does not share, sshd's pid)."""
    subprocess.run(["ip", "link", "del", VETH_HERE], capture_output=True)  # what a killed run of this test left
    subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)
    assert HERE not in sh("ip", "-o", "-4", "addr"), f"{HERE} is in use on this machine: srv2's /30 needs it"
    keys = tmp_path / "ssh"
    keys.mkdir()
    for name in ("host_key", "id_ed25519"):
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / name))
    (keys / "authorized_keys").write_text((keys / "id_ed25519.pub").read_text())
    (keys / "known_hosts").write_text(f"{THERE} {(keys / 'host_key.pub').read_text()}")
    (keys / "sshd_config").write_text(
        f"ListenAddress {THERE}\nHostKey {keys / 'host_key'}\nAuthorizedKeysFile {keys / 'authorized_keys'}\n"
        f"PidFile {keys / 'sshd.pid'}\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\nMaxStartups 100\n")
    config = keys / "ssh_config"
    config.write_text(f"Host srv2\n  HostName {THERE}\n  IdentityFile {keys / 'id_ed25519'}\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {keys / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
                      f"Host closed\n  HostName {THERE}\n  Port 2\n")  # srv2's address, where nothing listens
    runs = tmp_path / "runs"
    runs.mkdir()
    os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege separation directory
    sshd = None
    sh("ip", "netns", "add", NETNS)
    try:
        sh("ip", "link", "add", VETH_HERE, "type", "veth", "peer", "name", VETH_THERE, "netns", NETNS)
        sh("ip", "addr", "add", f"{HERE}/30", "dev", VETH_HERE)
        sh("ip", "link", "set", VETH_HERE, "up")
        sh("ip", "-n", NETNS, "addr", "add", f"{THERE}/30", "dev", VETH_THERE)
        sh("ip", "-n", NETNS, "link", "set", VETH_THERE, "up")
        sh("ip", "-n", NETNS, "link", "set", "lo", "up")
        # `ip netns exec` gives sshd its own mount namespace: the tmpfs hides this machine's run root there.
        sshd = subprocess.Popen(["ip", "netns", "exec", NETNS, "sh", "-c", f"mount -t tmpfs srv2-runs {runs} && "
                                 f"exec /usr/sbin/sshd -D -e -f {keys / 'sshd_config'}"],
                                stdout=subprocess.DEVNULL, stderr=open(keys / "sshd.log", "wb"))
        wait_until(lambda: subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", "root@srv2", "true"],
                                          capture_output=True).returncode == 0, sshd, (keys / "sshd.log").read_text)
        yield config, runs, sshd.pid  # `ip netns exec` and sh exec sshd: one pid
    finally:
        for pid in netns_pids():  # sshd, and anything a failed run left on srv2
            subprocess.run(["kill", "-9", str(pid)], capture_output=True)
        if sshd is not None:
            sshd.wait()
        subprocess.run(["ip", "link", "del", VETH_HERE], capture_output=True)  # now: a namespace goes later
        subprocess.run(["ip", "netns", "del", NETNS], capture_output=True)


def assert_nothing_left(runs: Path, sshd: int, shells_before: dict[int, str]) -> None:
    """No tunnels on either side; in srv2 only its sshd (its sessions end once their ssh clients here
    have: waited for), no Mininet shell the run started, nothing of the run here. (Shells there before
    the run belong to a network elsewhere, e.g. a soak isolated in a namespace of its own.)"""
    assert links("vxlan") == [] and links("vxlan", NETNS) == []
    wait_until(lambda: netns_pids() == [sshd])  # the sessions end after their clients here did
    shells = e2e.processes_mentioning("mininet:")
    assert {pid: cmd for pid, cmd in shells.items() if pid not in shells_before} == {}
    assert e2e.leftovers(runs) == []


def test_allreduce_across_two_servers_is_exact_and_leaves_nothing(srv2):
    config, runs, sshd = srv2
    shells = e2e.processes_mentioning("mininet:")
    done, results = e2e.aggnet_run(runs, "--topo", str(TOPO), "--servers", "localhost,srv2", "--placement", "h2=srv2",
                                   "--ssh-config", str(config), "--workload", "allreduce",
                                   "--elements", "20000", "--link-mbps", "100", "--loss", "1", timeout=300)
    assert done.returncode == 0, done.stderr
    assert results is not None and results["allreduce_exact"], results
    run = e2e.run_dir(runs)
    # s2 ran on srv2: it listened on srv2's address, and its log came back over ssh
    assert f"grpc {THERE}:" in (run / "logs" / "s2.log").read_text()
    assert "localhost: s1 h1; srv2: s2 h2 h3 h4" in done.stdout
    # h2 and h3 ran on srv2 and wrote their results there (srv2 does not see this run root): copied back
    for host in ("h2", "h3"):
        bench = json.loads((run / "logs" / f"{host}.bench.json").read_text())
        assert bench["exact"] and bench["retransmissions"] > 0  # the loss was there
    # the tree crosses the servers: s2 sums h3 and h4, s1 sums h1, h2 and s2's partial sum from the tunnel
    assert results["placement"]["aggregators"] == ["s1", "s2"]
    s1, s2 = (results["counters"][s]["jobs"]["1"] for s in ("s1", "s2"))
    assert s1["completed"] == s2["completed"] > 0
    assert s1["aggregated"] == 3 * s1["completed"] and s2["aggregated"] == 2 * s2["completed"]
    assert results["link_bytes"]["s2-s1"] > 0 and results["link_bytes"]["s1-h2"] > 0
    assert_nothing_left(runs, sshd, shells)


def test_a_run_that_fails_across_servers_leaves_nothing(srv2):
    config, runs, sshd = srv2
    shells = e2e.processes_mentioning("mininet:")
    # 800 kB per worker over 1 Mb/s links takes more than 6 s: the run is out of time while the workers run
    done, _ = e2e.aggnet_run(runs, "--topo", str(TOPO), "--servers", "localhost,srv2", "--ssh-config", str(config),
                             "--workload", "allreduce", "--elements", "200000", "--link-mbps", "1",
                             "--timeout", "2", timeout=300)
    assert done.returncode == 1 and "still running after 2 s" in done.stderr, done.stderr
    assert_nothing_left(runs, sshd, shells)


def test_a_server_that_cannot_be_reached_is_named(srv2, tmp_path):
    config, _, _ = srv2
    out = tmp_path / "out"
    out.mkdir()
    done, _ = e2e.aggnet_run(out, "--topo", str(TOPO), "--servers", "localhost,closed", "--ssh-config", str(config),
                             "--workload", "allreduce", "--elements", "100", timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"server closed ({THERE}): ssh root@closed failed" in done.stderr and "Traceback" not in done.stderr
    assert e2e.leftovers(out) == []
