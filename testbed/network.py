"""Network launch and teardown: a topology becomes a running Mininet network.

    with Testbed(load_topology("topologies/star4.yaml"), "embedded", "runs/x") as tb:
        tb.host("h1").cmd("ping -c1 10.0.0.2")

Hosts (testbed.nodes.AggNetHost) get IP/MAC from the topology and Mininet's static ARP
entries for every other host, so pings do not depend on ARP being forwarded by the P4
program. Each switch is the target's node class (testbed.nodes.EmbeddedSwitch or
Bmv2Switch). Per-link bw/delay/loss/queue from the topology are applied to the switch's
egress queue on that link through its side channel (there is no netem here). The embedded
target's traffic manager has all four; BMv2's queues have only rate and depth, so on BMv2 a
link's loss is applied by the kernel instead (an nftables netdev egress hook on the switch's
interface drops packets at random: not seeded), and a topology with delay on BMv2 is refused
before anything starts. BMv2 switches start empty (the controller pushes the pipeline), and
simple_switch_CLI cannot talk to a switch without a program, so on BMv2 `start()` leaves the
queues alone and the caller runs `apply_link_queues()` once the pipeline is in. The run folder
gets build/, logs/ (s1.log) and pcaps/. Teardown always runs: on exceptions, Ctrl-C and
SIGTERM, and a record in testbed.clean.STATE_DIR lets `aggnet clean` finish the job if this
process is killed.
"""
from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import IO, Any

from p4target.runtime.tls import TlsFiles
from testbed import clean
from testbed.nodes import AggNetHost, P4Switch, SwitchDied, TargetUnsupported, check_target, switch_class

SIDE_CHANNEL_PORT_BASE = 9090  # + device id: the switch's --thrift-port (our side channel; Thrift on BMv2)
LOCK_FILE = os.path.join(clean.STATE_DIR, "network.lock")
LOSS_PPM = 1_000_000  # nftables draws loss as `numgen random mod LOSS_PPM < p * LOSS_PPM`
FRAME_BYTES = 1514  # a full-size Ethernet frame on a 1500-byte MTU
HOST_BURST_FRAMES = 2  # a host link's token bucket (host_tbf_command)
HOST_QUEUE_FRAMES = 1000  # a host link's queue: Linux's default txqueuelen (host_tbf_command)


def network_lock_file() -> str:
    """The lock file of this process's network namespace: LOCK_FILE in the root namespace,
    network-<inode>.lock in any other (names and ports only collide within one namespace)."""
    ns = clean.netns_inode()
    root = clean.netns_inode("1") or clean.netns_inode("2")  # init's, or kthreadd's where init's is not ours to read
    return LOCK_FILE if ns is None or root is None or ns == root else os.path.join(clean.STATE_DIR,
                                                                                 f"network-{ns}.lock")


