"""Helpers for tests that start real processes on this machine: free ports, waiting for a listener or
for anything else to happen.

A wait has no deadline of its own: how long something takes depends on how busy the machine is, so
a test waits for the event, and only the per-test timeout (pytest-timeout) ends one that never comes.
A process that exits while being waited for fails the wait at once.

Tests `import procs` (pytest puts tests/ on sys.path)."""
from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition: Callable[[], T], proc: subprocess.Popen | None = None,
               why: Callable[[], str] = lambda: "") -> T:
    """`condition()`'s first true value, polled; fails with why() if `proc` exits first."""
    while not (value := condition()):
        assert proc is None or proc.poll() is None, why()
        time.sleep(0.05)
    return value


def listening(port: int) -> bool:
    """Something accepts connections on 127.0.0.1:port."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for(port: int, proc: subprocess.Popen, log: Path) -> None:
    """Until something accepts connections on 127.0.0.1:port; fails with the log if `proc` exits first."""
    wait_until(lambda: listening(port), proc, lambda: log.read_text() if log.exists() else "no log")


def stop_process(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM (a switch then closes its ports and logs), SIGKILL after `grace_s`; safe on an exited process."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def running_switch(program: Path | None, log: Path, *interfaces: str, device_id: int = 1,
                   options: tuple[str, ...] = ()) -> Iterator[tuple[int, int]]:
    """An `aggnet switch` process running `program` (None: --no-p4; ports `N@IFACE`, more flags in `options`);
    yields (thrift port, gRPC port). Stopped with SIGTERM (killed if it hangs) when the block ends, also on failure."""
    thrift_port, grpc_port = free_port(), free_port()
    args = [arg for spec in interfaces for arg in ("-i", spec)] + list(options)
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(device_id), *args,
                             "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--thrift-port", str(thrift_port),
                             "--log", str(log), str(program) if program else "--no-p4"],
                            cwd=Path(__file__).resolve().parent.parent)
    try:
        wait_for(thrift_port, proc, log)
        yield thrift_port, grpc_port
    finally:
        stop_process(proc)


@contextlib.contextmanager
def veth_pairs(pairs: list[tuple[str, str]]) -> Iterator[None]:
    """Veth pairs (switch side, peer side), up and without IPv6 chatter; deleted when the block ends.
    The caller skips without root and runs under flock /tmp/aggnet-net.lock."""
    try:
        for sw, peer in pairs:
            subprocess.run(["ip", "link", "add", sw, "type", "veth", "peer", "name", peer], check=True)
            for ifname in (sw, peer):
                subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{ifname}.disable_ipv6=1"], check=True)
                subprocess.run(["ip", "link", "set", ifname, "up"], check=True)
        yield
    finally:
        for sw, _ in pairs:
            subprocess.run(["ip", "link", "del", sw], check=False, capture_output=True)


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@contextlib.contextmanager
def peak_growth(pid: int) -> Iterator[list[float]]:
    """Measures how far process `pid`'s resident memory rose above where it was while the block ran:
    the list yielded holds that figure (MiB) once the block ends. Resets the kernel's high-water mark
    (VmHWM) first, so the peak is this block's, however short it was."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib(pid, "VmRSS")
    growth: list[float] = []
    yield growth
    growth.append((_status_kib(pid, "VmHWM") - before) / 1024)
