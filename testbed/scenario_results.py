"""A scenario's results, per job and per mode, in the cluster's time (testbed.scenario).

Per job (`job_results`): its workload's own figures (a model's iterations, training's steps and
accuracy, the all-reduce benchmark's verdict), every iteration or step time with their median and
p99, exposed communication (a model's), when it arrived and finished, and what bound it: the
fidelity monitor (testbed.fidelity) over that job's own communication phases (a model's all-reduces
in flight; else its workload window), counting the bytes links carried in those phases (the link
meter) on the links its traffic crosses, and its own processes. A DDP iteration ends when every
rank's does, so a job's iteration i is the slowest worker's.

Across modes (`summarize`): per job and mode the median and p99 and the bound, as a table whose
columns are TABLE_MODES (a mode not run shows as such) then any other mode run, and the mean of
each mode's jobs against mode aware's.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Collection, Iterable, Sequence
from pathlib import Path
from typing import Any

from testbed.report import accuracy_curve, bottleneck_text, time_to_accuracy
from testbed.run import model_sums_correct, read_aggregation_stats, read_json, read_jsonl

TABLE_MODES = ("aware", "unaware", "split", "ring", "ps")  # the table's columns, in this order


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank q-th percentile (the smallest value at least q% of the values do not exceed)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def stats(times: Sequence[float]) -> dict[str, Any]:
    """Iteration (or step) times with their median and p99."""
    return {"iteration_times_s": list(times), "iteration_median_s": statistics.median(times) if times else None,
            "iteration_p99_s": percentile(times, 99)}


# ---------------------------------------------------------------------------- one job

def job_results(run: Any, job: Any) -> dict:
    """One job's entry of a mode's results.json (module docstring); `run` is a testbed.scenario.ModeRun."""
    w, factor = run.workload_of(job), run.asked.scale
    finished = run.finished_s.get(job.name)
    entry: dict[str, Any] = {"scheme": job.scheme, "workers": job.workers, "workload": w.workload,
                             "arrived_s": run.timeline.arrivals[job.name],
                             "wall_s": round(finished / factor, 6) if finished is not None else None}
    if job.job_id is not None:
        entry["job_id"] = job.job_id
        entry["placement"] = run.placement_json(job)
        entry["counters"] = {s: c["jobs"][job.job_id] for s, c in run.counters.items()
                             if c["jobs"][job.job_id]["received"]}
    if job.aggregators:
        entry.update(aggregators=job.aggregators, aggregation=read_aggregation_stats(job.out))
    if job.split:
        entry["split_workers"] = job.split
    spilled = [r["spilled_chunks"] for h in job.workers
               if (r := read_json(job.result_file(h, w.kind))) and "spilled_chunks" in r]
    if spilled:  # every worker hears of every spilled chunk of its job
        entry["spilled_chunks"] = max(spilled)
    if w.kind == "model":  # a split-off straggler's iterations do not hold the others' up
        reports = run.per_worker(job)
        entry.update(model_entry(reports, [h for h in job.workers if h not in job.split]),
                     sums_correct=model_sums_correct(job, reports))
    elif w.kind == "train":  # timed on an on-time worker: a straggler may skip steps (staleness)
        late = run.slowed_of(job)
        timed = next((h for h in job.workers if h not in late), job.workers[0])
        entry.update(train_entry(read_jsonl(job.out / f"{timed}.metrics.jsonl"), factor, run.asked.target_accuracy))
    else:
        benches = [read_json(job.out / f"{h}.bench.json") for h in job.workers]
        entry.update(allreduce_exact=all(b is not None and b.get("exact") for b in benches),
                     seconds=max((b["seconds"] / factor for b in benches if b), default=None))
    entry["fidelity"] = job_fidelity(run, job)
    return entry


def model_entry(reports: dict[str, dict], on_time: Collection[str]) -> dict:
    """A model job's iterations (each the slowest `on_time` rank's, the ranks not split off, and
    their longest compute: DDP's step waits for both), their stats, exposed communication, and how
    many iterations a straggler slowed (any rank's compute)."""
    if not reports:
        return {}
    first = next(iter(reports.values()))
    count = min(len(r["iterations"]) for r in reports.values())
    ranks = [[r["iterations"][i] for r in reports.values()] for i in range(count)]
    timed = [[r["iterations"][i] for h, r in reports.items() if h in on_time] or its for i, its in enumerate(ranks)]
    times = [max(it["iteration_s"] for it in its) for its in timed]
    computes = [max(it["compute_s"] for it in its) for its in timed]
    slowed = [max(it["compute_s"] for it in its) for its in ranks]
    out = {"model": first["model"], "profile": first["profile"], "grad_scale": first["grad_scale"],
           "compute_s": first["compute_s"], "buckets": len(first["buckets"]), **stats(times),
           "exposed_comm_median_s": statistics.median(t - c for t, c in zip(times, computes)) if times else None,
           "straggled_iterations": sum(1 for c in slowed if c > first["compute_s"] * (1 + 1e-9))}
    analytic = max((r.get("analytic", {}).get("iteration_s", 0.0) for r in reports.values()), default=0.0)
    if analytic and out["iteration_median_s"]:
        out.update(emulated_link_gbps=first["emulated_link_gbps"], analytic_iteration_s=analytic,
                   measured_vs_analytic=out["iteration_median_s"] / analytic)
    return out


def train_entry(records: list[dict], factor: float, target: float | None) -> dict:
    """A training job's accuracy and steps (step 0 left out of the times: testbed.report.accuracy_curve)."""
    evals = [r for r in records if "test_accuracy" in r]
    curve = [(t / factor, a) for t, a in accuracy_curve(records)]
    reached = time_to_accuracy(records, target)
    steps = [r["step_time_s"] / factor for r in records if r.get("step") != 0]
    return {"steps": len(records), "final_accuracy": evals[-1]["test_accuracy"] if evals else None,
            "train_time_s": round(sum(steps), 6), "accuracy_curve": curve,
            "time_to_accuracy_s": reached / factor if reached is not None else None, **stats(steps)}


def job_fidelity(run: Any, job: Any) -> dict:
    """The fidelity monitor's verdict over the job's own phases, links and processes (module docstring)."""
    from testbed import fidelity

    if run.meter is None:
        return {}
    comm = fidelity.intersection([r.get("comm_intervals", []) for r in run.per_worker(job).values()])
    window = run.workload_window([job])
    phases, over = (comm, "communication") if comm else ([window] if window else [], "workload")
    if not phases:
        return {}
    links, switches = footprint(run, job)
    return fidelity.report(run.topo, run.counters, run.queues, phases, over, run.meter, switches, run.cfg.scale,
                           run.link_meter, links, {p.name for p in job.processes})


def footprint(run: Any, job: Any) -> tuple[set[str], set[str]]:
    """The link directions ("a->b") the job's traffic crosses, and the switches on them: its hosts'
    own links; in-network its trees' links (each tree it had: testbed.scenario moves), else the routes
    of its scheme (ring: each worker to the next; ps, hostagg: every worker to its server and back)."""
    from controller.adapt import tree_links
    from controller.routing import compute_routes, trace

    topo = run.topo
    hosts = [*job.workers, *([job.ps] if job.ps else []), *job.aggregators]
    pairs: list[tuple[str, str]] = [(h, topo.switch_of(h)) for h in hosts]
    if job.placement is not None:
        trees = [tree_links(job.placement.tree)] + [m["tree"] for m in run.moves if m["job"] == job.name]
        pairs += [(a, b) for tree in trees for a, b in (edge.split("-") for edge in tree)]
    else:
        routes = compute_routes(topo)
        servers = [job.ps] if job.ps else job.aggregators[:1]
        ends = ([(w, servers[0]) for w in job.workers] if servers else
                [(w, job.workers[(i + 1) % len(job.workers)]) for i, w in enumerate(job.workers)])
        for a, b in ends:
            for src, dst in ((a, b), (b, a)):
                path = trace(topo, routes, src, dst)
                pairs += list(zip(path, path[1:]))
    links = {name for a, b in pairs for name in (f"{a}->{b}", f"{b}->{a}")}
    return links, {n for a, b in pairs for n in (a, b) if topo.is_switch(n)}


# ---------------------------------------------------------------------------- a mode

def mode_results(run: Any, seconds: float, error: Exception | None) -> dict:
    """A mode's results.json: per job (job_results), the timeline, the adaptation's moves (and
    `adapt_samples`: how often its loop sampled the switches, None in a mode that does not adapt), the
    background flows' counts, counters and the whole run's fidelity."""
    scn, factor = run.asked, run.asked.scale
    results = {"scenario": scn.name, "topology": scn.network.topo, "mode": run.mode, "seed": scn.train.seed,
               "time_scale": {"factor": factor, "real_time": "wall_time_s, fidelity, flows and logs/ are this "
                                                             "machine's time"},
               "target_accuracy": scn.target_accuracy, "wall_time_s": seconds,
               "admissions": [a.to_json() for a in run.tenancy.admissions] if run.innet else [],
               "jobs": {job.name: job_results(run, job) for job in run.jobs},
               "moves": [dict(m, t_s=m["t_s"] / factor) for m in run.moves],
               "adapt_samples": run.adapter.samples if run.adapter is not None else None, "timeline": run.timeline.to_json(),
               "flows": {f.name: {"send": read_json(run.logs / f"{f.name}.send.json"),
                                  "recv": read_json(run.logs / f"{f.name}.recv.json")} for f in run.real_timeline.flows},
               "ports": {s: c["ports"] for s, c in run.counters.items()},
               "queues": run.queues, "fidelity": run.fidelity}
    if error is not None:
        results["error"] = str(error)
    return results


# ---------------------------------------------------------------------------- all modes

def metric_of(scn: Any) -> str:
    """What the modes are compared on: model jobs' median iteration, the all-reduce benchmark's time,
    else training's time to the target accuracy (when there is one), else each job's wall time."""
    kinds = {scn.workload_of(job).kind for job in scn.jobs}
    if kinds == {"model"}:
        return "iteration_median_s"
    if kinds == {"allreduce"}:
        return "seconds"
    return "time_to_accuracy_s" if kinds == {"train"} and scn.target_accuracy is not None else "wall_s"


def summarize(scn: Any, by_mode: dict[str, dict]) -> dict:
    """Per mode each job's metric (metric_of) and their mean, ratios against mode aware, the moves,
    and the per-job table of median and p99 iteration (or step) times and what bound each."""
    key = metric_of(scn)
    table = {mode: {name: job.get(key) for name, job in res["jobs"].items()} for mode, res in by_mode.items()}
    means = {mode: _mean(values.values()) for mode, values in table.items()}
    base = means.get("aware")
    ratios = {mode: round(m / base, 3) for mode, m in means.items() if m is not None and base}
    cells = {mode: {name: {"median_s": job.get("iteration_median_s"), "p99_s": job.get("iteration_p99_s"),
                           "exposed_s": job.get("exposed_comm_median_s"), "scheme": job.get("scheme"),
                           "bound": bottleneck_text(job.get("fidelity") or {})}
                    for name, job in res["jobs"].items()} for mode, res in by_mode.items()}
    return {"scenario": scn.name, "metric": key, "per_job": table, "mean": means, "ratio_to_aware": ratios,
            "moves": {mode: len(res.get("moves", [])) for mode, res in by_mode.items()},
            "iterations": cells, "table": markdown_table(cells, [j.name for j in scn.jobs])}


def _mean(values: Iterable[Any]) -> float | None:
    values = list(values)
    if not values or any(v is None for v in values):
        return None  # a job that never reached the target has no time to compare
    return round(sum(values) / len(values), 6)


def markdown_table(cells: dict[str, dict[str, dict]], jobs: list[str]) -> str:
    """Rows: jobs; columns: TABLE_MODES, then any other mode run; a cell: median / p99 ms and what bound the job."""
    modes = [*TABLE_MODES, *(m for m in cells if m not in TABLE_MODES)]
    lines = ["| job | " + " | ".join(modes) + " |", "|---" * (len(modes) + 1) + "|"]
    for name in jobs:
        row = []
        for mode in modes:
            cell = cells.get(mode, {}).get(name)
            if cell is None:
                row.append("not run")
            elif cell["median_s"] is None:
                row.append(f"no iterations ({cell['scheme']})")
            else:
                row.append(f"{cell['median_s'] * 1e3:,.1f} / {cell['p99_s'] * 1e3:,.1f} ms, {cell['bound']}")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def plot(by_mode: dict[str, dict], summary: dict, path: Path) -> Path:
    """Left: training jobs' accuracy over training time (when any trains), else each job's iteration
    times per mode; right: the compared metric per job and mode, p99 marked when iterations were timed."""
    from testbed.plots import pyplot, save_figure

    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for mode, res in by_mode.items():
        for name, job in res["jobs"].items():
            curve = job.get("accuracy_curve") or []
            if curve:
                left.plot([t for t, _ in curve], [a for _, a in curve], marker=".", label=f"{mode} / {name}")
            elif job.get("iteration_times_s"):
                left.plot([t * 1e3 for t in job["iteration_times_s"]], marker=".", label=f"{mode} / {name}")
    trains = any(job.get("accuracy_curve") for res in by_mode.values() for job in res["jobs"].values())
    left.set(**({"xlabel": "training time (s)", "ylabel": "test accuracy", "title": "accuracy over time"} if trains
                else {"xlabel": "iteration", "ylabel": "iteration time (ms)", "title": "iterations"}))
    if left.lines:
        left.legend(fontsize=7)
    modes = list(summary["per_job"])
    jobs = sorted({j for per in summary["per_job"].values() for j in per})
    width = 0.8 / max(1, len(jobs))
    for i, name in enumerate(jobs):
        xs = [x + i * width for x in range(len(modes))]
        right.bar(xs, [summary["per_job"][m].get(name) or 0 for m in modes], width, label=name)
        p99 = [(summary["iterations"][m].get(name) or {}).get("p99_s") for m in modes]
        if summary["metric"] == "iteration_median_s" and all(v is not None for v in p99):
            right.scatter(xs, p99, marker="_", color="black", s=200)
    right.set_xticks([x + width * (len(jobs) - 1) / 2 for x in range(len(modes))], modes)
    right.set(ylabel=summary["metric"].replace("_", " ") + " (s)",
              title="per mode" + (" (bar: median, tick: p99)" if summary["metric"] == "iteration_median_s"
                                  else " (0: target not reached)"))
    right.legend(fontsize=7)
    return save_figure(fig, path)
