"""`--scale auto`: the time scale (testbed.timescale) chosen for this machine, and, after a run the cores
bound, the one that would have let the links bind.

A time-scaled run at F moves its packets F times slower, so this machine's CPU work per second
falls as F grows while the work itself (packets through veths, switches and sockets) stays the
same. The links bind once that work fits in the cores' time: with W the CPU seconds the run's
packets need and L the time its busiest link needs at F = 1, at F the links take F*L and the
cores need W / ncores, so the smallest F at which the links bind is W / (L * ncores * TARGET).

- W comes from a probe of this machine, made once and cached (`probe_path`): a star4 all-reduce
  of PROBE_ELEMENTS elements a worker on unshaped links, whose switch and host processes' CPU
  time (the fidelity monitor's, over the all-reduce) divided by the packets the switch received
  is the CPU cost of one packet hop (a packet sent into a switch, handled and sent on: the
  sender's and the kernel's part counted where they run, in the processes);
- the run's hops and L come from its own plan, per chunk: every worker sends a contribution up
  its link and gets the result down its link; every switch of the tree but the root sends its
  messages up (one partial sum if it aggregates, else every message from below:
  controller.installer.upward_messages) and gets one result down. L per chunk is the slowest
  link direction's frames at its rate.

TARGET (0.7 of the cores) leaves room for what the model leaves out (a forwarding hop costs less
than the probe's aggregating ones, a paced worker wakes up more often than the probe's unshaped
one) and F is rounded up to the next of testbed.timescale.STEPS. The choice, its inputs and reason go in results.json
(`scale_auto`). Only the in-network scheme's traffic is modelled; other schemes take --scale F.

After a run whose fidelity monitor named the cores, the monitor gives the F that would have avoided
it from the run's own numbers (testbed.fidelity.scale_that_binds_links).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from testbed.fidelity import usable_cpus
from testbed.timescale import step_up

TARGET = 0.7  # of the cores the chosen F lets the run's packets use
PROBE_VERSION = 1  # a new probe, or a changed way of running it, makes a new cache entry
PROBE_ELEMENTS = 1_000_000
FRAME_OVERHEAD = 14 + 20 + 8  # Ethernet, IPv4 and UDP around an aggregation packet


class ScaleError(Exception):
    """`--scale auto` cannot choose for this run (one line naming why; exit 2)."""

    exit_code = 2


# ---------------------------------------------------------------------------- the probe

def machine() -> dict[str, Any]:
    """What the probe's result belongs to: this machine's CPU model and count, its kernel."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count() or 1, "kernel": platform.release(), "probe": PROBE_VERSION}


def probe_path() -> Path:
    """Where the probe's result is cached: next to the native engine's builds, one file per machine."""
    from p4target.native.build import cache_dir

    key = json.dumps(machine(), sort_keys=True).encode()
    return cache_dir().parent / f"scale-probe-{hashlib.sha256(key).hexdigest()[:16]}.json"


def hop_cost(reporter: Any, execute: Callable[[Any], dict]) -> dict[str, Any]:
    """The probe's result ({"hop_cpu_s", "hops", "cpu_s", "machine", ...}), from the cache or measured now."""
    path = probe_path()
    try:
        cached = json.loads(path.read_text())
        if cached.get("machine") == machine():
            return cached
    except (OSError, ValueError):
        pass
    reporter.status(f"--scale auto: probing this machine once (a star4 all-reduce; cached in {path})")
    result = run_probe(execute)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as f:
        json.dump(result, f, indent=2)
    os.replace(f.name, path)
    return result


def run_probe(execute: Callable[[Any], dict]) -> dict[str, Any]:
    """A star4 in-network all-reduce on unshaped links, run by `execute` (a RunConfig to its results: the
    caller's Run, which this module does not import): CPU seconds its processes used per packet hop."""
    from testbed.config import JobConfig, NetworkConfig, RunConfig, WorkloadConfig

    with tempfile.TemporaryDirectory(prefix="aggnet-probe-") as out:
        cfg = RunConfig(network=NetworkConfig(topo="star4"), job=JobConfig(workers=4),
                        workload=WorkloadConfig(workload="allreduce", elements=PROBE_ELEMENTS), out=out)
        results = execute(cfg)
    fidelity = results["fidelity"]
    cpu = (sum(fidelity["switch_busy"].values()) + sum(fidelity["host_cpu"].values())) * fidelity["seconds"]
    hops = sum(port["rx_packets"] for switch in results["counters"].values() for port in switch["ports"].values())
    return {"hop_cpu_s": cpu / hops, "hops": hops, "cpu_s": round(cpu, 3), "machine": machine(),
            "measured": time.strftime("%Y-%m-%d %H:%M:%S")}


# ---------------------------------------------------------------------------- the run's side

def chunk_load(topo: Any, plan: Any, lanes: int) -> tuple[int, float]:
    """(packet hops, seconds its busiest link direction needs at the topology's rates) per chunk of an
    in-network job (controller.installer.JobPlan); 0.0 seconds when a link on the way has no rate."""
    from controller.installer import upward_messages
    from protocol.wire import packet_bytes

    frame_bits = 8 * (packet_bytes(lanes) + FRAME_OVERHEAD)
    tree, up = plan.tree, upward_messages(plan.tree, plan.aggregators)
    directions: list[tuple[int, Any]] = []  # (frames per chunk, link) for every direction that carries the job
    for v in tree.order:
        for h in tree.workers.get(v, ()):
            directions += [(1, topo.link_between(h, v))] * 2  # contribution up, result down
        parent = tree.parent[v]
        if parent is not None:
            link = topo.link_between(v, parent)
            directions += [(len(up[v]), link), (1, link)]  # messages up, the result down
    hops = sum(frames for frames, _ in directions)
    if any(not link.bw_mbps for _, link in directions):
        return hops, 0.0
    return hops, max(frames * frame_bits / (link.bw_mbps * 1e6) for frames, link in directions)


def choose_scale(topo: Any, plan: Any, lanes: int, reporter: Any, execute: Callable[[Any], dict]) -> dict[str, Any]:
    """The F `--scale auto` runs at, with its inputs and reason (results.json's `scale_auto`); ScaleError when
    the run's links have no rate (nothing to bind)."""
    hops, link_s = chunk_load(topo, plan, lanes)
    if link_s == 0.0:
        raise ScaleError("--scale auto: the links carrying the job have no rate to bind (give --link-mbps, or "
                         "bw_mbps in the topology)")
    probe = hop_cost(reporter, execute)
    ncores = len(usable_cpus())  # a run pinned to fewer cores (taskset, a cpuset) has only those
    needed = hops * probe["hop_cpu_s"] / (link_s * ncores * TARGET)
    factor = step_up(max(1.0, needed))
    reason = (f"a chunk's {hops} packet hops take {hops * probe['hop_cpu_s'] * 1e3:.2f} ms of CPU here (probe: "
              f"{probe['hop_cpu_s'] * 1e6:.1f} us a hop) and its busiest link {link_s * 1e3:.3f} ms, so the "
              f"{ncores} cores stay under {TARGET:.0%} busy from F = {needed:.2f}")
    return {"factor": factor, "needed": round(needed, 3), "hops_per_chunk": hops, "link_s_per_chunk": link_s,
            "hop_cpu_s": probe["hop_cpu_s"], "cores": ncores, "target": TARGET, "probe": str(probe_path()),
            "reason": reason}
