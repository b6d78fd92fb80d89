"""`aggnet sweep --grid NAME=V1,V2 [--grid ...] [run options]`: one `aggnet run` per point of a grid of
run options, as many at once as the machine holds, one table and one figure at the end, resumable.

    aggnet sweep --workload allreduce --elements 200000 --grid topo=star4,tree2 --grid scheme=innet,ring \\
                 --grid link-mbps=50,100 --out runs        # 8 points into runs/sweep-<ts>/
    aggnet sweep --resume runs/sweep-<ts>                  # after an interruption: the points not done

A grid axis is any `aggnet run` option without its dashes (topo, k, algo, scheme, workers, link-mbps,
scale, elements, lanes, ...); the points are every combination, in the order the axes are given,
each run with the sweep's other options as `python -m testbed.cli run ... --out SWEEP/points/pNN`.
Every value is checked before anything starts (one line naming the option).

How many run at once: runs on one machine take run slots of their own (testbed.slots), but they
share its cores, and a run the cores bound measured the machine, not the network. So the fidelity
monitor's verdict is the guard: the sweep starts one run, allows one more at once after every run
the cores did not bind (up to --max-parallel), and when a run that shared the machine with others
was bound by the cores it halves that number and runs the point again. A point the cores bound
while it ran alone keeps its result (its results.json and the table say so).

SWEEP/sweep.json holds the grid, the options and every point's state (pending, done, failed) and
summary, rewritten as each run ends; `--resume` runs the points not done (a point whose run wrote
its results.json before the sweep recorded it counts as done). Interrupted (Ctrl-C, SIGTERM), the
sweep stops its runs (each tears its network down) and leaves the rest pending. At the end:
the table printed and in SWEEP/sweep.md, the figure SWEEP/sweep.png (each point's time, the
link-bound time beside it, coloured by what bound it); exit 1 if a point failed.
"""
from __future__ import annotations

import argparse
import itertools
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

POLL_S = 0.5
STATE = "sweep.json"


class SweepError(Exception):
    """A grid or sweep folder that cannot be used (one line; exit 2)."""

    exit_code = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from testbed import run_cli

    parser.add_argument("--grid", action="append", default=[], metavar="NAME=V1,V2,...",
                        help="an axis of the grid: a run option (without --) and its values (repeatable)")
    parser.add_argument("--max-parallel", type=int, default=4, metavar="N",
                        help="never more runs at once than this (default 4; the cores' verdict decides below it)")
    parser.add_argument("--resume", metavar="SWEEP_DIR", help="continue the sweep in this folder (its points not done)")
    run_cli.add_run_options(parser)


# ---------------------------------------------------------------------------- the grid

def parse_grid(axes: list[str]) -> dict[str, list[str]]:
    """{option name: values} of --grid NAME=V1,V2 axes; SweepError for a malformed or repeated one."""
    grid: dict[str, list[str]] = {}
    for axis in axes:
        name, sep, values = axis.partition("=")
        name = name.strip().lstrip("-")
        items = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not items:
            raise SweepError(f"--grid {axis!r}: give NAME=V1,V2,... (NAME a run option, e.g. topo=star4,tree2)")
        if name in grid:
            raise SweepError(f"--grid {name}: given twice")
        grid[name] = items
    if not grid:
        raise SweepError("aggnet sweep: give at least one --grid NAME=V1,V2,...")
    return grid


def points(grid: dict[str, list[str]]) -> list[dict[str, str]]:
    """Every combination of the axes' values, the first axis varying slowest."""
    return [dict(zip(grid, values)) for values in itertools.product(*grid.values())]


def point_argv(values: dict[str, str]) -> list[str]:
    return [arg for name, value in values.items() for arg in (f"--{name}", value)]


def check_points(base: list[str], pts: list[dict[str, str]]) -> None:
    """Parse every point's command line as `aggnet run` would: ConfigError or SweepError (one line) for a bad one."""
    from testbed import run_cli

    parser = argparse.ArgumentParser(prog="aggnet run", exit_on_error=False)
    run_cli.add_run_options(parser)
    for values in pts:
        try:
            args, unknown = parser.parse_known_args([*base, *point_argv(values)])
        except argparse.ArgumentError as exc:
            raise SweepError(f"--grid: {exc}") from None
        if unknown:
            raise SweepError(f"--grid: {unknown[0]} is not an `aggnet run` option")
        run_cli.config_from_args(args)


