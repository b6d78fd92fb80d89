"""Network launch and teardown: a topology becomes a running Mininet network.

    with Testbed(load_topology("topologies/star4.yaml"), "embedded", "runs/x") as tb:
        tb.host("h1").cmd("ping -c1 10.0.0.2")

Hosts (testbed.nodes.AggNetHost) get IP/MAC from the topology and Mininet's static ARP
entries for every other host, so pings do not depend on ARP being forwarded by the P4
program. Each switch is the target's node class (testbed.nodes.EmbeddedSwitch or
Bmv2Switch), its nodes and links made in batches (testbed.batched), in a run slot of its own
(testbed.slots: a network beside others on one machine names its switch interfaces and numbers its
ports so that none collide; slot 0 keeps Mininet's names). Per-link bw/delay/loss/queue from the topology are applied to the switch's
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

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from controller.parallel import each
from p4target.tls import TlsFiles
from testbed import clean
from testbed.nodes import AggNetHost, P4Switch, SwitchDied, TargetUnsupported, check_target, switch_class
from testbed.slots import RunSlot, acquire_slot

SIDE_CHANNEL_PORT_BASE = 9090  # + device id: the switch's --thrift-port (our side channel; Thrift on BMv2)
LOSS_PPM = 1_000_000  # nftables draws loss as `numgen random mod LOSS_PPM < p * LOSS_PPM`
FRAME_BYTES = 1514  # a full-size Ethernet frame on a 1500-byte MTU
HOST_BURST_FRAMES = 2  # a host link's token bucket (host_tbf_command)
HOST_QUEUE_FRAMES = 1000  # a host link's queue: Linux's default txqueuelen (host_tbf_command)


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


def kernel_loss_script(drops: dict[str, float], table: str = clean.NFT_TABLE) -> str:
    """An `nft -f` script dropping each interface's outgoing packets with its probability.

    The netdev egress hook runs in dev_queue_xmit, before the veth hands the frame to its peer,
    so the far end (a host's stack or a switch's packet socket) never sees a dropped frame.
    """
    chains = [f"  chain loss{i} {{ type filter hook egress device \"{intf}\" priority 0; "
              f"numgen random mod {LOSS_PPM} < {round(p * LOSS_PPM)} drop; }}"
              for i, (intf, p) in enumerate(sorted(drops.items()))]
    return "\n".join([f"table netdev {table} {{", *chains, "}"]) + "\n"


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

    Its nodes are of `host_class` and the target's switch class, each made with `node_params(name)`, in
    the Mininet object `make_mininet` makes: testbed.cluster.ClusterTestbed places them on several
    servers that way. The network holds a run slot (testbed.slots) from `start` to `stop`."""

    __test__ = False  # not a pytest test class despite the name
    host_class: type = AggNetHost
    # Nodes made at once: each waits for its shell's first prompt (at k=8, 208 shells one after another
    # took 6 s on a loaded machine).
    parallel_nodes = 8

    def __init__(self, topology: Any, target: str = "embedded", run_dir: str | None = None,
                 program: str | None = None, pcap: bool = False, start_timeout: float = 30.0,
                 tls: TlsFiles | None = None, pushed_program: str | None = None):
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
        self.pushed_program = pushed_program  # the P4 file the controller will push (the launcher reads it first)
        self.net: Any = None  # a mininet.net.Mininet once built (Mininet has no type hints)
        self._record: dict | None = None
        self._old_sigterm: Callable[[int, FrameType | None], Any] | int | None = None
        self.slot: RunSlot | None = None  # held while the network runs
        self.launchers: dict[str, Any] = {}  # testbed.launcher.Launcher by kind ("switch", "host"), while it runs

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
        """Where `switch`'s side channel listens (its --thrift-port): 9090 + device id in slot 0."""
        return SIDE_CHANNEL_PORT_BASE + self.topology.switches[switch].device_id + self._slot().port_offset

    def grpc_port(self, switch: str) -> int:
        """Where `switch`'s P4Runtime server listens: the topology's port in slot 0."""
        return self.topology.switches[switch].grpc_port + self._slot().port_offset

    def intf_name(self, node: str, port: int) -> str:
        """The kernel's name of `node`'s interface `port`: Mininet's, with the slot's prefix on a switch's."""
        name = self.topology.intf_name(node, port)
        return self._slot().kernel_name(name) if self.topology.is_switch(node) else name

    def slot_json(self) -> dict:
        """The network's run slot as results.json records it."""
        slot = self._slot()
        return {"index": slot.index, "interface_prefix": slot.prefix, "port_offset": slot.port_offset,
                "interface_group": slot.group}

    def _slot(self) -> RunSlot:
        assert self.slot is not None, "the network holds its slot from start() to stop()"
        return self.slot

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
            self.slot = self.acquire_slot()
            self.launchers = self.make_launchers()
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

    def acquire_slot(self) -> RunSlot:
        """The first run slot whose ports and interface names are free here (testbed.slots)."""
        topo = self.topology
        ports = [p for s in topo.switches.values() for p in (s.grpc_port, SIDE_CHANNEL_PORT_BASE + s.device_id)]
        return acquire_slot(ports, [topo.intf_name(node, link.port_on(node)) for link in topo.links
                                    for node in (link.a, link.b) if topo.is_switch(node)])

    def make_launchers(self) -> dict[str, Any]:
        """The launchers (testbed.launcher) that fork the embedded switches (BMv2's is a program of its own) and the
        hosts' `python -m hosts` processes, by kind."""
        from testbed.launcher import HOST_MODULES, SWITCH_MODULES, Launcher
        from testbed.nodes import HOST_MALLOC_ENV

        env = clean.testbed_environment()
        out = {"host": Launcher({**env, **HOST_MALLOC_ENV}, HOST_MODULES)}
        if self.target == "embedded":
            out["switch"] = Launcher(env, SWITCH_MODULES, self.pushed_program)
        return out

    def make_mininet(self, **params: Any) -> Any:
        """The Mininet object the nodes go in: its commands batched per namespace (testbed.batched)."""
        from testbed.batched import BatchedMininet, IpBatch

        return BatchedMininet(IpBatch(self._slot().group, self.build_dir), **params)

    def _build(self) -> None:
        topo, slot = self.topology, self._slot()
        self.net = self.make_mininet(topo=None, build=False, controller=None, host=self.host_class,
                                     autoSetMacs=False, autoStaticArp=True)
        each(list(topo.hosts) + list(topo.switches), self._add_node, self.parallel_nodes)
        self.net.hosts = [self.net.nameToNode[h] for h in topo.hosts]  # in the topology's order, as added one by one
        self.net.switches = [self.net.nameToNode[s] for s in topo.switches]
        interfaces = []
        for link in topo.links:
            names = (self.intf_name(link.a, link.a_port), self.intf_name(link.b, link.b_port))
            self.net.addLink(link.a, link.b, port1=link.a_port, port2=link.b_port,
                             intfName1=names[0], intfName2=names[1])
            interfaces += [n for n, node in zip(names, (link.a, link.b)) if topo.is_switch(node)]
        self._record = {"owner": os.getpid(), "owner_start": clean.process_start_time(os.getpid()),
                        "run_dir": os.path.abspath(self.run_dir), "slot": slot.index, "group": slot.group,
                        "nft_table": slot.nft_table, "interfaces": interfaces, "processes": []}
        clean.write_record(self._record)
        self.net.build()
        self._record_processes()

    def _add_node(self, name: str) -> None:
        """The Mininet node of host or switch `name` (its shell started and answering: testbed.batched configures it)."""
        topo = self.topology
        if topo.is_host(name):
            h = topo.hosts[name]
            self.net.addHost(h.name, ip=h.ip_cidr, mac=h.mac, launcher=self.launchers.get("host"), **self.node_params(name))
            return
        s = topo.switches[name]
        self.net.addSwitch(s.name, cls=self.switch_class, device_id=s.device_id, grpc_port=self.grpc_port(s.name),
                           side_channel_port=self.side_channel_port(s.name), log_file=self.log_file(s.name),
                           program=self.program, pcap_dir=self.pcaps_dir if self.pcap else None,
                           start_timeout=self.start_timeout, tls=self.tls, launcher=self.launchers.get("switch"),
                           **self.node_params(name))

    def _record_processes(self) -> None:
        procs = [{"name": h.name, "pid": h.shell.pid, "start": clean.process_start_time(h.shell.pid)}
                 for h in self.net.hosts]  # the shell: a host on another server is its ssh client here
        for kind, launcher in self.launchers.items():
            pid = launcher.process.pid
            procs.append({"name": f"{kind} launcher", "pid": pid, "start": clean.process_start_time(pid)})
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
        from testbed.batched import on_shells

        commands: dict[Any, list[str]] = {}
        for link in self.topology.links:
            host = link.a if self.topology.is_host(link.a) else link.b if self.topology.is_host(link.b) else None
            if host is None:
                continue
            node, intf = self.net.get(host), self.intf_name(host, link.port_on(host))
            tbf = host_tbf_command(link, intf)
            if tbf:
                commands.setdefault(node, []).append(tbf)
            if link.loss:
                commands.setdefault(node, []).append(f"nft -f {self.loss_script(host, intf, link.loss / 100.0)}")
        # every host at once; a failed command is named by the output that follows it
        on_shells({node: " && ".join(lines) + " && echo ok" for node, lines in commands.items()},
                  lambda node, output: _check(output, " && ".join(commands[node])))

    def loss_script(self, host: str, intf: str, p: float) -> str:
        """Write the nft script dropping `host`'s outgoing packets on `intf` with probability p; its path."""
        script = os.path.join(self.build_dir, f"{host}-loss.nft")
        with open(script, "w") as f:
            f.write(kernel_loss_script({intf: p}, self._slot().nft_table))
        return script

    def apply_link_queues(self) -> None:
        """Per-link bw/delay/loss/queue from the topology -> the switches' egress queues (one batch per switch, many
        switches at once), and a host link's delay also to the switch's ingress from that host (shape_host_links does the rest).

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
                        drops[self.intf_name(node, port)] = link.loss / 100.0
        each([s for s, lines in commands.items() if lines],
             lambda switch: side_channel(self.target, self.side_channel_port(switch)).run(commands[switch]))
        if drops:
            subprocess.run(["nft", "-f", "-"], input=kernel_loss_script(drops, self._slot().nft_table), text=True,
                           check=True, capture_output=True)

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
            for launcher in self.launchers.values():
                launcher.stop()
            self.launchers = {}
            if self._record is not None:
                clean.clean_record(self._record)
                clean.remove_record(self._record["owner"])
                self._record = None
            if self._old_sigterm is not None:
                signal.signal(signal.SIGTERM, self._old_sigterm)
                self._old_sigterm = None
            if self.slot is not None:
                self.native_pcap_names()
                self.slot.release()
                self.slot = None

    def native_pcap_names(self) -> None:
        """Pcap files named after the kernel's interface names (a1-s1-eth1_in.pcap) take Mininet's (s1-eth1_in.pcap)."""
        slot = self._slot()
        if not slot.prefix or not os.path.isdir(self.pcaps_dir):
            return
        for name in os.listdir(self.pcaps_dir):
            if name.startswith(slot.prefix):
                os.replace(os.path.join(self.pcaps_dir, name), os.path.join(self.pcaps_dir, slot.native_name(name)))

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
