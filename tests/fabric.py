"""Test fixtures for aggnet.p4 on the embedded target: program a switch, build and read packets,
and relay real UDP datagrams through a fabric of Pipelines (loopback all-reduce tests).

Tests `import fabric` (pytest puts tests/ on sys.path).
"""
from __future__ import annotations

import functools
import ipaddress
import os
import random
import socket
import threading
from dataclasses import dataclass, field

import numpy as np

from hosts import codec
from p4target import state as st
from p4target.frontend import load_program
from p4target.native.pipeline import make_pipeline
from p4target.pipeline import Pipeline
from protocol import wire

P4SRC = os.path.join(os.path.dirname(__file__), "..", "p4src")
AGG_IP = "10.0.255.254"
SWITCH_MAC = "02:00:00:00:ff:fe"


def host_ip(i: int) -> str:
    return f"10.0.0.{i}"


def host_mac(i: int) -> str:
    return f"02:00:00:00:00:{i:02x}"


@functools.cache
def _program(lanes: int):
    name = "aggnet.p4" if lanes == 32 else f"aggnet_l{lanes}.p4"
    return load_program(os.path.join(P4SRC, name))


def switch(lanes: int = 32, engine: str = "python") -> Pipeline:
    """A fresh aggnet switch on `engine` (the front-end result is cached; compiling a Pipeline is cheap)."""
    return make_pipeline(_program(lanes), engine)


@dataclass
class Child:
    """A child of a switch in one job's tree: where it is attached, and its bitmap bit."""

    port: int
    index: int
    src_ip: str | None = None  # only when several children share the port


def install_job(sw: Pipeline, job_id: int, slot_base: int, slot_count: int, children: list[Child],
                is_root: bool = True, parent_port: int = 0, aggregate: bool = True, mcast_grp: int | None = None) -> None:
    """What the controller's tree installer does for one switch of one job."""
    s = sw.state
    grp = mcast_grp if mcast_grp is not None else job_id + 1
    s.insert_entry("AggIngress.agg_job", st.TableEntry(
        {"hdr.agg.job_id": st.Exact(job_id)}, "AggIngress.set_job",
        {"slot_base": slot_base, "slot_count": slot_count, "children": len(children), "aggregate": int(aggregate),
         "is_root": int(is_root), "parent_port": parent_port, "mcast_grp": grp}))
    for c in children:
        src = st.Ternary(int(ipaddress.IPv4Address(c.src_ip)), 0xFFFFFFFF) if c.src_ip else st.Ternary(0, 0)
        s.insert_entry("AggIngress.agg_child", st.TableEntry(
            {"hdr.agg.job_id": st.Exact(job_id), "standard_metadata.ingress_port": st.Exact(c.port),
             "hdr.ipv4.srcAddr": src}, "AggIngress.set_child", {"index": c.index}, priority=1))
    ports = sorted({c.port for c in children})
    s.mc_group_insert(grp, [(p, 0) for p in ports])


def install_shared_job(sw: Pipeline, job_id: int, pool_base: int, pool_size: int, children: list[Child],
                       mcast_grp: int | None = None) -> None:
    """A job rooted here that shares the pool [pool_base, pool_base + pool_size) (set_shared_job)."""
    grp = mcast_grp if mcast_grp is not None else job_id + 1
    sw.state.insert_entry("AggIngress.agg_job", st.TableEntry(
        {"hdr.agg.job_id": st.Exact(job_id)}, "AggIngress.set_shared_job",
        {"slot_base": pool_base, "slot_count": pool_size, "children": len(children), "mcast_grp": grp}))
    for c in children:
        sw.state.insert_entry("AggIngress.agg_child", st.TableEntry(
            {"hdr.agg.job_id": st.Exact(job_id), "standard_metadata.ingress_port": st.Exact(c.port),
             "hdr.ipv4.srcAddr": st.Ternary(0, 0)}, "AggIngress.set_child", {"index": c.index}, priority=1))
    sw.state.mc_group_insert(grp, [(p, 0) for p in sorted({c.port for c in children})])


def install_host(sw: Pipeline, port: int, mac: str, ip: str, udp_port: int = wire.AGG_PORT) -> None:
    sw.state.insert_entry("AggEgress.agg_host", st.TableEntry(
        {"standard_metadata.egress_port": st.Exact(port)}, "AggEgress.set_host",
        {"mac": int(mac.replace(":", ""), 16), "ip": int(ipaddress.IPv4Address(ip)), "udp_port": udp_port}))


def star(n: int, job_id: int = 1, slot_base: int = 0, slot_count: int = 8, lanes: int = 32,
         engine: str = "python") -> Pipeline:
    """One switch, hosts 1..n on ports 1..n, aggregating at the root."""
    sw = switch(lanes, engine)
    install_job(sw, job_id, slot_base, slot_count, [Child(p, p - 1) for p in range(1, n + 1)])
    for p in range(1, n + 1):
        install_host(sw, p, host_mac(p), host_ip(p))
    return sw


