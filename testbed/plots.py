"""PNG plots of a run (matplotlib, Agg backend: no display needed).

    from testbed import plots
    metrics = plots.load_metrics(workers_dir)              # {"h1": [step records], ...}
    plots.plot_training(metrics, run_dir / "training.png")  # loss and test accuracy vs time
    plots.plot_link_bytes(results["link_bytes"], run_dir / "link_bytes.png")
    plots.plot_comparison(report.compare_summary(by_scheme), compare_dir / "comparison.png")

Step records are the agents' NAME.metrics.jsonl lines (hosts/agent.py): step, loss,
step_time_s, and test_loss/test_accuracy on evaluation steps. The time axis is training
time, the running sum of a worker's step times (evaluation is not in it).
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from testbed.report import natural_key

METRICS_SUFFIX = ".metrics.jsonl"
MAX_LINK_BARS = 40  # links drawn in plot_link_bytes


class MetricsError(Exception):
    """A metrics file that cannot be read; names the file and line."""

    exit_code = 1


def load_metrics(folder: str | os.PathLike) -> dict[str, list[dict]]:
    """Every worker's step records from FOLDER/NAME.metrics.jsonl, by worker name."""
    out = {}
    for path in sorted(Path(folder).glob("*" + METRICS_SUFFIX)):
        records = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                float(record["step_time_s"]), float(record["loss"])
            except (ValueError, KeyError, TypeError) as exc:
                raise MetricsError(f"{path}:{number}: not a step record ({type(exc).__name__}: {exc})") from None
            records.append(record)
        out[path.name[:-len(METRICS_SUFFIX)]] = records
    return out


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend: runs have no display, and importing it lazily keeps the CLI fast."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig: Any, path: str | os.PathLike) -> Path:
    """Write `fig` as a PNG at `path` (folders created) and free it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def plot_training(metrics: Mapping[str, list[dict]], path: str | os.PathLike, title: str = "training") -> Path:
    """Training loss (left) and test accuracy (right) against training time, one line per worker."""
    plt = pyplot()
    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4), sharex=True)
    for worker, records in sorted(metrics.items()):
        elapsed, t = [], 0.0
        for r in records:
            t += r["step_time_s"]
            elapsed.append(t)
        loss_ax.plot(elapsed, [r["loss"] for r in records], label=worker, linewidth=1)
        evals = [(x, r["test_accuracy"]) for x, r in zip(elapsed, records) if "test_accuracy" in r]
        if evals:
            acc_ax.plot(*zip(*evals), marker="o", markersize=3, label=worker)
    loss_ax.set(title="training loss", xlabel="training time (s)", ylabel="cross-entropy")
    acc_ax.set(title="test accuracy", xlabel="training time (s)", ylabel="accuracy", ylim=(0, 1.02))
    loss_ax.set_xlim(left=0)
    acc_ax.tick_params(labelbottom=True)
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    return save_figure(fig, path)


def plot_link_bytes(link_bytes: Mapping[str, int], path: str | os.PathLike, title: str = "bytes per link") -> Path:
    """One bar per link (both directions), in MB, labelled with its value; only the MAX_LINK_BARS busiest of a
    larger network (a fat-tree k=8's 384 bars made a 270-inch figure that took 12 s to draw)."""
    plt = pyplot()
    names = sorted(link_bytes, key=natural_key)
    if len(names) > MAX_LINK_BARS:
        busiest = set(sorted(names, key=lambda n: -link_bytes[n])[:MAX_LINK_BARS])
        title = f"{title}: the {MAX_LINK_BARS} busiest of {len(names)} links"
        names = [n for n in names if n in busiest]
    mbytes = [link_bytes[n] / 1e6 for n in names]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.7 * len(names) + 2), 4))
    bars = ax.bar(names, mbytes, color="tab:blue")
    ax.bar_label(bars, labels=[_mb(v) for v in mbytes], fontsize=8)
    ax.set(title=title, ylabel="MB (both directions)", xlabel="link")
    ax.tick_params(axis="x", rotation=45 if len(names) > 8 else 0)
    ax.grid(axis="y", alpha=0.3)
    ax.margins(y=0.12)
    return save_figure(fig, path)


