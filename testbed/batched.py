"""Mininet's network made and torn down in batches: the same nodes, links and interfaces, with
their `ip` commands grouped per network namespace instead of one shell round trip each.

Mininet configures a network one command at a time through the nodes' shells: `ip link add` per
link, `ifconfig` per interface (three to set a MAC), and `ip neigh` per pair of hosts for its static
ARP. A fat-tree k=8 (80 switches, 128 hosts, 384 links) took 62 s to build that way, 50 of them in
the 16,256 neighbour entries, and 9 s to delete its links one by one. Here, as Mininet's own
classes are extended (small overridden methods):

- `BatchLink` queues its veth pair (`link add ... type veth peer ... netns PID`) and `BatchIntf`
  queues `link set up` (and `addrgenmode none` on a switch's port: no IPv6 address, so no router
  solicitation or MLD report in the switches' counters, as with disable_ipv6, whose per-interface
  write took 9 ms) instead of running them; `BatchedMininet.build` makes every pair in one
  `ip -batch` in the root namespace (0.2 s for 384 pairs), each root-namespace end in the
  network's interface group (testbed.slots);
- `configHosts` gives every host its MAC, address, `lo` and interface up, the static ARP entries
  and its tuning (AggNetHost.tuning) in one command per host (`ip -batch FILE`), sent to all
  hosts' shells before any is waited for, so they run at once;
- `stop` asks every switch process to stop, deletes the network's interfaces with one
  `ip link del group G` (the kernel unregisters them as one batch: 25x faster than one by one),
  hangs up every host's shell, then waits for the switches and the shells.

The Intf objects carry the same names, MACs and addresses as Mininet's, so everything that reads
them (node.intfs, defaultIntf(), IP(), MAC()) sees the same network.
"""
from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable, Iterable
from itertools import groupby
from typing import Any

from mininet.link import Intf, Link
from mininet.net import Mininet

SHELL_BATCH = 32  # host shells given a command at once (each starts a process or two)


class BatchError(Exception):
    """A batch of `ip` commands failed (one line naming the namespace and what `ip` said)."""

    exit_code = 1


class IpBatch:
    """`ip` commands queued per network namespace: the root namespace's, and each namespaced node's."""

    def __init__(self, group: int, folder: str):
        self.group = group  # the kernel's interface group of the network's root-namespace interfaces
        self.folder = folder  # where the nodes' batch files go (the run's build/ folder)
        self.root: list[str] = []
        self.nodes: dict[Any, list[str]] = {}

    def add(self, node: Any, line: str) -> None:
        """Queue `line` for `node`'s namespace (the root namespace's for a node outside one)."""
        (self.nodes.setdefault(node, []) if node.inNamespace else self.root).append(line)

    def run_root(self) -> None:
        """Run and clear the root namespace's queue."""
        lines, self.root = self.root, []
        if lines:
            run_ip_batch(lines, "the root namespace")

    def node_file(self, node: Any, lines: Iterable[str]) -> str:
        """Write `node`'s queue and `lines` to a batch file (clearing its queue); its path."""
        path = os.path.join(self.folder, f"{node.name}.ip")
        with open(path, "w") as f:
            f.write("\n".join([*self.nodes.pop(node, []), *lines]) + "\n")
        return path


def run_ip_batch(lines: list[str], where: str) -> None:
    """`ip -batch -` over `lines` in this process's namespace; BatchError naming the first failure."""
    done = subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(lines) + "\n", text=True,
                          capture_output=True)
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if line.strip()), "no output")
        raise BatchError(f"setting up the network failed in {where}: {first}")


def on_shells(commands: dict[Any, str], check: Callable[[Any, str], None] | None = None) -> dict[Any, str]:
    """Run each node's command in its shell, SHELL_BATCH at a time, without waiting for one before
    sending the next; node -> output. `check(node, output)` raises for a failed one."""
    outputs: dict[Any, str] = {}
    nodes = list(commands)
    for start in range(0, len(nodes), SHELL_BATCH):
        batch = nodes[start:start + SHELL_BATCH]
        for node in batch:
            node.sendCmd(commands[node])
        for node in batch:
            outputs[node] = node.waitOutput()
    for node, output in outputs.items():
        if check is not None:
            check(node, output)
    return outputs


class BatchIntf(Intf):
    """Mininet's Intf, configured through its network's IpBatch instead of its node's shell (only
    `up`; addresses are the host's, set by BatchedMininet.configHosts)."""

    def config(self, mac: str | None = None, ip: str | None = None, ifconfig: Any = None, up: bool = True,
               batch: IpBatch | None = None, **_params: Any) -> dict:
        assert batch is not None and ip is None and ifconfig is None, "BatchLink passes its batch, no address"
        self.mac = mac
        if not self.node.inNamespace:  # a namespaced node's come up with its addresses; its IPv6 is off by sysctl
            batch.add(self.node, f"link set {self.name} addrgenmode none")  # no IPv6 address: no RS, DAD or MLD
            if up:
                batch.add(self.node, f"link set {self.name} up")
        return {}


