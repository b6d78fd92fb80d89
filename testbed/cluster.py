"""One network over several servers: Mininet's cluster edition (mininet.examples.cluster) for AggNet.

    with ClusterTestbed(topology, ["localhost", "srv2"], {"s2": "srv2"}) as tb: ...

As in the cluster edition, a node on another server is this machine's node class with a
RemoteMixin: its shell, its processes and the commands for its server's root namespace run
through ssh, and a link between two servers is a tunnel (cluster.py's RemoteLink.makeTunnel).
The controller stays here and reaches each switch's P4Runtime server at its server's address;
a switch's side channel has no authentication and listens on its server's loopback only, so it
is forwarded here over ssh, to the same port on this machine's loopback. Where this differs from
cluster.py, and why:

- Tunnels are VXLAN (VxlanLink), in the kernel like cluster.py's GRE: this machine's kernel has
  no gretap (`ip link add ... type gretap` says "Unknown device type"), and cluster.py's SSH
  tunnels carry every frame through two user-space ssh processes. A tunnel has MTU 1500, so
  full-size frames cross (fragmented on a path with MTU 1500), UDP port VXLAN_PORT.
- AggNet runs as root and logs in to every server as root (no sudo). Every shell and process
  there has its own ssh connection: no shared master, so no sshd MaxSessions limit to raise
  and no master process left behind.
- Processes on another server run under testbed.tether: when their ssh session ends (the run
  is over, or this process died: every ssh client gets SIGTERM with its parent), they end too.
  A switch there logs to its output, which ssh brings back to logs/SWITCH.log as it runs.
- The run folder is copied to the same path on each server before a process starts there, and
  what the processes wrote there (results, pcaps) is copied back (`gather`): nothing is copied
  to a server that already sees the folder (one file system, e.g. NFS).
"""
from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from mininet.examples.cluster import RemoteLink, SwitchBinPlacer
from mininet.link import Link

from p4target.sidechannel import SideChannelError, send_command
from testbed.network import Testbed
from testbed.nodes import PR_SET_PDEATHSIG, AggNetHost, EmbeddedSwitch, SwitchProcess, SwitchStartError, log_tail

REPO = Path(__file__).resolve().parent.parent
TETHER = REPO / "testbed" / "tether.py"
VXLAN_PORT = 4789
TUNNEL_MTU = 1500
# What VXLAN adds around a frame between servers (inner Ethernet, VXLAN, UDP, outer IPv4): over a
# 1500-byte network between the servers, an IP packet of more than 1450 bytes cannot cross.
VXLAN_OVERHEAD = 14 + 8 + 8 + 20
UNDERLAY_MTU = 1500


def tunnel_lanes() -> int:
    """The most lanes a packet may carry to cross a tunnel between servers (--lanes' choices)."""
    from protocol import wire

    fits = [n for n in wire.LANE_COUNTS if 20 + 8 + wire.packet_bytes(n) + VXLAN_OVERHEAD <= UNDERLAY_MTU]
    return max(fits)
STOP_WAIT_S = 5.0
SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5")


class ClusterError(Exception):
    """A server cannot be used, or a placement is wrong (one line naming the server or node)."""

    exit_code = 2