def acquire_network_lock() -> IO:
    """Hold the one-network-per-namespace lock; waits (saying so) while another network runs.

    Two AggNet networks in one network namespace would fight over interface names (s1-eth1)
    and gRPC ports, so a second one waits for the first instead of corrupting it; a network
    in another namespace (`aggnet soak --isolate`, `ip netns exec`) has its own lock.
    """
    os.makedirs(clean.STATE_DIR, exist_ok=True)
    lock = open(network_lock_file(), "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        print(f"aggnet: waiting for another AggNet network (pid {holder}) to stop", file=sys.stderr)
        fcntl.flock(lock, fcntl.LOCK_EX)
    lock.seek(0)
    lock.truncate()
    lock.write(str(os.getpid()))
    lock.flush()
    return lock


def queue_commands(port: int, target: str, bw_mbps: float | None = None, delay_ms: float | None = None,
                   loss: float | None = None, queue_pkts: int | None = None) -> list[str]:
    """Side-channel commands giving switch port `port` a rate, delay, loss (percent) and depth
    (on BMv2 loss is not a queue setting: see kernel_loss_script)."""
    out = []
    if bw_mbps:
        out.append(f"set_queue_rate_bps {bw_mbps * 1e6:.0f} {port}")
    if delay_ms:
        out.append(f"set_queue_delay {delay_ms} {port}")
    if loss and target == "embedded":
        out.append(f"set_queue_loss {loss / 100.0} {port}")
    if queue_pkts:
        out.append(f"set_queue_depth {queue_pkts} {port}")
    return out


def link_queue_commands(link: Any, port: int, target: str = "embedded") -> list[str]:
    """queue_commands giving `port` (one end of `link`) the link's rate, delay, loss and depth."""
    return queue_commands(port, target, link.bw_mbps, link.delay_ms, link.loss, link.queue_pkts)


def check_links(topology: Any, target: str) -> None:
    """TargetUnsupported when a link asks for shaping the target cannot do (BMv2: no delay)."""
    if target != "bmv2":
        return
    for link in topology.links:
        if link.delay_ms:
            raise TargetUnsupported(f"{topology.source}: link {link.a}-{link.b}: delay_ms needs the embedded "
                                    "target's traffic manager; on BMv2 links have bw_mbps, queue_pkts and loss")


BMV2_LIMITS = ("bmv2: links have no added delay, loss is drawn by the kernel (nftables, not seeded) "
               "rather than the traffic manager, and queue statistics are not kept")


def kernel_loss_script(drops: dict[str, float]) -> str:
    """An `nft -f` script dropping each interface's outgoing packets with its probability.

    The netdev egress hook runs in dev_queue_xmit, before the veth hands the frame to its peer,
    so the far end (a host's stack or a switch's packet socket) never sees a dropped frame.
    """
    chains = [f"  chain loss{i} {{ type filter hook egress device \"{intf}\" priority 0; "
              f"numgen random mod {LOSS_PPM} < {round(p * LOSS_PPM)} drop; }}"
              for i, (intf, p) in enumerate(sorted(drops.items()))]
    return "\n".join([f"table netdev {clean.NFT_TABLE} {{", *chains, "}"]) + "\n"


def host_tbf_command(link: Any, intf: str) -> str | None:
    """The `tc` command giving a host's interface its link's rate (None: unshaped), so the
    host-to-switch direction crosses the same link a switch's traffic manager gives the other one:
    a token bucket of HOST_BURST_FRAMES full frames before a queue of HOST_QUEUE_FRAMES.

    A NIC sends no faster than its rate, so the bucket is small: with DEFAULT_BURST_S of tokens
    (31 KB at 50 Mb/s) a host sent a burst at the veth's speed after every pause, deeper than the
    switch's ECN marking depth, and every mark halved a TCP window (VGG-16's ring, 4 workers:
    about 250 marks a port and 13% over its model; 0-27 marks and 8% with two frames).

    The queue is the host's, not the link's `queue_pkts` (a switch port's depth, where ECN marks):
    tbf cannot mark, so a TCP flow whose bottleneck is its own host's queue sees no mark, grows its
    window past a shallow queue and loses its own packets there, which a host's kernel, pushing back
    on its sockets instead, does not. With the switch's 64 packets, GPT-2's ring on 8 workers lost
    0-67 packets a host and a run, and the links that recovered ended their all-reduce up to 38 ms
    (emulated) after the others; with 1000 frames none was lost."""
    if not link.bw_mbps:
        return None
    burst = HOST_BURST_FRAMES * FRAME_BYTES
    limit = HOST_QUEUE_FRAMES * FRAME_BYTES
    return f"tc qdisc replace dev {intf} root tbf rate {link.bw_mbps * 1e6:.0f}bit burst {burst} limit {limit}"


def new_run_dir(root: str = "runs") -> str:
    """runs/<timestamp>, unique even when two runs start in the same second."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = os.path.join(root, stamp)
    n = 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(root, f"{stamp}-{n}")
    return path


class ShapingError(Exception):
    """A host's link could not be shaped (one line naming the command and what it said)."""

    exit_code = 1


def _check(output: str, command: str) -> None:
    """A host command that did not end with our `ok` failed."""
    lines = output.strip().splitlines()
    if not lines or lines[-1] != "ok":
        raise ShapingError(f"shaping a host link failed: {command}: {lines[-1] if lines else 'no output'}")


class Testbed:
    """A running network for one topology; use as a context manager.

    Its nodes are of `host_class`, the target's switch class and `link_class`, each made with
    `node_params(name)`: testbed.cluster.ClusterTestbed places them on several servers that way."""

    __test__ = False  # not a pytest test class despite the name
    host_class: type = AggNetHost
    link_class: type | None = None  # None: Mininet's veth pair

    def __init__(self, topology: Any, target: str = "embedded", run_dir: str | None = None,
                 program: str | None = None, pcap: bool = False, start_timeout: float = 30.0,
                 tls: TlsFiles | None = None):
        check_links(topology, target)
        if program and not switch_class(target).takes_program:
            raise TargetUnsupported(f"{program}: {target} switches start without a program; the controller "
                                    f"pushes it (controller.installer.load_program(path, {target!r}))")
        self.switch_class = check_target(target)
        self.topology = topology
        self.target = target
        self.run_dir = run_dir or new_run_dir()
        self.program = program
        self.pcap = pcap
        self.start_timeout = start_timeout
        self.tls = tls  # the switches' certificate, key and client CA: P4Runtime over mutual TLS
        self.net: Any = None  # a mininet.net.Mininet once built (Mininet has no type hints)
        self._record: dict | None = None
        self._old_sigterm: Callable[[int, FrameType | None], Any] | int | None = None
        self._lock: IO | None = None

    # -- paths
    @property
    def build_dir(self) -> str:
        return os.path.join(self.run_dir, "build")

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.run_dir, "logs")

    @property
    def pcaps_dir(self) -> str:
        return os.path.join(self.run_dir, "pcaps")

    def log_file(self, switch: str) -> str:
        return os.path.join(self.logs_dir, f"{switch}.log")

    def side_channel_port(self, switch: str) -> int:
        return SIDE_CHANNEL_PORT_BASE + self.topology.switches[switch].device_id

    def switch_address(self, switch: str) -> str:  # noqa: ARG002 - one machine: all on loopback
        """Where `switch`'s P4Runtime server listens (its side channel: on this machine's loopback)."""
        return "127.0.0.1"

    def node_params(self, node: str) -> dict[str, Any]:  # noqa: ARG002 - one machine: nothing to add
        """Extra parameters of `node`'s Mininet node (testbed.cluster: its server)."""
        return {}

    def gather(self) -> None:
        """Bring what host and switch processes wrote elsewhere into the run folder (one machine: nothing)."""

    # -- lifecycle
    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        """Build and start the network; on any failure tear down what exists, then re-raise."""
        from mininet.log import setLogLevel

        setLogLevel("error")
        for d in (self.build_dir, self.logs_dir, self.pcaps_dir):
            os.makedirs(d, exist_ok=True)
        self._trap_sigterm()
        try:
            self._lock = acquire_network_lock()
            self._build()
            self.net.start()
            self._record_processes()
            self.shape_host_links()
            if self.target == "embedded":
                self.apply_link_queues()
        except BaseException:
            self.stop()
            raise

    def _trap_sigterm(self) -> None:
        """Turn SIGTERM into KeyboardInterrupt so `with` blocks tear down (main thread only)."""
        if threading.current_thread() is threading.main_thread():
            def interrupt(*_):
                raise KeyboardInterrupt
            self._old_sigterm = signal.signal(signal.SIGTERM, interrupt)

    def _build(self) -> None:
        from mininet.net import Mininet

        topo = self.topology
        links = {"link": self.link_class} if self.link_class else {}
        self.net = Mininet(topo=None, build=False, controller=None, host=self.host_class, autoSetMacs=False,
                           autoStaticArp=True, **links)
        for h in topo.hosts.values():
            self.net.addHost(h.name, ip=h.ip_cidr, mac=h.mac, **self.node_params(h.name))
        for s in topo.switches.values():
            self.net.addSwitch(s.name, cls=self.switch_class, device_id=s.device_id, grpc_port=s.grpc_port,
                               side_channel_port=self.side_channel_port(s.name), log_file=self.log_file(s.name),
                               program=self.program, pcap_dir=self.pcaps_dir if self.pcap else None,
                               start_timeout=self.start_timeout, tls=self.tls, **self.node_params(s.name))
        interfaces = []
        for link in topo.links:
            names = (topo.intf_name(link.a, link.a_port), topo.intf_name(link.b, link.b_port))
            self.net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port,
                             intfName1=names[0], intfName2=names[1])
            interfaces += [n for n, node in zip(names, (link.a, link.b)) if topo.is_switch(node)]
        self._record = {"owner": os.getpid(), "owner_start": clean.process_start_time(os.getpid()),
                        "run_dir": os.path.abspath(self.run_dir), "interfaces": interfaces, "processes": []}
        clean.write_record(self._record)
        self.net.build()
        self._record_processes()

    def _record_processes(self) -> None:
        procs = [{"name": h.name, "pid": h.shell.pid, "start": clean.process_start_time(h.shell.pid)}
                 for h in self.net.hosts]  # the shell: a host on another server is its ssh client here
        for s in self.net.switches:
            if s.process is not None:
                procs.append({"name": s.name, "pid": s.process.pid, "start": clean.process_start_time(s.process.pid)})
        assert self._record is not None, "_build writes the record first"
        self._record["processes"] = procs
        clean.write_record(self._record)

    def shape_host_links(self) -> None:
        """The host-to-switch direction of every host link: rate and queue by the host's kernel (tbf),
        loss by an nftables egress hook in the host's namespace, delay by the switch's ingress
        (embedded target: apply_link_queues)."""
        for link in self.topology.links:
            host = link.a if self.topology.is_host(link.a) else link.b if self.topology.is_host(link.b) else None
            if host is None:
                continue
            node, intf = self.net.get(host), self.topology.intf_name(host, link.port_on(host))
            tbf = host_tbf_command(link, intf)
            if tbf:
                _check(node.cmd(f"{tbf} && echo ok"), tbf)
            if link.loss:
                script = self.loss_script(host, intf, link.loss / 100.0)
                _check(node.cmd(f"nft -f {script} && echo ok"), f"nft -f {script}")

    def loss_script(self, host: str, intf: str, p: float) -> str:
        """Write the nft script dropping `host`'s outgoing packets on `intf` with probability p; its path."""
        script = os.path.join(self.build_dir, f"{host}-loss.nft")
        with open(script, "w") as f:
            f.write(kernel_loss_script({intf: p}))
        return script

    def apply_link_queues(self) -> None:
        """Per-link bw/delay/loss/queue from the topology -> the switches' egress queues (one batch per switch),
        and a host link's delay also to the switch's ingress from that host (shape_host_links does the rest).

        `start()` does this on the embedded target; on BMv2 call it after pushing the pipeline.
        """
        from controller.switch_cli import side_channel

        commands: dict[str, list[str]] = {}
        drops: dict[str, float] = {}
        for link in self.topology.links:
            for node in (link.a, link.b):
                if self.topology.is_switch(node):
                    port = link.port_on(node)
                    commands.setdefault(node, []).extend(link_queue_commands(link, port, self.target))
                    if link.delay_ms and self.topology.is_host(link.other(node)):  # the host-to-switch direction
                        commands[node].append(f"set_ingress_delay {link.delay_ms} {port}")
                    if link.loss and self.target == "bmv2":
                        drops[self.topology.intf_name(node, port)] = link.loss / 100.0
        for switch, lines in commands.items():
            if lines:
                side_channel(self.target, self.side_channel_port(switch)).run(lines)
        if drops:
            subprocess.run(["nft", "-f", "-"], input=kernel_loss_script(drops), text=True, check=True,
                           capture_output=True)

    def check(self) -> None:
        """Raise SwitchDied naming the first switch whose process has exited."""
        for s in self.net.switches:
            s.check_alive()

    def dead_switches(self) -> list[str]:
        """One line per switch process that has exited (empty when all run)."""
        out: list[str] = []
        for s in self.net.switches if self.net else []:
            try:
                s.check_alive()
            except SwitchDied as exc:
                out.append(str(exc))
        return out

    def restart_switch(self, name: str) -> None:
        """Start a switch's process again after it died (its interfaces are still there), and record it."""
        switch = self.switch(name)
        with open(switch.log_file, "ab") as log:
            switch.process = switch.launch(switch.command(), log)
        switch.wait_ready()
        self._record_processes()

    def stop(self) -> None:
        """Tear everything down; safe to call twice and after a partial start."""
        try:
            if self.net is not None:
                self._forget_dead_shells()
                self.net.stop()
        finally:
            self.net = None
            if self._record is not None:
                clean.clean_record(self._record)
                clean.remove_record(self._record["owner"])
                self._record = None
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None
            if self._lock is not None:
                self._lock.close()  # closing releases the flock
                self._lock = None

    def _forget_dead_shells(self) -> None:
        """Mininet waits forever on a command sent to a node whose shell died (killed from outside);
        without a shell it skips the node's commands, and clean_record removes its interfaces."""
        for node in self.net.hosts + self.net.switches:
            if node.shell is not None and node.shell.poll() is not None:
                node.shell = None

    # -- access
    def link_counter_files(self) -> dict[str, str]:
        """"a->b" -> the kernel's byte counter of what that link direction carried (testbed.fidelity.LinkMeter):
        the sending switch interface's tx_bytes, or when a host sends, the receiving switch interface's rx_bytes."""
        out = {}
        for link in self.topology.links:
            for src, dst in ((link.a, link.b), (link.b, link.a)):
                end, counter = (src, "tx_bytes") if self.topology.is_switch(src) else (dst, "rx_bytes")
                if self.topology.is_switch(end):
                    intf = self.switch(end).intfs[link.port_on(end)].name
                    out[f"{src}->{dst}"] = f"/sys/class/net/{intf}/statistics/{counter}"
        return out

    def host(self, name: str) -> Any:
        return self.net.get(name)

    def switch(self, name: str) -> P4Switch:
        return self.net.get(name)
