"""Resource growth over a long run: sample every AggNet process, judge the slopes, plot them.

    sampler = Sampler(samples_path, processes)   # processes() -> {name: pid}
    sampler.sample(t)                             # one line of samples.jsonl
    verdicts = judge(load_series(samples_path))   # per series and metric: ok, growth or short
    plot(load_series(samples_path), "growth.png", marks=[fault times])

A series is one process instance (`s1[4711]`): a restarted switch or worker has a new pid and so
starts a new series, because its memory starting over is not the old one shrinking. System-wide
counts (interfaces, network namespaces of our process tree, its processes that are none of
the named ones, our files in /run/aggnet) are the series `system`. Growth is the least-squares slope over the second half
of a series' samples times that half's span (the first half is warm-up: caches, arenas, torch
loading); it fails when it exceeds a small tolerance per metric. Only the processes still running
at the last sample are judged (a worker that trained one round and exited ramped up all its
life: that is start-up, not a leak; its series is `ended`); a series covering less than MIN_COVER
of the run, or with fewer than MIN_POINTS samples in its second half, is `short`.
"""
from __future__ import annotations

import ctypes
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from testbed import clean

PROCESS_METRICS = ("rss_kb", "fds", "threads")
SYSTEM_METRICS = ("interfaces", "namespaces", "processes", "run_files")
# metric -> (absolute, relative to the series' median): growth above the larger of the two fails
TOLERANCE: dict[str, tuple[float, float]] = {
    "rss_kb": (8192.0, 0.05), "fds": (3.0, 0.0), "threads": (2.0, 0.0),
    "interfaces": (1.0, 0.0), "namespaces": (1.0, 0.0), "processes": (2.0, 0.0), "run_files": (1.0, 0.0)}
MIN_POINTS = 6
MIN_COVER = 0.25
SYSTEM = "system"
M_ARENA_MAX = -8  # glibc's mallopt parameter

Series = dict[tuple[str, str], list[tuple[float, float]]]  # (series, metric) -> [(t, value)]


