"""Packet I/O on Linux interfaces (AF_PACKET raw sockets), pcap-file ports and per-port capture.

A switch port is one raw socket bound to one interface, in promiscuous mode, that
never reports the frames it sent itself (PACKET_OUTGOING copies); or, with `--use-files`,
a FilePort: NAME_in.pcap is replayed into ingress, what leaves goes to NAME_out.pcap
(BMv2's files mode). Capture files use the classic libpcap format so tcpdump, Wireshark
and scapy read them as they are; every record reaches the file as it is written (one
write per frame), so a switch killed with SIGKILL leaves complete captures, as BMv2 does.
"""
from __future__ import annotations

import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator
from typing import BinaryIO

ETH_P_ALL = 0x0003
SOL_PACKET = 263
PACKET_ADD_MEMBERSHIP = 1
PACKET_MR_PROMISC = 1
PACKET_OUTGOING = 4
PACKET_QDISC_BYPASS = 20  # send straight to the driver: the traffic manager is the switch's queue
PACKET_IGNORE_OUTGOING = 23  # Linux >= 4.20: no copy of our own transmissions comes back to us
SOCKET_BUFFER_BYTES = 4 * 1024 * 1024
MAX_FRAME = 65535

PCAP_MAGIC = 0xA1B2C3D4
LINKTYPE_ETHERNET = 1


log = logging.getLogger("aggnet.switch")


class PortError(Exception):
    """A port that cannot be opened or is misconfigured (one line, exit code 2)."""

    exit_code = 2


def parse_port_spec(spec: str) -> tuple[int, str]:
    """Parse `PORT@IFACE` (simple_switch's `-i` syntax) into (port number, interface).

    As BMv2 reads it: whitespace around the number is skipped (p4c's STF driver passes the single
    argument `-i 0@pcap0`, whose value is ` 0@pcap0`), the name is everything after the `@`."""
    number, sep, ifname = spec.partition("@")
    number = number.strip()
    if not sep or not ifname or not number.isdigit():
        raise PortError(f"error: -i {spec!r}: expected PORT@IFACE, e.g. 1@s1-eth1")
    port = int(number)
    if not 0 <= port < 511:
        raise PortError(f"error: -i {spec!r}: port {port} out of range 0..510 (511 is the drop port)")
    return port, ifname


class PcapWriter:
    """Append Ethernet frames to a classic pcap file (microsecond timestamps).

    `append`: continue a capture file someone else wrote (the native engine, between engines).
    `max_bytes`: frames that would take the file past that many bytes are not recorded (0: no cap),
    so a capture left on for hours stays bounded; the first ones are kept, as `tcpdump -c` would.
    Unbuffered: each record is one write(), on the disk's page cache when write() returns."""

    def __init__(self, path: str, snaplen: int = MAX_FRAME, append: bool = False, max_bytes: int = 0):
        self.path = path
        self.snaplen = snaplen
        self.max_bytes = max_bytes
        self._file = open(path, "ab" if append else "wb", buffering=0)
        if self._file.tell() == 0:
            self._file.write(struct.pack("<IHHiIII", PCAP_MAGIC, 2, 4, 0, 0, snaplen, LINKTYPE_ETHERNET))
        self._size = self._file.tell()

    def write(self, data: bytes, timestamp: float | None = None) -> None:
        """Record one frame, stamped now unless a timestamp is given."""
        ts = time.time() if timestamp is None else timestamp
        sec = int(ts)
        usec = int(round((ts - sec) * 1_000_000))
        if usec >= 1_000_000:
            sec, usec = sec + 1, usec - 1_000_000
        captured = data[: self.snaplen]
        if self.max_bytes and self._size + 16 + len(captured) > self.max_bytes:
            return
        self._size += 16 + len(captured)
        self._file.write(struct.pack("<IIII", sec, usec, len(captured), len(data)) + captured)

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


def read_pcap(path: str) -> list[tuple[float, bytes]]:
    """Read a classic pcap file into (timestamp, frame) pairs; used by tests and tools."""
    with open(path, "rb") as f:
        return list(pcap_records(f, path))