@dataclass(frozen=True)
class Server:
    """One machine of the cluster: `name` as ssh reaches it, `address` its IPv4 address, `local`: this one."""

    name: str
    address: str
    local: bool
    ssh_config: str | None = None

    def ssh(self, *options: str) -> list[str]:
        """The ssh command line to this server as root, the remote command to follow."""
        config = ["-F", self.ssh_config] if self.ssh_config else []
        return ["ssh", *config, *SSH_OPTIONS, *options, f"root@{self.name}"]

    def command(self, argv: list[str], tty: bool, cwd: str | None = None) -> list[str]:
        """`argv` run on this server in `cwd` (default: AggNet's folder) with this process's PYTHONPATH: with
        a terminal (a node's shell, like cluster.py's `ssh -tt`), else under testbed.tether."""
        tether = [] if tty else [sys.executable, str(TETHER)]
        line = (f"cd {shlex.quote(cwd or str(REPO))} && exec env "
                f"PYTHONPATH={shlex.quote(os.environ.get('PYTHONPATH', ''))} {shlex.join(tether + argv)}")
        return [*self.ssh("-tt" if tty else "-T"), line]

    def run(self, command: str) -> str:
        """Run a shell command in this server's root namespace; its output (stdout and stderr)."""
        argv = ["sh", "-c", command] if self.local else [*self.ssh("-T"), command]
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        return done.stdout + done.stderr

    def check(self) -> None:
        """ClusterError unless ssh as root works and AggNet, its Python and mnexec are where they are here."""
        need = f"test -x {shlex.quote(sys.executable)} && test -f {shlex.quote(str(TETHER))}"
        done = subprocess.run([*self.ssh("-T"), f"{need} || echo missing-aggnet; command -v mnexec || "
                                                "echo missing-mnexec"],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        where = f"server {self.name} ({self.address})"
        if done.returncode == 255:
            last = (done.stderr.strip().splitlines() or ["no output"])[-1]
            raise ClusterError(f"error: {where}: ssh root@{self.name} failed: {last}")
        if "missing-aggnet" in done.stdout:
            raise ClusterError(f"error: {where}: no {sys.executable} or {TETHER} there (install AggNet at the "
                               "same path on every server)")
        if "missing-mnexec" in done.stdout:
            raise ClusterError(f"error: {where}: mnexec not found (install mininet there: scripts/setup.sh)")

    def shares(self, folder: str) -> bool:
        """Whether this server sees `folder` as this machine does (one file system): then nothing is copied."""
        marker = os.path.join(folder, f".aggnet-shared-{os.getpid()}")
        Path(marker).touch()
        try:
            return self.run(f"test -e {shlex.quote(marker)} && echo shared").strip().endswith("shared")
        finally:
            os.unlink(marker)

    def push(self, folder: str) -> None:
        """Copy `folder` to the same path here, without what logs/ and pcaps/ hold (they only come back)."""
        q = shlex.quote(folder)
        _copy(["tar", "-C", folder, "--exclude=./logs/*", "--exclude=./pcaps/*", "-cf", "-", "."],
              [*self.ssh("-T"), f"mkdir -p {q} && tar -C {q} -xf -"], f"copying {folder} to {self.name}")

    def pull(self, folder: str) -> None:
        """Copy what the processes wrote in `folder` here back to this machine (newer files here stay)."""
        _copy([*self.ssh("-T"), f"tar -C {shlex.quote(folder)} -cf - ."],
              ["tar", "-C", folder, "--keep-newer-files", "-xf", "-"], f"copying {folder} back from {self.name}")

    def source_address(self, towards: Server) -> str:
        """This server's address as seen from `towards` (this machine: the source of its route there)."""
        if not self.local:
            return self.address
        route = subprocess.run(["ip", "-o", "route", "get", towards.address], capture_output=True, text=True).stdout
        if " src " not in route:
            raise ClusterError(f"error: server {towards.name}: no route to {towards.address} from this machine")
        return route.split(" src ")[1].split()[0]


def _copy(reader: list[str], writer: list[str], what: str) -> None:
    """reader | writer, ClusterError naming `what` if either fails."""
    source = subprocess.Popen(reader, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    assert source.stdout is not None and source.stderr is not None, "pipes were asked for"
    sink = subprocess.run(writer, stdin=source.stdout, capture_output=True, text=True)
    source.stdout.close()
    errors = source.stderr.read().decode(errors="replace")
    if source.wait() or sink.returncode:
        last = ((errors + sink.stderr).strip().splitlines() or ["no output"])[-1]
        raise ClusterError(f"error: {what} failed: {last}")


def server_named(name: str, ssh_config: str | None = None) -> Server:
    """The server ssh reaches as `name` (its HostName from the ssh configuration), resolved to IPv4."""
    if name == "localhost":
        return Server(name, "127.0.0.1", True, ssh_config)
    config = ["-F", ssh_config] if ssh_config else []
    shown = subprocess.run(["ssh", *config, "-G", name], capture_output=True, text=True).stdout.split("\n")
    host = next((line.split()[1] for line in shown if line.startswith("hostname ")), name)
    try:
        address = socket.gethostbyname(host)
    except OSError:
        raise ClusterError(f"error: --servers: cannot resolve {name} ({host}) to an IPv4 address") from None
    return Server(name, address, _is_local(address), ssh_config)


def _is_local(address: str) -> bool:
    """Whether `address` belongs to this machine (binding to it works only then)."""
    if ipaddress.ip_address(address).is_loopback:
        return True
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind((address, 0))
        except OSError:
            return False
    return True


def place_nodes(topology: Any, servers: Sequence[str], given: Mapping[str, str]) -> dict[str, str]:
    """Every node's server: `given` first, then switches in even bins over `servers` in topology order
    (cluster.py's SwitchBinPlacer.bin), each host with the switch it is linked to."""
    for node in given:
        if node not in topology.hosts and node not in topology.switches:
            raise ClusterError(f"error: --placement {node}={given[node]}: {node} is not a node of {topology.source}")
    bins = SwitchBinPlacer.bin(list(topology.switches), list(servers))
    out = {s: given.get(s, bins[s]) for s in topology.switches}
    for h in topology.hosts:
        switch = next(link.other(h) for link in topology.links if h in (link.a, link.b))
        out[h] = given.get(h, out[switch])
    return out


def _leave_with_parent() -> None:
    """An ssh client leads its own process group (Mininet signals a node's shell by group) and ends
    with the testbed, which ends the remote session and, through the tether, what it runs. SIGHUP is
    restored to its default: under nohup the client inherits it ignored and would outlive its pty."""
    os.setpgrp()
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class RemoteMixin:
    """Makes a node class place its node on `server` (see the module docstring); on this machine's
    server it changes nothing. `copy_dir`: the run folder, copied there before a process starts."""

    def __init__(self, name: str, server: Server, copy_dir: str | None = None, **params: Any):
        self.server = server
        self.copy_dir = copy_dir
        super().__init__(name, **params)  # type: ignore[call-arg]  # the node class after this mixin

    def startShell(self, mnopts: str | None = None) -> None:  # noqa: N802 - Mininet's name
        if self.server.local:
            super().startShell(mnopts)  # type: ignore[misc]
            return
        super().startShell("-c")  # type: ignore[misc]  # keep ssh's terminal, as cluster.py does
        self.pid = int(self.cmd("echo $$"))  # type: ignore[attr-defined]  # the shell there, for mnexec -a

    def _popen(self, cmd: list[str], tty: bool = True, **params: Any) -> subprocess.Popen:
        if not self.server.local:
            params["preexec_fn"] = _leave_with_parent
            # Mininet starts shells with close_fds=False: an ssh shell then held the pty masters of the
            # nodes started before it, and their shells never saw EOF at teardown (net.stop waited forever).
            params["close_fds"] = True
            cmd = self.server.command(cmd, tty, params.pop("cwd", None))
        return super()._popen(cmd, **params)  # type: ignore[misc]

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        """A process on the node; on another server under the tether, whose stdin is the session."""
        if self.server.local:
            return super().popen(*args, **kwargs)  # type: ignore[misc]
        if self.copy_dir:
            self.server.push(self.copy_dir)
        kwargs["stdin"] = subprocess.PIPE
        return super().popen(*args, tty=False, **kwargs)  # type: ignore[misc]

    def rcmd(self, command: str) -> str:
        """Run `command` in the root namespace of the node's server (cluster.py's name); its output."""
        return self.server.run(command)


class RemoteHost(RemoteMixin, AggNetHost):
    """An AggNetHost on any server."""


class RemoteSwitch(RemoteMixin, EmbeddedSwitch):
    """An EmbeddedSwitch on any server: there its P4Runtime server listens on the server's address,
    its side channel is forwarded over ssh (`forward`), and it logs to ssh."""

    def __init__(self, name: str, server: Server, **params: Any):
        super().__init__(name, server, **params)
        self.forward: subprocess.Popen | None = None
        if not server.local:
            self.address = server.address

    def log_args(self) -> list[str]:
        return super().log_args() if self.server.local else []

    def configure_ports(self) -> None:
        """IPv6 and checksum offloads off through the node's shell (on any server: the cluster edition's links
        are made one at a time, with IPv6 on)."""
        for intf in self.intfList():
            if intf.name != "lo":
                self.cmd(f"sysctl -qw net.ipv6.conf.{intf.name}.disable_ipv6=1; "
                         f"ethtool -K {intf.name} tx off rx off >/dev/null 2>&1")

    def launch(self, argv: list[str], log: IO[bytes]) -> SwitchProcess:
        if self.server.local:
            return super().launch(argv, log)
        process = self._popen(argv, tty=False, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.PIPE)
        port = self.side_channel_port
        self.forward = subprocess.Popen(
            self.server.ssh("-N", "-o", "ExitOnForwardFailure=yes", "-L", f"127.0.0.1:{port}:127.0.0.1:{port}"),
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_leave_with_parent)
        return process

    def wait_ready(self) -> None:
        """Also until the side channel answers through the forward (which listens before the switch does)."""
        super().wait_ready()
        deadline = time.monotonic() + self.start_timeout
        while self.forward is not None:
            try:
                send_command(self.side_channel_port, "port_stats")
                return
            except SideChannelError as exc:
                if time.monotonic() > deadline or self.forward.poll() is not None:
                    raise SwitchStartError(f"{self.name}: side channel not reachable over ssh: {exc}; "
                                           f"log tail: {log_tail(self.log_file)}") from None
                time.sleep(0.05)

    def ask_to_stop(self) -> None:
        """On another server, end the ssh session (the tether stops the switch; its log still comes back)."""
        if self.server.local or self.process is None or self.process.stdin is None:
            super().ask_to_stop()
        else:
            self.process.stdin.close()

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        """On another server, end the ssh session: the tether stops the switch, and its last log lines
        still come back before the usual stop."""
        if not self.server.local and self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(STOP_WAIT_S)
        if self.forward is not None:
            self.forward.terminate()
            self.forward.wait()
            self.forward = None
        super().stop(deleteIntfs)


class VxlanLink(RemoteLink):
    """A veth pair on one server, a VXLAN tunnel between two (see the module docstring)."""

    vni = 0  # the last tunnel's VXLAN id: one per tunnel
    tunnel: Any  # cluster.py's: what makeTunnel returned, None for a veth pair

    def makeTunnel(self, node1: Any, node2: Any, intfname1: str, intfname2: str,  # noqa: N802 - cluster.py's
                   addr1: str | None = None, addr2: str | None = None) -> str:
        VxlanLink.vni += 1
        for node, other, intf, mac in ((node1, node2, intfname1, addr1), (node2, node1, intfname2, addr2)):
            remote = other.server.source_address(node.server)
            output = node.rcmd(f"ip link del {intf} 2>/dev/null; ip link add {intf}" +  # a killed run's tunnel goes
                               (f" address {mac}" if mac else "") +
                               f" mtu {TUNNEL_MTU} type vxlan id {VxlanLink.vni} remote {remote} "
                               f"dstport {VXLAN_PORT} nolearning")
            if output.strip():
                raise ClusterError(f"error: tunnel {intfname1}-{intfname2} on server {node.server.name}: "
                                   f"{output.strip().splitlines()[-1]}")
            self.moveIntf(intf, node)
        return f"vxlan {VxlanLink.vni}"

    def stop(self) -> None:
        """Delete both tunnel ends (a veth pair goes as Mininet deletes it)."""
        if self.tunnel:
            self.intf1.delete()
            self.intf2.delete()
        else:
            Link.stop(self)
        self.tunnel = None


class ClusterTestbed(Testbed):
    """A Testbed whose nodes are placed on `servers` (NODE -> SERVER in `placement`, the rest by place_nodes)."""

    host_class = RemoteHost
    parallel_nodes = 1  # a node there logs in over ssh: one after another, as the cluster edition does

    def __init__(self, topology: Any, servers: Sequence[str], placement: Mapping[str, str],
                 target: str = "embedded", run_dir: str | None = None, ssh_config: str | None = None,
                 **kwargs: Any):
        super().__init__(topology, target, run_dir, **kwargs)
        self.switch_class = RemoteSwitch
        self.servers = {name: server_named(name, ssh_config) for name in servers}
        self.placement = place_nodes(topology, servers, placement)
        self.copied: set[str] = set()  # servers that get the run folder copied (they do not share it)

    def describe(self) -> str:
        """Which nodes each server runs: `localhost: s1 h1; srv2: s2 h2`."""
        return "; ".join(f"{name}: {' '.join(n for n, s in self.placement.items() if s == name)}"
                         for name in self.servers if name in self.placement.values())

    def remote_servers(self) -> list[Server]:
        return [s for s in self.servers.values() if not s.local]

    def server_of(self, node: str) -> Server:
        return self.servers[self.placement[node]]

    def node_params(self, node: str) -> dict[str, Any]:
        server = self.server_of(node)
        return {"server": server, "copy_dir": self.run_dir if server.name in self.copied else None}

    def make_launchers(self) -> dict[str, Any]:
        """None: a node on another server starts its processes there, through ssh."""
        return {}

    def make_mininet(self, **params: Any) -> Any:
        """Mininet's own, its links tunnels between servers: the cluster edition's commands go through ssh
        one at a time (testbed.batched's batches are this machine's)."""
        from mininet.net import Mininet

        return Mininet(link=VxlanLink, **params)

    def switch_address(self, switch: str) -> str:
        server = self.server_of(switch)
        return "127.0.0.1" if server.local else server.address

    def _build(self) -> None:
        for server in self.remote_servers():
            server.check()
            if not server.shares(self.run_dir):
                self.copied.add(server.name)
                server.push(self.run_dir)
        super()._build()

    def loss_script(self, host: str, intf: str, p: float) -> str:
        """The script, also where `host` runs: its shell reads it there."""
        script = super().loss_script(host, intf, p)
        server = self.server_of(host)
        if server.name in self.copied:
            server.push(self.run_dir)
        return script

    def gather(self) -> None:
        for server in self.remote_servers():
            if server.name in self.copied:
                server.pull(self.run_dir)

    def stop(self) -> None:
        """Teardown, then what the switches wrote on other servers (pcaps) comes back."""
        try:
            super().stop()
        finally:
            try:
                self.gather()
            except ClusterError as exc:
                print(f"aggnet: {exc}", file=sys.stderr)
            self.copied.clear()
