"""`--scale auto` (testbed/autoscale.py): the value it parses to, the traffic it predicts from a job's
plan, and the F it chooses from a probe's CPU cost per packet hop."""
from __future__ import annotations

import dataclasses

import pytest

from config import ConfigError, load
from controller.installer import plan_job
from controller.placement import Job
from controller.tenants import admit
from controller.topology import load_topology
from protocol.wire import packet_bytes
from testbed import autoscale
from testbed.config import RunConfig
from testbed.timescale import AUTO, step_up


def test_scale_takes_a_factor_or_auto_and_steps_round_up():
    assert load(RunConfig, {"scale": "auto"}, "<t>").scale == AUTO
    assert load(RunConfig, {"scale": 2.5}, "<t>").scale == 2.5
    with pytest.raises(ConfigError, match="scale"):
        load(RunConfig, {"scale": "0.5"}, "<t>")
    assert (step_up(1), step_up(3.84), step_up(6.01), step_up(1e9)) == (1, 4, 8, 1000)


def plan(topo_name: str, workers: list[str], k: int):
    topo = load_topology(f"topologies/{topo_name}.yaml")
    tenancy = admit(topo, [Job("job1", tuple(workers), k=k, slots=64)], "soar")
    return topo, plan_job(tenancy.in_network()[0], 1)


def test_a_chunks_hops_and_busiest_link_come_from_the_plan():
    topo, star = plan("star4", ["h1", "h2", "h3", "h4"], 1)
    hops, link_s = autoscale.chunk_load(topo, star, 364)
    frame_bits = 8 * (packet_bytes(364) + autoscale.FRAME_OVERHEAD)
    assert hops == 8 and link_s == pytest.approx(frame_bits / 100e6)  # each worker: one up, one down, 100 Mb/s
    topo, tree = plan("fattree4", [f"h{i}" for i in range(1, 17)], 3)
    hops, link_s = autoscale.chunk_load(topo, tree, 364)
    assert hops > 2 * 16 and link_s >= 2 * frame_bits / 100e6  # some link carries several messages a chunk


def test_the_smallest_factor_keeping_the_cores_below_target(monkeypatch):
    topo, star = plan("star4", ["h1", "h2", "h3", "h4"], 1)
    hops, link_s = autoscale.chunk_load(topo, star, 364)
    monkeypatch.setattr(autoscale, "hop_cost", lambda reporter, execute: {"hop_cpu_s": 1e-4})
    monkeypatch.setattr(autoscale, "usable_cpus", lambda: [0, 1])
    choice = autoscale.choose_scale(topo, star, 364, None, lambda cfg: pytest.fail("probed"))
    needed = hops * 1e-4 / (link_s * 2 * autoscale.TARGET)
    assert choice["needed"] == pytest.approx(needed, abs=1e-3) and choice["factor"] == step_up(needed)
    assert f"F = {needed:.2f}" in choice["reason"] and choice["cores"] == 2
    monkeypatch.setattr(autoscale, "usable_cpus", lambda: [1])  # pinned to one core (taskset -c 1): half the CPU
    pinned = autoscale.choose_scale(topo, star, 364, None, lambda cfg: pytest.fail("probed"))
    assert pinned["needed"] == pytest.approx(2 * needed, abs=1e-3) and pinned["cores"] == 1
    unshaped = dataclasses.replace(topo, links=tuple(dataclasses.replace(link, bw_mbps=None) for link in topo.links))
    with pytest.raises(autoscale.ScaleError, match="no rate"):
        autoscale.choose_scale(unshaped, star, 364, None, lambda cfg: pytest.fail("probed"))