class BatchLink(Link):
    """Mininet's veth Link, its pair queued in `batch` (BatchedMininet.build makes them all at once)."""

    def __init__(self, node1: Any, node2: Any, batch: IpBatch, **params: Any):
        self.batch = batch
        super().__init__(node1, node2, batch=batch, **params)  # its interfaces: BatchIntf (BatchedMininet)

    def makeIntfPair(self, intfname1: str, intfname2: str, addr1: str | None = None,  # noqa: N802 - Mininet's
                     addr2: str | None = None, node1: Any = None, node2: Any = None, deleteIntfs: bool = True) -> None:  # noqa: ARG002,N803
        """The pair, each end made in its node's namespace (as Mininet's `netns PID`), a root-namespace
        end in the network's interface group."""
        ends = sorted(((intfname1, addr1, node1), (intfname2, addr2, node2)), key=lambda end: end[2].inNamespace)

        def end(name: str, addr: str | None, node: Any) -> str:
            where = f" netns {node.pid}" if node.inNamespace else f" group {self.batch.group}"
            return f"name {name}" + (f" address {addr}" if addr else "") + where

        self.batch.root.append(f"link add {end(*ends[0])} type veth peer {end(*ends[1])}")

    def stop(self) -> None:
        """Nothing: BatchedMininet.stop deletes every interface of the network at once."""


class BatchedMininet(Mininet):
    """Mininet with its `ip` commands batched per namespace (see the module docstring)."""

    def __init__(self, batch: IpBatch, **params: Any):
        self.batch = batch
        super().__init__(link=BatchLink, intf=BatchIntf, **params)

    def addLink(self, node1: Any, node2: Any, port1: int | None = None, port2: int | None = None,  # noqa: N802
                cls: type | None = None, **params: Any) -> Any:
        return super().addLink(node1, node2, port1, port2, cls, batch=self.batch, **params)

    def build(self) -> None:
        """Every veth pair at once, then every host's configuration at once."""
        self.batch.run_root()
        self.configHosts()
        self.built = True

    def configHosts(self) -> None:  # noqa: N802 - Mininet's name
        """Each host's MAC, address, interfaces up, static ARP entries (all other hosts) and tuning,
        one command per host, all hosts at once."""
        neighbours = [(h.params.get("ip", "").split("/")[0], h.params.get("mac"), h) for h in self.hosts]
        commands = {}
        for host in self.hosts:
            intf = host.defaultIntf()
            lines = ["link set lo up"]
            if intf is not None:
                ip, mac = host.params.get("ip"), host.params.get("mac")
                if mac:
                    intf.mac = mac
                    lines.append(f"link set {intf.name} address {mac}")
                lines += [f"link set {i.name} up" for i in host.intfList()]
                if ip:
                    intf.ip, intf.prefixLen = ip.split("/")
                    lines.append(f"addr add {ip} dev {intf.name}")
                if self.autoStaticArp:
                    lines += [f"neigh replace {n_ip} lladdr {n_mac} dev {intf.name} nud permanent"
                              for n_ip, n_mac, other in neighbours if other is not host and n_ip and n_mac]
            commands[host] = f"{host.tuning()}; ip -batch {self.batch.node_file(host, lines)} && echo ok"
        on_shells(commands, _check_ok)

    def staticArp(self) -> None:  # noqa: N802 - Mininet's name
        """Done by configHosts, with everything else a host needs."""

    def stop(self) -> None:
        """Every switch asked to stop, every interface deleted at once, every host shell hung up; then
        wait for them (see the module docstring)."""
        by_class: list[tuple[Any, tuple]] = [(cls, tuple(group)) for cls, group in
                                             groupby(sorted(self.switches, key=lambda s: str(type(s))), type)]
        for _, switches in by_class:
            for switch in switches:
                switch.ask_to_stop()
        subprocess.run(["ip", "link", "del", "group", str(self.batch.group)], capture_output=True)
        for host in self.hosts:
            if host.shell is not None and host.shell.poll() is None:
                os.killpg(host.shell.pid, signal.SIGHUP)
        for cls, switches in by_class:
            cls.batchShutdown(switches, delete_interfaces=False)
        for node in self.switches + self.hosts:
            node.terminate()


def _check_ok(node: Any, output: str) -> None:
    lines = output.strip().splitlines()
    if not lines or lines[-1].strip() != "ok":
        raise BatchError(f"configuring {node.name} failed: {lines[-1] if lines else 'no output'}")
