"""Background traffic: paced UDP or TCP flows with on/off patterns, run inside Mininet hosts.

    python -m hosts traffic recv --proto udp --port 5001 --duration 30 --out logs/bg1.recv.json
    python -m hosts traffic send --proto udp --dst 10.0.0.4 --port 5001 --rate-mbps 4 \
        --delay 5 --duration 20 --on 2 --off 1 --out logs/bg1.send.json

A sender waits `delay` seconds, then for `duration` seconds sends `size`-byte payloads at
`rate_mbps` while "on" (the first `on` seconds of every `on + off` period; `off` 0 = always
on). Pacing is a token bucket checked before every write, so the long-run rate holds even
when a sleep oversleeps. TCP gets the same pacing (rate 0 = as fast as the socket takes it).
Both ends write a JSON summary (bytes, packets, seconds) for the scenario's results, also
when SIGTERM stops them early. The
switches are emulated in software, so the useful rates here are a few Mb/s, not line rate.
"""
from __future__ import annotations

import argparse
import json
import signal
import socket
import threading
import time
from collections.abc import Callable

PROTOCOLS = ("udp", "tcp")
_stop = threading.Event()  # set by SIGTERM: a flow stopped early still writes its summary


class TrafficError(Exception):
    """Bad flow arguments; one line, exit 2."""

    exit_code = 2


class FlowError(RuntimeError):
    """The flow's socket failed (no route, refused, ...); one line, exit 1."""

    exit_code = 1


def is_on(t: float, on_s: float, off_s: float) -> bool:
    """Whether the flow sends at `t` seconds after it started."""
    if off_s <= 0:
        return True
    return t % (on_s + off_s) < on_s


def pace(write: Callable[[bytes], int], size: int, rate_mbps: float, duration_s: float, on_s: float,
         off_s: float, clock: Callable[[], float] = time.monotonic) -> dict:
    """Call `write(payload)` at `rate_mbps` (0: unpaced) while on, for `duration_s`; returns the totals."""
    payload = bytes(size)
    start = clock()
    sent_bytes = packets = 0
    credit = 0.0  # bytes we may still send in the current on-period
    last = start
    rate_bps = rate_mbps * 1e6 / 8
    while True:
        now = clock()
        t = now - start
        if t >= duration_s or _stop.is_set():
            break
        if not is_on(t, on_s, off_s):
            credit, last = 0.0, now
            period = on_s + off_s
            time.sleep(min(period - t % period, duration_s - t))
            continue
        if rate_bps:
            credit = min(credit + (now - last) * rate_bps, max(size, rate_bps * 0.01))
            last = now
            if credit < size:
                time.sleep((size - credit) / rate_bps)
                continue
            credit -= size
        sent_bytes += write(payload)
        packets += 1
    return {"bytes": sent_bytes, "packets": packets, "seconds": round(clock() - start, 3)}


def send(proto: str, dst: str, port: int, rate_mbps: float, size: int, duration_s: float, on_s: float = 1.0,
         off_s: float = 0.0) -> dict:
    """One flow to dst:port; a TCP flow connects first (its receiver must be listening)."""
    if proto == "udp":
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            return pace(lambda p: sock.sendto(p, (dst, port)), size, rate_mbps, duration_s, on_s, off_s)
    with socket.create_connection((dst, port), timeout=10) as sock:
        return pace(lambda p: _send_all(sock, p), size, rate_mbps, duration_s, on_s, off_s)


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
        p.add_argument("--duration", type=float, required=True, help="seconds")
        p.add_argument("--out", help="write the JSON summary here (default: stdout)")
        if role == "send":
            p.add_argument("--dst", required=True)
            p.add_argument("--rate-mbps", type=float, default=1.0, help="0: as fast as possible")
            p.add_argument("--size", type=int, default=1000, help="bytes per write")
            p.add_argument("--delay", type=float, default=0.0, help="seconds to wait before sending")
            p.add_argument("--on", type=float, default=1.0, help="seconds on per period")
            p.add_argument("--off", type=float, default=0.0, help="seconds off per period (0: always on)")


def check(args: argparse.Namespace) -> None:
    if not 0 < args.port < 65536:
        raise TrafficError(f"--port: {args.port} is not a port number")
    if args.duration <= 0:
        raise TrafficError(f"--duration: must be positive, got {args.duration}")
    if args.role == "send":
        if args.rate_mbps < 0 or args.delay < 0 or args.on <= 0 or args.off < 0:
            raise TrafficError("--rate-mbps, --delay, --off must be >= 0 and --on > 0")
        if not 1 <= args.size <= 65000:
            raise TrafficError(f"--size: must be 1..65000 bytes, got {args.size}")


def run_flow(args: argparse.Namespace) -> None:
    """The traffic role (hosts.roles): one flow as `args` says, its JSON summary to --out or stdout."""
    signal.signal(signal.SIGTERM, lambda *_: _stop.set())
    check(args)
    try:
        if args.role == "send":
            _stop.wait(args.delay)
            summary = send(args.proto, args.dst, args.port, args.rate_mbps, args.size, args.duration, args.on,
                           args.off)
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
