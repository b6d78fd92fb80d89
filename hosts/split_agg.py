"""Split aggregation: the switches sum the on-time workers, a host aggregator adds the late ones.

A job with stragglers keeps in-network aggregation instead of waiting for them or leaving the
switches. The controller installs the job's tree with the aggregator host in the stragglers'
seat: one member of the tree stands for all of them, so the switches sum the on-time workers
and the aggregator as they sum any workers (aggnet.p4 needs nothing new; testbed.run plans it).
The stragglers send their gradients to the aggregator over TCP on host aggregation's wire
(hosts.host_agg). Each round the aggregator contributes, as a member of the tree, the stragglers'
gradients that came in and are not summed yet (zeros when none), under host aggregation's
rules with the staleness bound S (RoundBook, rounds opening when the previous one ends):

- a straggler that computes on round r's weights is waited for up to `wait_s` after round
  r - 1 ended: one that keeps up has its step r in round r (staleness 0), so a straggler
  that catches up is back in its own rounds at once;
- one that lags (computing on older weights) is not waited for, unless going on would leave
  its newest gradient more than S rounds behind: then the round waits for it. The first and
  the last round wait for everyone.

The switches' sum of round r (the on-time workers' step r and the late gradients) is what every
worker applies: the on-time workers get it from the switches, the stragglers from the aggregator,
with the newest round, so that a straggler pulls the rounds it missed instead of computing
them (hosts.train) and computes its next gradient on the newest weights. The aggregator's
OUT/NAME-agg.agg.json records the staleness it applied (per gradient, `staleness_counts`).
"""
from __future__ import annotations

import logging
from pathlib import Path

from .agent_config import AgentConfig, ConfigError
from .comm import AllReduce, Endpoint
from .host_agg import HostAggregator, Round, RoundBook, write_stats
from .process import setup_logging

log = logging.getLogger("aggnet.split_agg")


class SplitAggregator(HostAggregator):
    """A host aggregator whose rounds also go through the switches, as the stragglers' seat in the tree."""

    def __init__(self, endpoint: Endpoint, stragglers: list[str], book: RoundBook, member: AllReduce,
                 timeout_s: float = 30.0, replica: Endpoint | None = None):
        super().__init__(endpoint, stragglers, book, timeout_s, replica)
        self.member = member

    def complete(self, rnd: Round) -> Round:
        """The late gradients into the tree; what comes back is the round every worker applies."""
        return Round(rnd.index, self.member.allreduce(rnd.total), rnd.included)


def member_rank(config: AgentConfig, name: str) -> int:
    """`name`'s place in the job spec: the tree's members (the on-time workers and the aggregator)."""
    assert config.job is not None, "the config loader requires a job spec for scheme split"
    return [w.name for w in config.job.workers].index(name)


def run_split_aggregator(config: AgentConfig, out_dir: Path, source: str = "<agent config>") -> None:
    """The aggregator of a split job: serve its stragglers, contribute for them in the tree; OUT/NAME-agg.log
    and NAME-agg.agg.json."""
    from .allreduce import InNetworkAllReduce

    if config.aggregator is None or config.job is None:
        raise ConfigError(f"{source}: field 'aggregator': missing (needed to run a split aggregator)")
    name = config.aggregator.name + "-agg"
    setup_logging(out_dir, name)
    member = InNetworkAllReduce(config.job, member_rank(config, config.aggregator.name),
                                stall_timeout_s=config.timeout_s)
    server = SplitAggregator(config.aggregator, list(config.split_workers), RoundBook.from_config(config), member,
                             config.timeout_s, config.replica)
    log.info("seat of %s in job %d's tree, staleness bound %d", ", ".join(config.split_workers), config.job.job_id,
             config.staleness)
    try:
        stats = server.serve()
    finally:
        server.close()
        member.close()
    write_stats(out_dir, name, stats, config.staleness)
    log.info("done after %d rounds", stats.rounds)
