"""Time-scaled emulation (testbed.timescale) without a network: every knob `--scale F` turns is
turned once and by F (link rates down, link delays, protocol timers and compute up), and the
results a run reports are divided back into the emulated cluster's time."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from config import ConfigError, flat_dict
from controller.topology import load_topology
from hosts.agent_config import AgentConfig, TrainConfig, load_config, parse_config
from hosts.comm import Endpoint
from hosts.models.analytic import emulated_link_bps
from hosts.straggler import Straggler
from protocol.job import JobSpec, WorkerSpec
from testbed.config import FaultConfig, JobConfig, NetworkConfig, RunConfig, WorkloadConfig
from testbed.run import REPO, Run
from testbed.timescale import real_config, scale_topology, unscaled_results

F = 8.0
# Every protocol timer of a run, as a dotted path: a new timer field must be marked timer=True
# (config.fields.option) and named here, so that no timer is left in real time by accident.
TIMERS = {"job.min_rto_s", "job.max_rto_s", "job.agg_wait_s", "faults.detect_interval_s",
          "faults.detect_timeout_s", "comm_timeout_s"}


def leaves(cfg, where=""):
    """dotted path -> value of every leaf field of a config."""
    out = {}
    for f in dataclasses.fields(cfg):
        value, path = getattr(cfg, f.name), f"{where}{f.name}"
        out.update(leaves(value, path + ".") if dataclasses.is_dataclass(value) else {path: value})
    return out


def test_every_timer_is_multiplied_once_and_nothing_else_changes():
    asked = RunConfig(network=NetworkConfig(link_mbps=10_000), job=JobConfig(min_rto_s=0.3, max_rto_s=2.0, stragglers={"h2": 0.1}),
                      faults=FaultConfig(detect_interval_s=0.2), scale=F)
    real = real_config(asked, F)
    before, after = leaves(asked), leaves(real)
    changed = {path for path in before if before[path] != after[path]}
    assert changed == TIMERS
    for path in TIMERS:
        assert after[path] == pytest.approx(before[path] * F)
    assert real_config(asked, 1) is asked
    # the link rate is the topology's business (scale_topology), the straggler's delay is compute (the agent's)
    assert real.network.link_mbps == 10_000 and real.job.stragglers == {"h2": 0.1} and real.timeout_s == 900


def test_unset_retransmission_timeouts_are_this_machines_at_any_scale():
    """They guard against this machine's scheduling jitter, which scaling does not slow; set ones are the cluster's."""
    unset = real_config(RunConfig(scale=F), F)
    assert (unset.job.min_rto_s, unset.job.max_rto_s) == (None, None) and unset.job.rto_bounds() == (0.2, 1.0)
    given = real_config(RunConfig(job=JobConfig(min_rto_s=0.001, max_rto_s=0.005), scale=F), F)
    assert given.job.rto_bounds() == pytest.approx((0.001 * F, 0.005 * F))
    assert real_config(RunConfig(job=JobConfig(min_rto_s=0.5), scale=F), F).job.rto_bounds() == (0.5 * F, 0.5 * F)


def test_links_are_slower_and_longer_by_the_factor():
    topo = load_topology(str(REPO / "topologies" / "star4.yaml"))
    topo = dataclasses.replace(topo, links=(dataclasses.replace(topo.links[0], bw_mbps=10_000, delay_ms=0.01, loss=1),
                                            dataclasses.replace(topo.links[1], bw_mbps=None, delay_ms=None)))
    slow = scale_topology(topo, F)
    assert (slow.links[0].bw_mbps, slow.links[0].delay_ms, slow.links[0].loss) == (10_000 / F, 0.01 * F, 1)
    assert (slow.links[1].bw_mbps, slow.links[1].delay_ms) == (None, None)
    assert scale_topology(topo, 1) is topo


def test_compute_pauses_make_every_compute_last_the_factor_longer():
    compute = 0.004
    plain = Straggler().slowed(F)
    assert compute + plain.pause_s(compute) == pytest.approx(F * compute)
    slow = Straggler(delay_s=0.1, slowdown=2.0).slowed(F)  # a straggler's compute: 2 x compute + 0.1 s
    assert compute + slow.pause_s(compute) == pytest.approx(F * (2 * compute + 0.1))


def agent_config(time_scale: float, stragglers: dict | None = None) -> AgentConfig:
    workers = (Endpoint("h1", "10.0.0.1", 47000), Endpoint("h2", "10.0.0.2", 47000))
    return AgentConfig("ring", TrainConfig(), workers, stragglers=stragglers or {}, time_scale=time_scale)


def test_the_agent_config_carries_the_compute_scale_to_every_worker(tmp_path):
    assert agent_config(1).compute_pause("h1") is None
    assert agent_config(1, {"h2": Straggler(0.1)}).compute_pause("h2") == Straggler(0.1)
    scaled = agent_config(F, {"h2": Straggler(0.1)})
    assert scaled.compute_pause("h1") == Straggler(0.0, F) and scaled.compute_pause("h2") == Straggler(0.1 * F, F)
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(scaled.to_dict()))
    assert load_config(path) == scaled
    with pytest.raises(ConfigError, match=r"agent.json: field 'time_scale': expected a number >= 1, got 0.5"):
        parse_config(dict(scaled.to_dict(), time_scale=0.5), "agent.json")


def test_a_run_plans_on_scaled_links_and_hands_scaled_timers_to_its_hosts(tmp_path):
    asked = RunConfig(network=NetworkConfig(topo="star4", link_mbps=1000),
                      job=JobConfig(scheme="hostagg", workers=2, min_rto_s=0.01, max_rto_s=0.1), scale=F, out=str(tmp_path))
    run = Run(asked)
    run.run_dir.mkdir(parents=True)
    assert run.asked is asked and {link.bw_mbps for link in run.topo.links} == {1000 / F}
    config = load_config(run.write_agent_config(run.jobs[0], "agent.json"))
    assert config.timeout_s == 30 * F and config.wait_s == pytest.approx(0.05 * F) and config.time_scale == F
    spec = JobSpec(1, (WorkerSpec("h1", "10.0.0.1"), WorkerSpec("h2", "10.0.0.2")), 0, 8, "10.0.0.254",
                   timeout_s=run.cfg.job.rto_bounds()[0])
    spec = run.job_spec(run.jobs[0], spec)
    assert (spec.timeout_s, spec.max_timeout_s) == (pytest.approx(0.01 * F), pytest.approx(0.1 * F))
    assert JobSpec.from_json(spec.to_json()) == spec


def test_a_model_worker_slows_its_compute_and_models_the_real_link(tmp_path):
    """The model role divides its own times by F (hosts.models.workload) and takes the real link rate,
    which emulates link x F / grad scale: the cluster's link over the grad scale, whatever F."""
    asked = RunConfig(network=NetworkConfig(topo="star4", link_mbps=1000), job=JobConfig(scheme="ring", workers=2),
                      workload=WorkloadConfig(workload="model:resnet50", grad_scale=0.01), scale=F,
                      out=str(tmp_path))
    run = Run(asked)
    argv = run.worker_argv(run.jobs[0], "h1", tmp_path / "agent.json")
    link, time_scale = float(argv[argv.index("--link-mbps") + 1]), float(argv[argv.index("--time-scale") + 1])
    assert (link, time_scale) == (1000 / F, F)
    assert emulated_link_bps(link, 0.01, time_scale) == pytest.approx(1000e6 / 0.01)


