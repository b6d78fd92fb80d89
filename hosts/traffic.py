"""Background traffic: paced UDP or TCP flows following a schedule, run inside Mininet hosts.

    python -m hosts traffic recv --proto udp --port 5001 --duration 30 --out logs/bg1.recv.json
    python -m hosts traffic send --proto udp --dst 10.0.0.4 --port 5001 --rate-mbps 4 \
        --delay 5 --duration 20 --on 2 --off 1 --out logs/bg1.send.json
    python -m hosts traffic send --proto tcp --dst 10.0.0.4 --port 5002 --schedule flow.json ...

A sender follows a schedule of intervals [start, end) with a rate each, seconds after its start:
at any time it sends `size`-byte payloads at the sum of the rates of the intervals it is in, and
nothing between them. The command line makes one of on/off periods (after `delay` seconds, for
`duration` seconds, on for the first `on` of every `on + off`; `off` 0 = always on), or reads one
(--schedule: {"start": T, "intervals": [[START, END, RATE_MBPS], ...]}, T on time.monotonic(), the
clock every process of the machine shares, so that senders started at different moments keep one
timeline: testbed.timeline). Pacing is a token bucket checked before every write, so the long-run
rate holds even when a sleep oversleeps. TCP gets the same pacing (rate 0 on the command line = as
fast as the socket takes it). Both ends write a JSON summary (bytes, packets, seconds) for the
scenario's results, also when SIGTERM stops them early. The switches are emulated in software, so
the useful rates here are a few Mb/s, not line rate (a time-scaled scenario divides the cluster's).
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

PROTOCOLS = ("udp", "tcp")
_stop = threading.Event()  # set by SIGTERM: a flow stopped early still writes its summary
Interval = tuple[float, float, float]  # (start_s, end_s, rate_mbps); rate inf: as fast as the socket takes it


class TrafficError(Exception):
    """Bad flow arguments; one line, exit 2."""

    exit_code = 2


class FlowError(RuntimeError):
    """The flow's socket failed (no route, refused, ...); one line, exit 1."""

    exit_code = 1


def periodic(start_s: float, duration_s: float, on_s: float, off_s: float, rate_mbps: float) -> tuple[Interval, ...]:
    """An on/off flow as intervals: on for on_s of every on_s + off_s from start_s (off_s 0: always on)."""
    end = start_s + duration_s
    if off_s <= 0:
        return ((start_s, end, rate_mbps),)
    out = []
    t = start_s
    while t < end:
        out.append((t, min(t + on_s, end), rate_mbps))
        t += on_s + off_s
    return tuple(out)


def rate_at(intervals: Sequence[Interval], t: float) -> float:
    """The schedule's rate at t (Mb/s): the sum over the intervals t is in."""
    return sum(rate for start, end, rate in intervals if start <= t < end)


def pace(write: Callable[[bytes], int], size: int, intervals: Sequence[Interval],
         clock: Callable[[], float] = time.monotonic, start: float | None = None) -> dict:
    """Call `write(payload)` as the schedule says (seconds after `start`, default now) until its last
    interval ends; returns the totals."""
    payload = bytes(size)
    start = clock() if start is None else start
    end = max((e for _, e, _ in intervals), default=0.0)
    sent_bytes = packets = 0
    credit = 0.0  # bytes we may still send at the current rate
    last = clock()
    while True:
        now = clock()
        t = now - start
        if t >= end or _stop.is_set():
            break
        rate_bps = rate_at(intervals, t) * 1e6 / 8
        if not rate_bps:  # idle until the next interval starts
            credit, last = 0.0, now
            _stop.wait(min((s for s, _, _ in intervals if s > t), default=end) - t)
            continue
        if math.isfinite(rate_bps):
            credit = min(credit + (now - last) * rate_bps, max(size, rate_bps * 0.01))
            last = now
            if credit < size:
                time.sleep((size - credit) / rate_bps)
                continue
            credit -= size
        sent_bytes += write(payload)
        packets += 1
    return {"bytes": sent_bytes, "packets": packets, "seconds": round(clock() - start, 3)}


def send(proto: str, dst: str, port: int, size: int, intervals: Sequence[Interval], start: float | None = None) -> dict:
    """One flow to dst:port following `intervals` (see pace); a TCP flow connects first (its receiver
    must be listening)."""
    if proto == "udp":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            return pace(lambda p: sock.sendto(p, (dst, port)), size, intervals, start=start)
    with socket.create_connection((dst, port), timeout=10) as sock:
        return pace(lambda p: _send_all(sock, p), size, intervals, start=start)


