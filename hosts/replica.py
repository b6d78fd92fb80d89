"""The aggregator's replica: holds a copy of every closed round and takes over when the
aggregator's host or process dies, so losing it loses no step.

    python -m hosts replica --config job.json --out DIR

Standby: the aggregator connects first (its feed, introduced with REPLICA_RANK) and sends
each closed round before any worker sees it; the replica records it and acknowledges.
A "bye" on the feed means the job finished: exit 0. The feed closing without one means
the aggregator died: the replica becomes the aggregator on its own endpoint (workers fail
over to it and resend their unanswered gradient, see hosts.host_agg) and serves until
every worker said bye. A split aggregator's replica takes its seat in the tree too
(hosts.split_agg.SplitReplica).
"""
from __future__ import annotations

import logging
from pathlib import Path

from .agent_config import AgentConfig, ConfigError
from .comm import Endpoint, listen
from .host_agg import AggStats, HostAggregator, RoundBook, decode_round, follow_feed, write_stats
from .process import setup_logging
from .split_agg import SplitReplica

log = logging.getLogger("aggnet.replica")


class Replica:
    """Standby copy of a host aggregator; `serve()` returns (took_over, stats)."""

    def __init__(self, endpoint: Endpoint, workers: list[str], book: RoundBook, timeout_s: float = 30.0):
        self.endpoint = endpoint
        self.workers = list(workers)
        self.book = book
        self.timeout_s = timeout_s
        self.context = f"replica {endpoint.name}"
        self._server = listen(endpoint, backlog=len(workers) + 1)

    def serve(self) -> tuple[bool, AggStats]:
        if not follow_feed(self._server, self.context, self.timeout_s, self.book,
                           lambda data: self.book.apply(decode_round(data))):
            return False, self.book.stats
        aggregator = HostAggregator(self.endpoint, self.workers, self.book, self.timeout_s, server=self._server)
        return True, aggregator.serve()

    def close(self) -> None:
        self._server.close()


def run_replica(config: AgentConfig, out_dir: Path, source: str = "<agent config>") -> None:
    """The replica host process: stand by for the job in `config`, take over if needed;
    OUT/NAME-replica.log and NAME-replica.agg.json."""
    if config.replica is None:
        raise ConfigError(f"{source}: field 'replica': missing (needed to run a replica)")
    name = config.replica.name + "-replica"
    setup_logging(out_dir, name)
    replica: Replica | SplitReplica
    if config.scheme == "split":  # it stands by in the tree too (hosts.split_agg)
        replica = SplitReplica(config)
    else:
        replica = Replica(config.replica, [w.name for w in config.workers], RoundBook.from_config(config),
                          config.timeout_s)
    try:
        took_over, stats = replica.serve()
    finally:
        replica.close()
    write_stats(out_dir, name, stats, config.staleness, took_over)