def test_results_are_reported_in_the_emulated_clusters_time():
    real = {"config": flat_dict(RunConfig(scale=F)), "seconds": 2.0, "goodput_elements_per_s": 1000.0,
            "step_time_s": 0.8, "accuracy_curve": [(4.0, 0.5), (8.0, 0.9)], "wall_time_s": 30.0,
            "per_worker": {"h1": {"seconds": 1.6, "window": [10.0, 11.6], "comm_time_s": 0.4}},
            "events": [{"detected_after_s": 0.8, "resume_after_step": 3}],
            "fidelity": {"seconds": 2.0, "link_utilization": {"s1->h1": 0.95}}}
    out = unscaled_results(real, F)
    assert (out["seconds"], out["goodput_elements_per_s"], out["step_time_s"]) == (2.0 / F, 1000.0 * F, 0.8 / F)
    assert out["accuracy_curve"] == [(4.0 / F, 0.5), (8.0 / F, 0.9)]
    assert out["per_worker"]["h1"] == {"seconds": 1.6 / F, "window": [10.0, 11.6], "comm_time_s": 0.4 / F}
    assert out["events"] == [{"detected_after_s": 0.8 / F, "resume_after_step": 3}]
    assert out["wall_time_s"] == 30.0 and out["fidelity"] == real["fidelity"]  # this machine's time
    assert out["time_scale"]["factor"] == F and "wall_time_s" in out["time_scale"]["real_time"]
    assert unscaled_results({"seconds": 2.0}, 1) == {"seconds": 2.0, "time_scale": {"factor": 1}}


@pytest.mark.parametrize("argv, message", [
    (["run", "--scale", "0.5"], "--scale: a factor >= 1, or auto, got 0.5"),
    (["run", "--scale", "4", "--script", "x.py"], "--scale: a script's compute is its own"),
])
def test_bad_scales_are_one_line_and_exit_2(argv, message, tmp_path):
    done = subprocess.run([sys.executable, "-m", "testbed.cli", *argv[:1], "--out", str(tmp_path), *argv[1:]],
                          capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_scenario_runs_what_it_times_scale_times_slower(tmp_path):
    """experiments/mlfabric.yaml at scale 4: its links, flows (rates and periods) and adaptation period
    as this machine runs them, everything as the file says in the results' timeline."""
    from testbed.scenario import ModeRun, load_scenario

    (tmp_path / "s.yaml").write_text((REPO / "experiments" / "mlfabric.yaml").read_text() + "\nscale: 4\n")
    asked = load_scenario(str(tmp_path / "s.yaml"))
    run = ModeRun(asked, "aware", tmp_path / "aware")
    assert {link.bw_mbps for link in run.topo.links} == {10 / 4}
    assert run.cfg.adapt.period_s == 4 * asked.adapt.period_s
    assert asked.job.min_rto_s is None and run.cfg.job.rto_bounds() == (0.2, 1.0)  # unset: this machine's
    first = asked.traffic[0]
    cluster, real = run.timeline.flows[0], run.real_timeline.flows[0]
    assert cluster.intervals[:2] == ((0, first.on_s, first.rate_mbps), (first.on_s + first.off_s,
                                                                        2 * first.on_s + first.off_s, first.rate_mbps))
    assert real.intervals[1] == tuple(v * f for v, f in zip(cluster.intervals[1], (4, 4, 1 / 4)))