def pcap_records(f: BinaryIO, path: str) -> Iterator[tuple[float, bytes]]:
    """The (timestamp, frame) records of an open pcap file, read as they are needed (a FIFO's writer may
    still be writing); PortError if it is not a little-endian microsecond pcap file."""
    header = f.read(24)
    if len(header) < 24:
        raise PortError(f"{path}: error: not a pcap file (too short)")
    magic = struct.unpack_from("<I", header, 0)[0]
    if magic != PCAP_MAGIC:
        raise PortError(f"{path}: error: not a little-endian microsecond pcap file (magic {magic:#x})")
    while len(record := f.read(16)) == 16:
        sec, usec, incl, _orig = struct.unpack("<IIII", record)
        if incl > MAX_FRAME:
            raise PortError(f"{path}: error: a record of {incl} bytes (at most {MAX_FRAME})")
        yield sec + usec / 1_000_000, f.read(incl)


def _set_fast_path_options(sock: socket.socket) -> None:
    """Performance only, best effort (older kernels lack them; recv() filters our own
    transmissions either way): every frame sent would otherwise be cloned back into this
    socket's receive queue, costing a copy in send() and a wasted recvfrom() per packet."""
    for option in (PACKET_IGNORE_OUTGOING, PACKET_QDISC_BYPASS):
        try:
            sock.setsockopt(SOL_PACKET, option, 1)
        except OSError:
            pass


class Port:
    """One switch port: a promiscuous raw socket on `ifname`, optional pcap per direction.

    `recv()` is non-blocking and returns None when nothing is waiting, so one loop can
    poll many ports. Counters (`rx_packets`, `tx_packets`, bytes) are kept here because
    the port is where packets are really seen.
    """

    def __init__(self, number: int, ifname: str, pcap_dir: str | None = None, pcap_max_bytes: int = 0):
        self.number = number
        self.pcap_max_bytes = pcap_max_bytes
        self.ifname = ifname
        self.rx_packets = self.rx_bytes = self.tx_packets = self.tx_bytes = self.tx_errors = self.rx_errors = 0
        try:
            ifindex = socket.if_nametoindex(ifname)
        except OSError:
            raise PortError(f"error: port {number}: no such interface {ifname!r}") from None
        # Protocol 0 receives nothing until bind(), so no frame of another interface sneaks in.
        self._sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        try:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER_BYTES)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER_BYTES)
            mreq = struct.pack("iHH8s", ifindex, PACKET_MR_PROMISC, 0, b"")
            self._sock.setsockopt(SOL_PACKET, PACKET_ADD_MEMBERSHIP, mreq)
            self._sock.bind((ifname, ETH_P_ALL))
            self._sock.setblocking(False)
            _set_fast_path_options(self._sock)
        except OSError as exc:
            self._sock.close()
            raise PortError(f"error: port {number}: cannot open {ifname!r}: {exc.strerror}") from None
        self.pcap_in: PcapWriter | None = None
        self.pcap_out: PcapWriter | None = None
        self.pcap_paths: tuple[str | None, str | None] = (None, None)  # what this port captures, per direction
        if pcap_dir:
            os.makedirs(pcap_dir, exist_ok=True)
            self.pcap_paths = (os.path.join(pcap_dir, f"{ifname}_in.pcap"), os.path.join(pcap_dir, f"{ifname}_out.pcap"))
            self.pcap_in, self.pcap_out = (PcapWriter(p, max_bytes=pcap_max_bytes) for p in self.pcap_paths)

    def fileno(self) -> int:
        return self._sock.fileno()

    def recv(self) -> bytes | None:
        """Return the next frame received on the interface, or None if none is waiting."""
        while True:
            try:
                data, addr = self._sock.recvfrom(MAX_FRAME)
            except (BlockingIOError, InterruptedError):
                return None
            except OSError:  # e.g. ENETDOWN: the link went down; the switch keeps running
                self.rx_errors += 1
                return None
            if addr[2] == PACKET_OUTGOING:
                continue
            self.rx_packets += 1
            self.rx_bytes += len(data)
            if self.pcap_in:
                self.pcap_in.write(data)
            return data

    def send(self, data: bytes) -> bool:
        """Transmit one frame; False when the kernel refused it (e.g. the link is down). Captured first, as
        the native engine does: once a frame is seen on the wire, its record is in the file."""
        if self.pcap_out:
            self.pcap_out.write(data)
        try:
            self._sock.send(data)
        except OSError:
            self.tx_errors += 1
            return False
        self.tx_packets += 1
        self.tx_bytes += len(data)
        return True

    def hand_over(self, engine_counts: dict[str, int] | None = None) -> None:
        """Another packet loop (the native engine) takes this port over, or gives it back with
        its counts: the pcap files are closed meanwhile and continued afterwards."""
        if engine_counts is None:
            self._close_captures()
            return
        for name in ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_errors", "rx_errors"):
            setattr(self, name, getattr(self, name) + engine_counts[name])
        self.pcap_in, self.pcap_out = (PcapWriter(p, append=True, max_bytes=self.pcap_max_bytes) if p else None
                                       for p in self.pcap_paths)

    def close(self) -> None:
        self._close_captures()
        self._sock.close()

    def _close_captures(self) -> None:
        for pcap in (self.pcap_in, self.pcap_out):
            if pcap:
                pcap.close()

    def stats(self) -> dict[str, int]:
        return {"rx_packets": self.rx_packets, "rx_bytes": self.rx_bytes,
                "tx_packets": self.tx_packets, "tx_bytes": self.tx_bytes, "tx_errors": self.tx_errors,
                "rx_errors": self.rx_errors}


