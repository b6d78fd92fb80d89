"""Mininet nodes as AggNet needs them, shaped like Mininet's own (mininet/node.py): a class per
kind of node, the differences in small overridable methods.

- `P4Switch`: a switch node in the root namespace (like BMv2 nodes in p4-utils) that runs one P4
  target process on its interfaces, port numbers as the topology gives them. `start()` launches
  `command()` and waits until its P4Runtime and side-channel ports accept connections; a process
  that exits or does not come up in time raises SwitchStartError with the tail of its log. The
  process gets SIGTERM if the testbed process itself dies (PR_SET_PDEATHSIG).
- `EmbeddedSwitch`: `aggnet switch` (p4target), which may start with the program.
- `Bmv2Switch`: `simple_switch_grpc --no-p4`, which starts empty: the controller pushes p4c's JSON.
- Ports: a switch's interfaces have no IPv6 address (made so: testbed.batched) and checksum offloads
  off (`configure_ports`, through ethtool's ioctl from this process, not a shell command per
  interface: 640 of them at k=8).
- `AggNetHost`: a host with IPv6 off (no router solicitations or MLD reports in the switches'
  counters and pcaps), checksum offloads off (a veth would otherwise hand the P4 program
  frames with unfinished checksums) and TCP as a data center runs it: ECN on (`net.ipv4.tcp_ecn=1`;
  the switches CE-mark ECN-capable packets past a port's marking depth, aggnet.p4's egress) and
  Reno, which halves its window on a mark as RFC 3168 has it (BBR, the default a namespace may
  inherit, ignores marks and keeps the shallow queues overflowing; CUBIC cannot be chosen in a
  namespace unless the machine allows it), so the parameter server's incast slows down before its
  port's queue tail-drops.
"""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO, Any

from mininet.node import Host, Switch

from p4target.runtime.tls import TlsFiles
from testbed.clean import testbed_environment
from testbed.launcher import LaunchedProcess, Launcher

