"""Helpers for tests that start real processes on this machine: free ports, waiting for a listener.

Tests `import procs` (pytest puts tests/ on sys.path)."""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    """Until something accepts connections on 127.0.0.1:port; fails with the log if `proc` exits first."""
    deadline = time.monotonic() + timeout_s
    while True:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        assert proc.poll() is None and time.monotonic() < deadline, log.read_text() if log.exists() else "no log"
        time.sleep(0.1)


def stop_process(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM (a switch then closes its ports and logs), SIGKILL after `grace_s`; safe on an exited process."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