def _send_all(sock: socket.socket, payload: bytes) -> int:
    """sendall, counted like sendto: the bytes written."""
    sock.sendall(payload)
    return len(payload)


def receive(proto: str, port: int, duration_s: float, bind: str = "0.0.0.0",
            ready: Callable[[int], None] | None = None) -> dict:
    """Count what arrives on `port` for `duration_s` seconds (TCP: one connection at a time).

    `ready(port)` is called once the socket listens, with the port it got (port 0: any free one).
    """
    kind = socket.SOCK_DGRAM if proto == "udp" else socket.SOCK_STREAM
    total = {"bytes": 0, "packets": 0}
    with socket.socket(socket.AF_INET, kind) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bind, port))
        if proto == "tcp":
            sock.listen(4)
        if ready:
            ready(sock.getsockname()[1])
        end = time.monotonic() + duration_s
        conn: socket.socket | None = None
        while (left := end - time.monotonic()) > 0 and not _stop.is_set():
            try:
                if proto == "tcp" and conn is None:
                    sock.settimeout(left)
                    conn, _ = sock.accept()
                source = sock if conn is None else conn
                source.settimeout(min(left, 0.5))
                data = source.recv(65536)
            except TimeoutError:
                continue
            if not data and conn is not None:  # TCP peer closed: wait for the next connection
                conn.close()
                conn = None
                continue
            total["bytes"] += len(data)
            total["packets"] += 1
        if conn is not None:
            conn.close()
    return total


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="role", required=True)
    for role in ("send", "recv"):
        p = sub.add_parser(role)
        p.add_argument("--proto", choices=PROTOCOLS, default="udp")
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--duration", type=float, required=role == "recv", help="seconds")
        p.add_argument("--out", help="write the JSON summary here (default: stdout)")
        if role == "send":
            p.add_argument("--dst", required=True)
            p.add_argument("--rate-mbps", type=float, default=1.0, help="0: as fast as possible")
            p.add_argument("--size", type=int, default=1000, help="bytes per write")
            p.add_argument("--delay", type=float, default=0.0, help="seconds to wait before sending")
            p.add_argument("--on", type=float, default=1.0, help="seconds on per period")
            p.add_argument("--off", type=float, default=0.0, help="seconds off per period (0: always on)")
            p.add_argument("--schedule", help="JSON file {start, intervals}: the schedule instead of --delay, "
                                              "--duration, --rate-mbps, --on, --off")


def check(args: argparse.Namespace) -> None:
    if not 0 < args.port < 65536:
        raise TrafficError(f"--port: {args.port} is not a port number")
    if args.role == "send" and (args.schedule is None) == (args.duration is None):
        raise TrafficError("--duration or --schedule: give one")
    if args.duration is not None and args.duration <= 0:
        raise TrafficError(f"--duration: must be positive, got {args.duration}")
    if args.role == "send":
        if args.rate_mbps < 0 or args.delay < 0 or args.on <= 0 or args.off < 0:
            raise TrafficError("--rate-mbps, --delay, --off must be >= 0 and --on > 0")
        if not 1 <= args.size <= 65000:
            raise TrafficError(f"--size: must be 1..65000 bytes, got {args.size}")


def schedule(args: argparse.Namespace) -> tuple[list[Interval], float]:
    """The sender's intervals and when they start (time.monotonic())."""
    if args.schedule is None:
        return list(periodic(0.0, args.duration, args.on, args.off, args.rate_mbps or math.inf)), \
            time.monotonic() + args.delay
    try:
        data = json.loads(Path(args.schedule).read_text())
        intervals = [(float(s), float(e), float(r)) for s, e, r in data["intervals"]]
        start = float(data["start"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise TrafficError(f"--schedule: {args.schedule}: not a schedule ({exc})") from None
    if any(not (0 <= s < e and r > 0) for s, e, r in intervals):
        raise TrafficError(f"--schedule: {args.schedule}: every interval needs 0 <= start < end and a rate > 0")
    return intervals, start


def run_flow(args: argparse.Namespace) -> None:
    """The traffic role (hosts.roles): one flow as `args` says, its JSON summary to --out or stdout."""
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    check(args)
    try:
        if args.role == "send":
            intervals, start = schedule(args)
            summary = send(args.proto, args.dst, args.port, args.size, intervals, start)
        else:
            summary = receive(args.proto, args.port, args.duration)
    except OSError as exc:
        raise FlowError(str(exc)) from None
    text = json.dumps(summary)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")
    else:
        print(text)