PR_SET_PDEATHSIG = 1
# An emulated host keeps the memory it frees (glibc: no mmap, no trim). On this kind of VM a page
# freed to the kernel goes back to the hypervisor, and touching it again costs ~12 us: quantizing a
# 20 MB bucket in fresh temporaries took 0.8 s instead of 0.03, on the two cores every host shares.
HOST_MALLOC_ENV = {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": str(1 << 40)}
SwitchProcess = subprocess.Popen | LaunchedProcess  # a switch's process: started here, or forked by the launcher
SIOCETHTOOL = 0x8946
ETHTOOL_SRXCSUM, ETHTOOL_STXCSUM = 0x15, 0x17  # ethtool -K IFACE rx off / tx off
TCP_SYSCTLS = "net.ipv4.tcp_ecn=1 net.ipv4.tcp_congestion_control=reno"  # a host's TCP (module docstring)


class SwitchStartError(Exception):
    """A switch process failed to start (one line with the log tail)."""

    exit_code = 1


class SwitchDied(Exception):
    """A switch process exited while the network was running."""

    exit_code = 1


class TargetMissing(Exception):
    """The requested target's programs are not installed."""

    exit_code = 2


class TargetUnsupported(Exception):
    """The request needs something the target does not have (e.g. link delay on BMv2)."""

    exit_code = 2


def log_tail(path: str, lines: int = 8) -> str:
    """The last lines of a log file joined with ' | ', for one-line error messages."""
    try:
        with open(path, errors="replace") as f:
            tail = [line.rstrip() for line in f.readlines()[-lines:] if line.strip()]
    except OSError:
        return "(no log)"
    return " | ".join(tail) or "(log is empty)"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def checksum_offloads_off(ifname: str) -> None:
    """`ethtool -K IFACE tx off rx off` for an interface of this namespace, through ethtool's ioctl
    (the kernel turns off what depends on them, as for ethtool); an error only if the interface is gone."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for command in (ETHTOOL_STXCSUM, ETHTOOL_SRXCSUM):
            value = bytearray(struct.pack("II", command, 0))
            request = struct.pack("16sP16x", ifname.encode(), _address_of(value))
            try:
                fcntl.ioctl(sock, SIOCETHTOOL, request)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise


def _address_of(buffer: bytearray) -> int:
    import ctypes

    return ctypes.addressof(ctypes.c_char.from_buffer(buffer))


class P4Switch(Switch):
    """A P4 switch node: one target process bound to this node's interfaces (see the module docstring)."""

    programs: tuple[str, ...] = ()  # what must be on PATH to run this kind of switch
    takes_program = True  # whether it can start with the P4 program (else the controller pushes it)
    address = "127.0.0.1"  # where its P4Runtime server listens (testbed.cluster: its server's); side channel: loopback
    tls: TlsFiles | None = None  # the certificate, key and client CA it serves P4Runtime with (mutual TLS)

    def __init__(self, name: str, device_id: int, grpc_port: int, side_channel_port: int, log_file: str,
                 program: str | None = None, pcap_dir: str | None = None, cpu_port: int = 255,
                 start_timeout: float = 30.0, tls: TlsFiles | None = None, launcher: Launcher | None = None,
                 **params):
        super().__init__(name, **params)
        self.device_id = device_id
        self.grpc_port = grpc_port
        self.side_channel_port = side_channel_port
        self.log_file = log_file
        self.program = program
        self.pcap_dir = pcap_dir
        self.cpu_port = cpu_port
        self.start_timeout = start_timeout
        self.tls = tls
        self.launcher = launcher  # the network's switch launcher (testbed.launcher), for a switch it can fork
        self.process: SwitchProcess | None = None

    def port_args(self) -> list[str]:
        return [arg for port, intf in sorted(self.intfs.items()) if intf.name != "lo"
                for arg in ("-i", f"{port}@{intf.name}")]

    def command(self) -> list[str]:
        """The target process's command line, flags as simple_switch_grpc spells them."""
        raise NotImplementedError

    def log_args(self) -> list[str]:
        """Where the process logs (testbed.cluster: a switch on another server logs to its output instead)."""
        return ["--log", self.log_file]

    def tls_args(self) -> list[str]:
        """simple_switch_grpc's target options for mutual TLS with `tls` (none without it)."""
        if self.tls is None:
            return []
        return ["--grpc-server-ssl", "--grpc-server-cert", str(self.tls.cert), "--grpc-server-key", str(self.tls.key),
                "--grpc-server-cacert", str(self.tls.cacert), "--grpc-server-with-client-auth"]

    def start(self, controllers) -> None:  # noqa: ARG002 - P4 switches have no OpenFlow controller
        """Launch the target process without waiting for it: Mininet starts every switch, then
        `batchStartup` waits for them all, so their start-ups overlap."""
        self.configure_ports()
        with open(self.log_file, "ab") as log:
            self.process = self.launch(self.command(), log)

    def configure_ports(self) -> None:
        """Checksum offloads off on every port (IPv6 is off from their creation: testbed.batched; testbed.cluster
        turns both off through the node's shell)."""
        for intf in self.intfList():
            if intf.name != "lo":
                checksum_offloads_off(intf.name)

    @classmethod
    def batchStartup(cls, switches: Sequence[P4Switch]) -> Sequence[P4Switch]:  # noqa: N802 - Mininet's name
        """Mininet's hook after every switch's start(): wait until each one is up (SwitchStartError if not)."""
        for switch in switches:
            switch.wait_ready()
        return switches

    @classmethod
    def batchShutdown(cls, switches: Sequence[P4Switch],  # noqa: N802 - Mininet's name
                      delete_interfaces: bool = True) -> Sequence[P4Switch]:
        """Mininet's hook for stopping switches: ask every process to stop first, so their exits overlap,
        then stop each (waiting for its process, and deleting its interfaces unless the network deletes
        them all at once: testbed.batched)."""
        for switch in switches:
            switch.ask_to_stop()
        for switch in switches:
            switch.stop(delete_interfaces)
        return switches

    def ask_to_stop(self) -> None:
        """SIGTERM the target process (if running) without waiting for it."""
        if self.process and self.process.poll() is None:
            self.process.terminate()

    def launch(self, argv: list[str], log: IO[bytes]) -> SwitchProcess:
        """Start the target process, its output to `log` (testbed.cluster: on another server). It gets
        SIGTERM when this process dies (setpriv --pdeathsig: a preexec_fn would make Python fork the
        whole testbed process instead of vfork, 30 ms a switch at k=8)."""
        return subprocess.Popen(["setpriv", "--pdeathsig", "TERM", "--", *argv], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=testbed_environment())  # marked: `aggnet clean` may stop it

    def wait_ready(self) -> None:
        """Block until the P4Runtime and side-channel ports answer, or fail with the log tail."""
        assert self.process is not None, "wait_ready runs after start"
        deadline = time.monotonic() + self.start_timeout
        while not (port_open(self.grpc_port, self.address) and port_open(self.side_channel_port)):
            code = self.process.poll()
            if code is not None:
                raise SwitchStartError(f"{self.name}: switch exited with code {code} while starting; "
                                       f"log tail: {log_tail(self.log_file)}")
            if time.monotonic() > deadline:
                raise SwitchStartError(f"{self.name}: P4Runtime port {self.grpc_port} not up after "
                                       f"{self.start_timeout:.0f}s; log tail: {log_tail(self.log_file)}")
            time.sleep(0.05)

    def check_alive(self) -> None:
        """Raise SwitchDied naming this switch if its process has exited."""
        code = self.process.poll() if self.process else None
        if code is not None:
            raise SwitchDied(f"{self.name}: exited with code {code}; log tail: {log_tail(self.log_file)}")

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 - Mininet's signature
        """SIGTERM the process (SIGKILL after 5 s), then let Mininet delete the interfaces."""
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        super().stop(deleteIntfs)


class EmbeddedSwitch(P4Switch):
    """`aggnet switch`: the embedded target, in the interpreter running AggNet; forked by the network's
    launcher when it has one (testbed.launcher: the same program, started without importing it anew)."""

    def launch(self, argv: list[str], log: IO[bytes]) -> SwitchProcess:
        if self.launcher is None:
            return super().launch(argv, log)
        return self.launcher.launch(argv, log.name, testbed_environment())

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(self.device_id),
               *self.port_args(), "--grpc-server-addr", f"{self.address}:{self.grpc_port}", "--cpu-port",
               str(self.cpu_port), "--thrift-port", str(self.side_channel_port), *self.log_args(), *self.tls_args()]
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        return cmd + ([self.program] if self.program else [])