def plot_comparison(summary: Mapping[str, Mapping[str, Any]], path: str | os.PathLike) -> Path:
    """Schemes side by side (report.compare_summary): time, bytes on the compared link, and for
    training the accuracy."""
    plt = pyplot()
    schemes = list(summary)
    train = all(summary[s]["correct"] is None for s in schemes)
    panels = [("median step time" if train else "all-reduce time", "ms", "time_s", 1000.0, "{:.1f}"),
              ("bytes on the compared link", "MB", "link_bytes", 1e-6, "{:.2f}")]
    if train:
        panels.append(("final test accuracy", "accuracy", "final_accuracy", 1.0, "{:.3f}"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, unit, key, scale, spec) in zip(axes, panels):
        values = [(summary[s][key] or 0) * scale for s in schemes]
        bars = ax.bar(schemes, values, color=colors[:len(schemes)])
        ax.bar_label(bars, labels=[spec.format(v) for v in values], fontsize=8)
        ax.set(title=title, ylabel=unit)
        ax.grid(axis="y", alpha=0.3)
        ax.margins(y=0.12)
        if key == "link_bytes":
            links = sorted({summary[s]["link"] for s in schemes if summary[s]["link"]})
            ax.set_xlabel("link " + ", ".join(links))
    if train:
        axes[2].set_ylim(0, 1.05)
    fig.suptitle("schemes compared")
    return save_figure(fig, path)


def _mb(value: float) -> str:
    return f"{value:.2f}" if value < 100 else f"{value:.0f}"


def plot_model_speedups(figure: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """One panel per model: in-network's speedup over ring and over the parameter server (measured
    iteration times, bars) and what the analytic model predicts (ticks), a pair per (workers,
    emulated link rate) (scripts/bench_models.py)."""
    plt = pyplot()
    models = list(figure["models"])
    fig, axes = plt.subplots(len(models), 1, figsize=(max(8.0, 0.75 * max(len(c) for c in figure["models"].values())),
                                                      3.2 * len(models)), squeeze=False)
    for ax, model in zip(axes[:, 0], models):
        cases = figure["models"][model]
        labels = [f"{c['workers']}w\n{c['emulated_gbps']:g}G" for c in cases]
        xs = range(len(cases))
        for offset, key, name in ((-0.2, "vs_ring", "over ring"), (0.2, "vs_ps", "over PS")):
            if all(c[f"speedup_{key}"] is None for c in cases):
                continue  # the scheme did not run (bench_models.py --schemes)
            values = [c[f"speedup_{key}"] or 0 for c in cases]
            bars = ax.bar([x + offset for x in xs], values, 0.4, label=name)
            ax.bar_label(bars, labels=[f"{v:.2f}" for v in values], fontsize=6)
            predicted = [c.get(f"analytic_speedup_{key}") for c in cases]
            if all(p is not None for p in predicted):
                ax.scatter([x + offset for x in xs], predicted, marker="_", color="black", s=120,
                           label="analytic" if key == "vs_ring" else None, zorder=3)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xticks(list(xs), labels, fontsize=7)
        ax.set(title=model, ylabel="speedup of in-network (x)")
        ax.set_yscale("log")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=3)
    fig.suptitle(f"in-network's DDP iteration speedup ({figure['profile']} profiles)", fontsize=10)
    return save_figure(fig, path)


def plot_goodput(goodput: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """All-reduce goodput (elements a second, each worker's vector) against workers: in-network and
    the ring as measured, their link bounds, and SwitchML's published figure (scripts/bench_goodput.py)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 4))
    cases = goodput["cases"]
    workers = [c["workers"] for c in cases]
    for scheme, color in (("innet", "tab:blue"), ("ring", "tab:orange")):
        ax.plot(workers, [c[scheme]["goodput"] / 1e9 for c in cases], "o-", color=color,
                label=f"{'in-network' if scheme == 'innet' else 'ring'}, measured")
        ax.plot(workers, [c[scheme]["bound"] / 1e9 for c in cases], "--", color=color,
                label=f"{'in-network' if scheme == 'innet' else 'ring'} link bound")
    ax.axhline(goodput["switchml_gelements"], color="grey", linestyle=":",
               label=f"SwitchML, published (~{goodput['switchml_gelements']:g} G)")
    ax.set(xlabel="workers", ylabel="goodput (G elements/s a worker)", xticks=workers, ylim=(0, None),
           title=f"all-reduce of {goodput['elements'] / 1e6:g}M elements at emulated {goodput['gbps']:g} Gb/s")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return save_figure(fig, path)


BOUND_COLORS = {"link": "tab:green", "machine": "tab:red", "switch": "tab:orange", "host process": "tab:orange"}


def plot_sweep(state: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """A sweep's points (testbed.sweep): each point's time, coloured by what bound its run (a link, the cores, a
    process, nothing), with its link-bound time as a black tick; labelled by the values of the grid's axes."""
    plt = pyplot()
    axes = [a for a, values in state["grid"].items() if len(values) > 1] or list(state["grid"])
    pts = [p for p in state["points"] if (p.get("summary") or {}).get("time_s") is not None]
    labels = ["\n".join(p["values"][a] for a in axes) for p in pts]
    times = [p["summary"]["time_s"] for p in pts]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.55 * len(pts) + 2), 4.5))
    colors = [BOUND_COLORS.get(p["summary"].get("bottleneck") or "", "tab:gray") for p in pts]
    ax.bar(range(len(pts)), times, color=colors)
    for x, p in enumerate(pts):
        if p["summary"].get("link_bound_s"):
            ax.plot([x - 0.4, x + 0.4], [p["summary"]["link_bound_s"]] * 2, color="black", linewidth=1.5)
    ax.set_xticks(range(len(pts)), labels, fontsize=7)
    ax.set(title=f"sweep: {len(pts)} points ({' / '.join(axes)}); black: link-bound time", ylabel="time (s)")
    ax.set_yscale("log")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in ("tab:green", "tab:red", "tab:orange", "tab:gray")]
    ax.legend(handles, ["bound by a link", "by the cores", "by a process", "by nothing"], fontsize=7, loc="upper left")
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)