class FilePort(Port):
    """A port of BMv2's files mode (`--use-files WAIT -i N@NAME`): frames arrive from NAME_in.pcap (see
    PcapReplay), what the switch sends to the port is written to NAME_out.pcap. It has no socket
    (fileno() is -1: the packet loops poll nothing for it). NAME_in.pcap must exist when the switch starts,
    as BMv2 opens it then; NAME_out.pcap is created empty."""

    def __init__(self, number: int, name: str, pcap_max_bytes: int = 0):
        self.number = number
        self.ifname = name
        self.pcap_max_bytes = pcap_max_bytes
        self.rx_packets = self.rx_bytes = self.tx_packets = self.tx_bytes = self.tx_errors = self.rx_errors = 0
        self.in_path = f"{name}_in.pcap"
        if not os.path.exists(self.in_path):
            raise PortError(f"error: port {number}: {self.in_path}: no such file (--use-files reads it)")
        self.pcap_paths = (None, f"{name}_out.pcap")
        self.pcap_in = None
        try:
            self.pcap_out = PcapWriter(f"{name}_out.pcap", max_bytes=pcap_max_bytes)
        except OSError as exc:
            raise PortError(f"error: port {number}: cannot write {name}_out.pcap: {exc.strerror}") from None

    def fileno(self) -> int:
        return -1

    def recv(self) -> bytes | None:
        return None

    def send(self, data: bytes) -> bool:
        self.tx_packets += 1
        self.tx_bytes += len(data)
        if self.pcap_out:
            self.pcap_out.write(data)
        return True

    def close(self) -> None:
        self._close_captures()


REPLAY_RETRY_S = 0.001  # a replay finding the switch's queue of injected frames full tries again after this


class PcapReplay:
    """Feeds the NAME_in.pcap files of FilePorts into ingress as BMv2's files mode does: after `wait`
    seconds, every file's records merged by timestamp (lowest port first on a tie), one after another
    with no pause (BMv2 keeps the order, not the spacing); a file's next record is read only when needed,
    so a FIFO works. One daemon thread; `inject(port, frame)` is the switch's, False while its queue of
    injected frames is full: a file's records wait for room (a file is the user's input, never dropped)."""

    def __init__(self, ports: list[FilePort], wait: float, inject: Callable[[int, bytes], bool]):
        self._ports = {port.number: port for port in ports}
        self._wait = wait
        self._inject = inject
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pcap-replay", daemon=True)

    def start(self) -> PcapReplay:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=1.0)

    def _run(self) -> None:
        if self._stop.wait(max(self._wait, 0)):
            return
        files = []
        try:
            heads: dict[int, tuple[float, bytes]] = {}
            readers: dict[int, Iterator[tuple[float, bytes]]] = {}
            for number, port in self._ports.items():
                f = open(port.in_path, "rb")
                files.append(f)
                readers[number] = pcap_records(f, port.in_path)
            for number in readers:
                self._advance(readers, heads, number)
            while heads and not self._stop.is_set():
                number = min(heads, key=lambda n: (heads[n][0], n))
                frame = heads[number][1]
                port = self._ports[number]
                port.rx_packets += 1
                port.rx_bytes += len(frame)
                while not self._inject(number, frame):
                    if self._stop.wait(REPLAY_RETRY_S):
                        return
                self._advance(readers, heads, number)
        except (OSError, PortError) as exc:  # the ports stay up, as after the last record
            log.error("%s", exc if isinstance(exc, PortError) else f"error: {exc.filename}: {exc.strerror}")
        finally:
            for f in files:
                f.close()

    @staticmethod
    def _advance(readers: dict[int, Iterator[tuple[float, bytes]]], heads: dict[int, tuple[float, bytes]],
                 number: int) -> None:
        record = next(readers[number], None)
        if record is None:
            heads.pop(number, None)
        else:
            heads[number] = record
