"""Time-scaled emulation: a cluster F times faster than this machine can emulate, run F times slower.

One machine cannot move 10-100 Gb/s through emulated links in real time, but it can move 100 Mb/s.
`--scale F` runs the fast cluster in slow motion, as time-dilating emulators do: every link rate is
divided by F, and everything else that takes time is multiplied by F, so that every ratio of two
times (speedup, exposed communication, link utilization) is the fast cluster's:

- link rates / F and link delays x F (the topology's, or --link-mbps): `scale_topology`;
- the workers' compute x F: a worker sleeps (F - 1) x each step's measured compute (stragglers'
  delays and slowdowns too: hosts.straggler.Straggler.slowed, via the agent config's time_scale);
  a workload whose compute times come from a profile multiplies them by the agent config's time_scale;
- protocol timers x F: the config fields marked `timer=True` (retransmission timeouts, the host
  aggregator's wait, failure detection, peers' silence): `real_config`. An unset retransmission
  timeout stays this machine's (0.2 s at least, 1 s at most, at any F: testbed.config.JobConfig):
  its floor is there for this machine's scheduling jitter, which scaling does not slow.

Results are reported in the emulated cluster's time: every measured duration divided by F, rates
multiplied by it (`unscaled_results`); results.json says so in `time_scale`. What stays in this
machine's time: wall_time_s, the fidelity section (its utilizations are ratios, against the scaled
link rates, so it still says whether links or processes bound the run), the time.monotonic() stamps
it is measured over (a worker's `window` and `comm_intervals`), the per-step metrics files and the
live display, and --timeout (a budget of real time).

The switches' per-packet work is not slowed: at scale F a switch is F times faster than this one,
which is what a hardware switch at line rate is to the emulated links.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

C = TypeVar("C", bound="DataclassInstance")

# What a run reports in time: durations (divided by F) and rates per second (multiplied by it),
# wherever they are in results.json (each worker's result, each fault's event).
DURATIONS = ("step_time_s", "comm_time_s", "seconds", "detected_after_s", "link_bound_s")
RATES = ("goodput_elements_per_s",)
REAL_TIME = "wall_time_s, fidelity and logs/*.metrics.jsonl are this machine's time"


AUTO = 0.0  # RunConfig.scale's value for `--scale auto`: the run chooses F (testbed.autoscale)


# The factors `--scale auto` and the fidelity monitor's advice pick from: each ~25-50% above the last.
STEPS = (1, 1.5, 2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200, 300, 400, 500, 1000)


def step_up(factor: float) -> float:
    """The smallest of STEPS at or above `factor` (the largest one past them)."""
    return next((s for s in STEPS if s >= factor - 1e-9), STEPS[-1])


def parse_scale(text: str) -> float:
    """`--scale`'s value: a factor >= 1, or `auto` (AUTO)."""
    if text.strip().lower() == "auto":
        return AUTO
    value = float(text)
    if value < 1:
        raise ValueError(f"a factor >= 1, or auto, got {text}")
    return value


def real_config(cfg: C, factor: float) -> C:
    """The config as this machine runs it: every `timer` field (config.fields.option) x factor, in
    nested configs too. Everything else is left as asked."""
    if factor == 1:
        return cfg
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes[f.name] = real_config(value, factor)
        elif f.metadata.get("timer") and value is not None:  # unset: a default of this machine's time
            changes[f.name] = value * factor
    return dataclasses.replace(cfg, **changes)


def scale_topology(topo: Any, factor: float, data_scale: float = 1.0) -> Any:
    """The topology with every link's rate divided by factor and its delay multiplied by it; rates
    also times `data_scale` when every byte the cluster moves is sent at that fraction (a scenario
    of model jobs with --grad-scale G: testbed.scenario)."""
    if factor == 1 and data_scale == 1:
        return topo

    def slow(link: Any) -> Any:
        return dataclasses.replace(link, bw_mbps=link.bw_mbps * data_scale / factor if link.bw_mbps else link.bw_mbps,
                                   delay_ms=link.delay_ms * factor if link.delay_ms else link.delay_ms)

    return dataclasses.replace(topo, links=tuple(slow(link) for link in topo.links))


def unscaled_results(results: Mapping[str, Any], factor: float) -> dict[str, Any]:
    """A run's results in the emulated cluster's time (module docstring), with `time_scale` saying so."""
    out = _unscaled(results, factor)
    out["time_scale"] = {"factor": factor, "real_time": REAL_TIME} if factor != 1 else {"factor": 1}
    return out


def time_scale_of(results: Mapping[str, Any]) -> float:
    """The F a run's results.json says it ran at (1 for results without `time_scale`)."""
    return results.get("time_scale", {}).get("factor", 1)


def _unscaled(value: Any, factor: float) -> Any:
    """`value` with every DURATIONS/RATES field divided/multiplied by factor, at any depth (per
    worker, per event), except in the fidelity section (REAL_TIME)."""
    if isinstance(value, list):
        return [_unscaled(v, factor) for v in value]
    if not isinstance(value, Mapping):
        return value
    out: dict[str, Any] = {}
    for key, v in value.items():
        if key in DURATIONS and isinstance(v, (int, float)):
            out[key] = v / factor
        elif key in RATES and isinstance(v, (int, float)):
            out[key] = v * factor
        elif key == "accuracy_curve":
            out[key] = [(t / factor, accuracy) for t, accuracy in v]
        else:
            out[key] = v if key == "fidelity" else _unscaled(v, factor)
    return out