class Bmv2Switch(P4Switch):
    """`simple_switch_grpc --no-p4`: BMv2 starts empty, the controller pushes p4c's JSON over P4Runtime.

    It logs at `warn`: at BMv2's default (`trace`) formatting every packet's log made a training
    step 4.6x slower. Its side channel is its Thrift port (simple_switch_CLI)."""

    programs = ("simple_switch_grpc", "simple_switch_CLI", "p4c")
    takes_program = False

    def command(self) -> list[str]:
        cmd = ["simple_switch_grpc", "--device-id", str(self.device_id), *self.port_args(),
               "--thrift-port", str(self.side_channel_port), "--log-console", "--log-level", "warn"]
        if self.pcap_dir:
            cmd += ["--pcap", self.pcap_dir]
        return cmd + ["--no-p4", "--", "--grpc-server-addr", f"{self.address}:{self.grpc_port}", "--cpu-port",
                      str(self.cpu_port), *self.tls_args()]


SWITCHES: dict[str, type[P4Switch]] = {"embedded": EmbeddedSwitch, "bmv2": Bmv2Switch}


def switch_class(target: str) -> type[P4Switch]:
    """The node class of `target`; TargetMissing for a target AggNet does not know."""
    cls = SWITCHES.get(target)
    if cls is None:
        raise TargetMissing(f"error: unknown target {target!r} (choose from {', '.join(SWITCHES)})")
    return cls


def check_target(target: str) -> type[P4Switch]:
    """The node class of `target`; TargetMissing unless it can run here (its programs on PATH)."""
    cls = switch_class(target)
    missing = [p for p in cls.programs if shutil.which(p) is None]
    if missing:
        raise TargetMissing(f"error: --target {target} needs {', '.join(missing)} on PATH (not found)")
    return cls


class AggNetHost(Host):
    """A Mininet host with IPv6 and checksum offloads off, TCP with ECN and Reno (see the module docstring);
    its `python -m hosts ...` processes forked by the network's host launcher when it has one."""

    def __init__(self, name: str, launcher: Launcher | None = None, **params: Any):
        self.launcher = launcher  # testbed.launcher: started with HOST_MALLOC_ENV and the host roles loaded
        super().__init__(name, **params)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen | LaunchedProcess:
        """Mininet's popen (`mnexec -da PID ARGV`), or the same forked by the launcher: for `python -m hosts ...`
        with its output to a file (stderr with it) and no input, as run.start_process starts a host's process."""
        argv = args[0] if len(args) == 1 else None
        launchable = (self.launcher is not None and isinstance(argv, list) and Launcher.runs(argv)
                      and kwargs.get("stderr") == subprocess.STDOUT and kwargs.get("stdin") == subprocess.DEVNULL
                      and hasattr(kwargs.get("stdout"), "name") and set(kwargs) <= {"stdout", "stderr", "stdin", "cwd", "env"})
        if not launchable:
            return super().popen(*args, **kwargs)
        assert self.launcher is not None and isinstance(argv, list), "checked above"
        return self.launcher.launch(argv, kwargs["stdout"].name, kwargs.get("env") or dict(os.environ),
                                    kwargs.get("cwd"), namespaces_of=self.pid)

    def config(self, **params):
        result = super().config(**params)
        self.cmd(self.tuning())
        return result

    def tuning(self) -> str:
        """The shell command that gives the host its IPv6, offload and TCP settings (testbed.batched runs it
        with the rest of the host's configuration)."""
        return (f"sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1 {TCP_SYSCTLS}; "
                f"ethtool -K {self.defaultIntf().name} tx off rx off >/dev/null 2>&1")

    def setARP(self, ip: str, mac: str) -> str:  # noqa: N802 - Mininet's name
        """A permanent neighbour entry (Mininet's static ARP and the job's aggregation address)."""
        return self.cmd(f"ip neigh replace {ip} lladdr {mac} dev {self.defaultIntf().name} nud permanent")