def packet(job_id: int, slot: int, seq: int, values, pool: int = 0, retx: bool = False, src: int = 1,
           lanes: int = 32, workers: int = 1, scale: int = 0, flags: int = 0, dst: str = AGG_IP) -> bytes:
    """A contribution frame from host `src` (IP 10.0.0.src) to `dst`."""
    vals = np.zeros((1, lanes), dtype=np.int32)
    v = np.asarray(values, dtype=np.int64)
    vals[0, :v.size] = v.astype(np.int32)
    f = flags | (wire.FLAG_POOL if pool else 0) | (wire.FLAG_RETX if retx else 0)
    payload = codec.encode(job_id, slot, seq, f, vals, workers=workers, scale=scale).tobytes()
    return codec.frame(payload, host_mac(src), SWITCH_MAC, host_ip(src), dst, wire.AGG_PORT)


@dataclass
class Out:
    """One packet that left a switch, decoded."""

    port: int
    raw: bytes  # the frame as it left, to feed into the next switch
    frame: codec.Frame
    agg: np.void | None  # the decoded agg packet (None if not an agg packet)

    @property
    def values(self) -> list[int]:
        return self.agg["values"].tolist()

    def flag(self, bit: int) -> bool:
        return bool(int(self.agg["flags"]) & bit)


def send(sw: Pipeline, port: int, data: bytes, lanes: int = 32) -> list[Out]:
    """Run one frame through the switch; decode what leaves."""
    out = []
    for p, frame in sw.process(port, data):
        fr = codec.parse_frame(frame)
        agg = codec.decode(fr.payload, lanes)[0] if len(fr.payload) == wire.packet_bytes(lanes) else None
        out.append(Out(p, frame, fr, agg))
    return out


def counter(sw: Pipeline, name: str, job_id: int = 1) -> int:
    return sw.state.counter_read(f"AggIngress.agg_{name}", job_id)[0]


# ---------------------------------------------------------------------------
# A fabric of switches behind a real UDP socket (the loopback all-reduce harness)


@dataclass
class Fabric:
    """Switches joined by links; hosts are real UDP sockets on 127.0.0.1.

    Workers send their datagrams to `addr` (the fabric's socket); the sender's address tells
    which switch port it is attached to. Each datagram is framed (Ethernet/IPv4/UDP), run
    through the switch Pipelines across links, and what leaves on a host port is checked for
    the host's addresses and sent to that host's socket. `loss` drops each frame on each link
    traversal with that probability (seeded).
    """

    switches: dict[str, Pipeline]
    links: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    hosts: dict[tuple[str, int], tuple[int, tuple[str, int]]] = field(default_factory=dict)
    loss: float = 0.0
    seed: int = 0

    def __post_init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
        self.addr = self.sock.getsockname()
        self.rng = random.Random(self.seed)
        self.by_addr: dict[tuple[str, int], tuple[str, int, int]] = {}
        self.delivered = 0
        self.dropped = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def link(self, a: str, pa: int, b: str, pb: int) -> None:
        self.links[(a, pa)] = (b, pb)
        self.links[(b, pb)] = (a, pa)

    def attach(self, sw: str, port: int, host: int, addr: tuple[str, int]) -> None:
        """Host number `host` (10.0.0.host) whose socket is `addr` hangs off sw:port."""
        self.hosts[(sw, port)] = (host, addr)
        self.by_addr[addr] = (sw, port, host)

    def start(self) -> Fabric:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self.sock.close()

    def _lost(self) -> bool:
        if self.loss and self.rng.random() < self.loss:
            self.dropped += 1
            return True
        return False

    def _run(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                payload, src = self.sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                self._inject(payload, src)
            except Exception as exc:  # noqa: BLE001 - a test harness: report, keep relaying
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _inject(self, payload: bytes, src: tuple[str, int]) -> None:
        sw, port, host = self.by_addr[src]
        if self._lost():
            return
        frame = codec.frame(payload, host_mac(host), SWITCH_MAC, host_ip(host), AGG_IP, wire.AGG_PORT,
                            wire.AGG_PORT)
        work = [(sw, port, frame)]
        while work:
            sw, port, frame = work.pop(0)
            for out_port, out in self.switches[sw].process(port, frame):
                if self._lost():
                    continue
                if (sw, out_port) in self.links:
                    work.append((*self.links[(sw, out_port)], out))
                    continue
                host, addr = self.hosts[(sw, out_port)]
                fr = codec.parse_frame(out)
                if (fr.dst_ip, fr.dst_mac, fr.dport) != (host_ip(host), host_mac(host), wire.AGG_PORT):
                    raise AssertionError(f"{sw}:{out_port}: result addressed to {fr.dst_ip}/{fr.dst_mac}:{fr.dport}, "
                                         f"not host {host}")
                if (fr.src_ip, fr.src_mac) != (AGG_IP, SWITCH_MAC):
                    raise AssertionError(f"{sw}:{out_port}: result from {fr.src_ip}/{fr.src_mac}, "
                                         f"not the aggregation address")
                self.sock.sendto(fr.payload, addr)
                self.delivered += 1
