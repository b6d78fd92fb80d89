"""Helpers for training tests: free loopback ports and running one function per rank in threads.

Tests `import workers` (pytest puts tests/ on sys.path).
"""
from __future__ import annotations

import socket
import threading
from collections.abc import Callable

from hosts.comm import Endpoint


def free_ports(n: int, kind: int = socket.SOCK_STREAM) -> list[int]:
    """n distinct ports that were free a moment ago on 127.0.0.1."""
    socks = [socket.socket(socket.AF_INET, kind) for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def endpoints(n: int) -> list[Endpoint]:
    """Workers h1..hn on free loopback TCP ports, in rank order."""
    return [Endpoint(f"h{i + 1}", "127.0.0.1", port) for i, port in enumerate(free_ports(n))]


def run_ranks(fn: Callable[[int], object], n: int, timeout_s: float = 120) -> tuple[list, list[BaseException | None]]:
    """Run fn(rank) for every rank in its own thread; (results, errors) by rank."""
    results: list = [None] * n
    errors: list[BaseException | None] = [None] * n

    def work(rank: int) -> None:
        try:
            results[rank] = fn(rank)
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            errors[rank] = exc

    threads = [threading.Thread(target=work, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout_s)
        assert not t.is_alive(), "a rank did not finish in time"
    return results, errors


def serve_in_thread(server) -> tuple[threading.Thread, dict]:
    """`server.serve()` (a host or split aggregator) on a thread of its own, the server closed when it ends:
    its stats in out["stats"], or what it raised in out["error"] (the test checks)."""
    out: dict = {}

    def serve() -> None:
        try:
            out["stats"] = server.serve()
        except BaseException as exc:  # noqa: BLE001 - checked by the test
            out["error"] = exc
        finally:
            server.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread, out