# ---------------------------------------------------------------------------- state

def new_sweep(args: argparse.Namespace) -> Path:
    """The sweep folder for a new sweep, its sweep.json written with every point pending."""
    from config import given_argv
    from testbed.config import RunConfig

    grid = parse_grid(args.grid)
    base = strip_option(given_argv(RunConfig, args), "--out")  # each point's run gets its own
    out = Path(vars(args).get("out", "runs"))
    pts = points(grid)
    check_points(base, pts)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder, n = out / f"sweep-{stamp}", 1
    while folder.exists():
        n += 1
        folder = out / f"sweep-{stamp}-{n}"
    folder.mkdir(parents=True)
    width = len(str(len(pts)))
    state = {"grid": grid, "options": base,
             "points": [{"id": f"p{i + 1:0{width}d}", "values": v, "status": "pending"} for i, v in enumerate(pts)]}
    save(folder, state)
    return folder


def strip_option(argv: list[str], flag: str) -> list[str]:
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == flag:
            skip = True
        else:
            out.append(arg)
    return out


def load_state(folder: Path) -> dict:
    try:
        return json.loads((folder / STATE).read_text())
    except (OSError, ValueError) as exc:
        raise SweepError(f"--resume {folder}: no readable {STATE} there ({exc})") from None


def save(folder: Path, state: dict) -> None:
    tmp = folder / (STATE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    tmp.replace(folder / STATE)


def results_of(folder: Path, point: dict) -> dict | None:
    """The results.json a point's run wrote, if any."""
    found = sorted((folder / "points" / point["id"]).glob("*/results.json"))
    return json.loads(found[-1].read_text()) if found else None


def summary(results: dict) -> dict[str, Any]:
    """What the table and figure show of a point's run."""
    fidelity = results.get("fidelity") or {}
    bottleneck = fidelity.get("bottleneck") or {}
    time_key = next((k for k in ("seconds", "iteration_s", "step_time_s") if results.get(k) is not None), None)
    correct = results.get("allreduce_correct", results.get("sums_correct"))
    return {"time_s": results.get(time_key) if time_key else None, "measure": time_key,
            "link_bound_s": results.get("link_bound_s"), "correct": correct,
            "exact": results.get("allreduce_exact"), "bottleneck": bottleneck.get("kind"),
            "bottleneck_name": bottleneck.get("name"), "bottleneck_load": bottleneck.get("load"),
            "scale": (results.get("time_scale") or {}).get("factor", 1), "wall_time_s": results.get("wall_time_s"),
            "run_dir": results.get("run_dir"), "error": results.get("error")}


# ---------------------------------------------------------------------------- running

class Sweeper:
    """Runs the pending points of a sweep folder, as many at once as the guard allows (module docstring)."""

    def __init__(self, folder: Path, max_parallel: int, console: Any):
        self.folder, self.console = folder, console
        self.state = load_state(folder)
        self.max_parallel = max(1, max_parallel)
        self.limit = 1
        self.running: dict[str, tuple[subprocess.Popen, int]] = {}  # point id -> (run, most runs at once during it)

    def point(self, pid: str) -> dict:
        return next(p for p in self.state["points"] if p["id"] == pid)

    def run(self) -> None:
        for p in self.state["points"]:
            if p["status"] != "done" and (results := results_of(self.folder, p)) is not None:
                p.update(status="done", summary=summary(results))  # written before an interruption was recorded
        save(self.folder, self.state)
        queue = [p["id"] for p in self.state["points"] if p["status"] != "done"]
        try:
            while queue or self.running:
                while queue and len(self.running) < self.limit:
                    self.start(queue.pop(0))
                time.sleep(POLL_S)
                for pid in [pid for pid, (proc, _) in self.running.items() if proc.poll() is not None]:
                    if self.finish(pid):
                        queue.insert(0, pid)
        finally:
            self.stop_all()
            save(self.folder, self.state)

    def start(self, pid: str) -> None:
        point = self.point(pid)
        out = self.folder / "points" / pid
        out.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "testbed.cli", "run", *self.state["options"], *point_argv(point["values"]),
                "--out", str(out)]
        with open(out / "aggnet.out", "ab") as log:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.running[pid] = (proc, 0)
        at_once = len(self.running)
        self.running = {k: (p, max(n, at_once)) for k, (p, n) in self.running.items()}
        point.update(status="running")
        self.console.print(f"sweep: {pid} {_values(point['values'])} started ({at_once} at once)")

    def finish(self, pid: str) -> bool:
        """Record a finished point; True when it must run again (the cores bound it while it shared them)."""
        proc, at_once = self.running.pop(pid)
        point = self.point(pid)
        results = results_of(self.folder, point)
        cores_bound = results is not None and ((results.get("fidelity") or {}).get("bottleneck") or {}).get("kind") == "machine"
        if cores_bound and at_once > 1:
            self.limit = max(1, self.limit // 2)
            for stale in sorted((self.folder / "points" / pid).glob("*/results.json")):
                stale.rename(stale.with_name("results.cores-bound.json"))
            self.console.print(f"sweep: {pid} was bound by the cores with {at_once} runs at once: again, "
                               f"{self.limit} at a time")
            point.update(status="pending")
            return True
        if not cores_bound:
            self.limit = min(self.max_parallel, self.limit + 1)
        if proc.returncode == 0 and results is not None:
            point.update(status="done", summary=summary(results))
        else:
            last = (self.folder / "points" / pid / "aggnet.out").read_text(errors="replace").strip().splitlines()
            point.update(status="failed", error=last[-1] if last else f"exit code {proc.returncode}",
                         summary=summary(results) if results else None)
        self.console.print(f"sweep: {pid} {point['status']}" + (f": {point['error']}" if point.get("error") else ""))
        save(self.folder, self.state)
        return False

    def stop_all(self) -> None:
        """SIGTERM every run still going (each tears its network down) and wait for them; their points stay pending."""
        for proc, _ in self.running.values():
            proc.send_signal(signal.SIGTERM)
        for pid, (proc, _) in self.running.items():
            proc.wait()
            self.point(pid).update(status="pending")
        self.running = {}


def _values(values: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


# ---------------------------------------------------------------------------- table and figure

def table_rows(state: dict) -> tuple[list[str], list[list[str]]]:
    """The sweep's table: a column per axis, then what each point measured (in the cluster's time: its
    all-reduce, iteration or step, and the time its busiest link needed at its rate), what bound it."""
    axes = list(state["grid"])
    header = [*axes, "time s", "links s", "ratio", "F", "sum", "bound by", "status"]
    rows = []
    for p in state["points"]:
        s = p.get("summary") or {}
        t, lb = s.get("time_s"), s.get("link_bound_s")
        kind = "cores" if s.get("bottleneck") == "machine" else (s.get("bottleneck") or "").split(" ")[0]
        bound = f"{kind} {s['bottleneck_load']:.0%}" if kind else ""
        sum_text = "" if s.get("correct") is None else "exact" if s.get("exact") else "ok" if s["correct"] else "WRONG"
        rows.append([*(p["values"][a] for a in axes), f"{t:.3f}" if t is not None else "",
                     f"{lb:.3f}" if lb else "", f"{t / lb:.2f}" if t and lb else "", f"{s.get('scale', '')}",
                     sum_text, bound or ("none" if s else ""), p["status"]])
    return header, rows


def write_report(folder: Path, state: dict, console: Any) -> None:
    """The table (printed, and SWEEP/sweep.md) and the figure (SWEEP/sweep.png)."""
    from rich import box
    from rich.table import Table

    from testbed import plots

    header, rows = table_rows(state)
    table = Table(title=f"sweep {folder}", title_justify="left", box=box.SIMPLE_HEAD)
    for column in header:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    (folder / "sweep.md").write_text("\n".join(lines) + "\n")
    plots.plot_sweep(state, folder / "sweep.png")
    console.print(f"sweep: table in {folder}/sweep.md, figure in {folder}/sweep.png")


def _interrupt(*_: Any) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    signal.signal(signal.SIGTERM, _interrupt)  # like Ctrl-C: the runs are stopped, their points stay pending
    console = Console()
    if args.resume:
        if args.grid:
            raise SweepError("--resume continues a sweep with its own grid and options; give no --grid")
        folder = Path(args.resume)
        load_state(folder)
    else:
        folder = new_sweep(args)
    console.print(f"sweep: {len(load_state(folder)['points'])} points in {folder}")
    sweeper = Sweeper(folder, args.max_parallel, console)
    sweeper.run()
    write_report(folder, sweeper.state, console)
    return 1 if any(p["status"] == "failed" for p in sweeper.state["points"]) else 0
