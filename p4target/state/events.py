"""What the pipeline reports to the control plane: digests, log lines and per-port packet counts."""
from __future__ import annotations

import collections
from dataclasses import dataclass


@dataclass
class PortStats:
    rx_packets: int = 0
    rx_bytes: int = 0
    tx_packets: int = 0
    tx_bytes: int = 0


class Events:
    """The digests queued (name, field values) and log lines (log_msg output, packet errors) in arrival order,
    and the ports' counts; the Python pipeline appends to the list and deque themselves (never replaced). The
    native engine queues its events for Python (p4target/native/store/events.py)."""

    def __init__(self) -> None:
        self.digests: list[tuple[str, tuple[int, ...]]] = []
        self.log: collections.deque[str] = collections.deque(maxlen=1000)
        self.port_stats: dict[int, PortStats] = {}

    def drain_digests(self) -> list[tuple[str, tuple[int, ...]]]:
        """Remove and return every queued (digest name, field values) in arrival order."""
        out = list(self.digests)
        self.digests.clear()  # in place: the pipeline holds a reference to this list
        return out

    def port(self, port: int) -> PortStats:
        """Stats record for `port`, created on first use."""
        stats = self.port_stats.get(port)
        if stats is None:
            stats = self.port_stats[port] = PortStats()
        return stats

    def clear(self) -> None:
        """Forget the queued digests (a pipeline reset)."""
        self.digests.clear()