def process_usage(pid: int) -> tuple[int, int, int] | None:
    """(resident KiB, open descriptors, threads) of `pid`; None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    rss = int(fields.get("VmRSS", "0 kB").split()[0])  # a zombie has no VmRSS
    return rss, fds, int(fields["Threads"])


def descendants(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        ppid = clean._stat_field(pid, 1)
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def system_counts(root: int, named: set[int]) -> dict[str, int]:
    """Interfaces of our network namespace, network namespaces of `root`'s process tree, the processes
    in that tree that are none of the `named` ones (strays: leftovers, zombies, commands that hang),
    and our files in /run/aggnet (testbed records and lock named by our pid or namespace)."""
    tree = descendants(root)
    namespaces = set()
    for pid in tree:
        try:
            namespaces.add(os.stat(f"/proc/{pid}/ns/net").st_ino)
        except OSError:
            pass
    ours = (str(root), str(os.stat("/proc/self/ns/net").st_ino))
    files = os.listdir(clean.STATE_DIR) if os.path.isdir(clean.STATE_DIR) else []
    return {"interfaces": len(os.listdir("/sys/class/net")), "namespaces": len(namespaces), "processes": len(set(tree) - named),
            "run_files": sum(any(o in name for o in ours) for name in files)}


def steady_heap() -> None:
    """Make this process's resident memory follow what it holds, so its growth means a leak: at most two
    malloc arenas (glibc gives threads arenas of their own, and every gRPC channel a reconnect opens
    brings threads that would touch a fresh one) and, before each of its samples, freed memory handed
    back (`trim_heap`). Call it before the first thread starts."""
    ctypes.CDLL(None).mallopt(M_ARENA_MAX, 2)


def trim_heap() -> None:
    """Hand this process's freed heap memory back to the system (glibc's malloc_trim)."""
    ctypes.CDLL(None).malloc_trim(0)


class Sampler:
    """Appends one JSON line per sample to `path`: the time, each named process's usage, the system counts.
    Samples go to the file, not to memory, so the soak itself does not grow with its length."""

    def __init__(self, path: Path, processes: Callable[[], dict[str, int]]):
        self.path = path
        self.processes = processes
        self.count = 0

    def sample(self, t: float) -> None:
        procs, named = {}, self.processes()
        trim_heap()
        for name, pid in named.items():
            usage = process_usage(pid)
            if usage is not None:
                procs[f"{name}[{pid}]"] = usage
        line = {"t": round(t, 3), "procs": procs, SYSTEM: system_counts(os.getpid(), set(named.values()))}
        with open(self.path, "a") as f:
            f.write(json.dumps(line) + "\n")
        self.count += 1


def load_series(path: Path) -> Series:
    """samples.jsonl as (series, metric) -> [(t, value)]."""
    series: Series = {}
    for line in path.read_text().splitlines():
        sample = json.loads(line)
        t = sample["t"]
        for key, values in sample["procs"].items():
            for metric, value in zip(PROCESS_METRICS, values):
                series.setdefault((key, metric), []).append((t, value))
        for metric, value in sample[SYSTEM].items():
            series.setdefault((SYSTEM, metric), []).append((t, value))
    return series


def growth(points: list[tuple[float, float]]) -> float:
    """Least-squares slope over the second half of `points` times that half's span."""
    half = points[len(points) // 2:]
    n = len(half)
    mt = sum(t for t, _ in half) / n
    mv = sum(v for _, v in half) / n
    var = sum((t - mt) ** 2 for t, _ in half)
    if var == 0:
        return 0.0
    slope = sum((t - mt) * (v - mv) for t, v in half) / var
    return slope * (half[-1][0] - half[0][0])


def tolerance(metric: str, points: list[tuple[float, float]]) -> float:
    absolute, relative = TOLERANCE[metric]
    values = sorted(v for _, v in points)
    return max(absolute, relative * values[len(values) // 2])


def judge(series: Series) -> list[dict[str, Any]]:
    """A verdict per (series, metric): `growth` (and by how much), `ok`, `ended` or `short` (not judged)."""
    times = [t for points in series.values() for t, _ in points]
    start, end = (min(times), max(times)) if times else (0.0, 0.0)
    out = []
    for (name, metric), points in sorted(series.items()):
        cover = points[-1][0] - points[0][0]
        entry: dict[str, Any] = {"series": name, "metric": metric, "samples": len(points),
                                 "first": points[0][1], "last": points[-1][1]}
        if points[-1][0] < end:
            entry["verdict"] = "ended"
        elif len(points) - len(points) // 2 < MIN_POINTS or cover < MIN_COVER * (end - start):
            entry["verdict"] = "short"
        else:
            g, tol = growth(points), tolerance(metric, points)
            entry.update(growth=round(g, 3), tolerance=round(tol, 3), verdict="growth" if g > tol else "ok")
        out.append(entry)
    return out


def failures(verdicts: Iterable[dict]) -> list[str]:
    """One line per series and metric that grew."""
    return [f"{v['series']}: {v['metric']} grew by {v['growth']:g} over the second half of its samples "
            f"(tolerance {v['tolerance']:g})" for v in verdicts if v["verdict"] == "growth"]


def plot(series: Series, path: Path, marks: Iterable[float] = ()) -> None:
    """One panel per metric over time (minutes), a line per series; `marks`: fault times, as dotted lines.
    Series that ended before the run (workers of one round, killed switches) are thin grey, unlabelled."""
    from testbed.plots import pyplot

    plt = pyplot()
    metrics = PROCESS_METRICS + SYSTEM_METRICS
    fig, axes = plt.subplots(len(metrics), 1, figsize=(10, 2.2 * len(metrics)), sharex=True)
    marks = list(marks)
    end = max((points[-1][0] for points in series.values()), default=0.0)
    for ax, metric in zip(axes, metrics):
        for (name, m), points in sorted(series.items(), key=lambda item: item[1][-1][0] == end):
            if m == metric:
                ended = points[-1][0] < end
                ax.plot([t / 60 for t, _ in points], [v / 1024 if metric == "rss_kb" else v for _, v in points],
                        **({"color": "0.75", "linewidth": 0.4} if ended else {"linewidth": 0.9, "label": name}))
        for t in marks:
            ax.axvline(t / 60, color="grey", linestyle=":", linewidth=0.5)
        ax.set_ylabel("rss MiB" if metric == "rss_kb" else metric)
    axes[0].legend(fontsize=5, ncol=4, loc="upper left")
    axes[-1].set_xlabel("minutes")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
