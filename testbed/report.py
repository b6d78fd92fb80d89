"""What a run leaves behind: switch counters, bytes per link, results.json, tables.

The experiment runner calls, in this order (plots live in testbed/plots.py):

    from testbed import report
    counters = report.collect_counters(topo, conns, job_ids=[1])   # conns: {switch: SwitchConnection}
    results = {"config": {...}, "seeds": {...}, "final_accuracy": 0.93, "steps": 200,
               "step_time_s": 0.041, "link_bytes": report.link_bytes(topo, counters),
               "counters": counters, "versions": report.versions("embedded")}
    report.write_results(run_dir, results)                         # validates, writes run_dir/results.json
                                                                   # (all-reduce: write_results(d, r, "allreduce"))
    report.print_counters(counters, topo)                          # the table at the end of `aggnet run`

Counters, as `collect_counters` returns them (and as results.json stores them):

    {"s1": {"jobs":  {1: {"received", "aggregated", "completed", "duplicates",
                          "retx_answered", "overflows", "spilled"}},  # packets, aggnet.p4's per-job counters
            "ports": {1: {"rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "ecn_marks"}}}}

Job ids and port numbers are ints here and strings once read back from JSON; every function
in this module accepts both. A reader is anything with `read(entities) -> entities` (finsy's
P4CounterEntry): a `controller.p4rt.SwitchConnection`, the controller's primary
one or a `read_only=True` one that never takes part in arbitration (so it can look at a
network another controller owns, as `aggnet counters` does).
`read_switch(reader, ports, job_ids)` reads one switch when there is no topology at hand.

`link_bytes` sums both directions of each link: a direction is counted where it leaves a
switch (port_tx, after the traffic manager's drops: what went on the wire), or where it
enters one when it leaves a host (port_rx). Host links are named switch first ("s1-h1"),
links between switches in topology-file order ("s2-s1" when the file says a: s2, b: s1).

results.json is validated before it is written (`validate_results`): the training workload
needs config, seeds, final_accuracy (0..1), steps, step_time_s (median), link_bytes,
counters, versions; the all-reduce workload needs config, seeds, allreduce_exact, elements,
workers, seconds, goodput_elements_per_s, counters, versions. Other fields are welcome.
A bad field raises ResultsError naming results.json and the field: a bug in the caller.

Comparison across schemes: `compare_summary({"innet": results, "ps": results, ...})` ->
per scheme the time (training: the median step; all-reduce: the whole all-reduce), accuracy
(training) or whether every sum was right (all-reduce), and the bytes of the busiest link (or
of a named link), and `comparison_table(summary)` prints it.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib.metadata
import json
import math
import os
import platform
import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from controller.monitor import ECN_MARKED, JOB_COUNTERS, PORT_RX, PORT_TX  # aggnet.p4's names (docs/protocol.md)
from testbed.fidelity import BOUND_BY

PORT_FIELDS = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "ecn_marks")
RESULTS_FILE = "results.json"


class ResultsError(Exception):
    """results.json would be missing a field or hold a wrong value (a bug in the caller)."""

    exit_code = 3


# ---------------------------------------------------------------------------- reading counters

class CounterReader(Protocol):
    def read(self, entities: Sequence[Any]) -> list[Any]:
        """Every entity matching the (possibly wildcard) request entities."""


def collect_counters(topology: Any, readers: Mapping[str, CounterReader],
                     job_ids: Iterable[int] | None = None) -> dict[str, dict]:
    """Per-job and per-port counters of every switch in `readers` (see the module docstring), many switches
    read at once.

    Ports are the switch's ports in the topology. Jobs are `job_ids`, or, when None, every
    job that any per-job counter of that switch has seen.
    """
    from controller.parallel import each

    job_ids = None if job_ids is None else list(job_ids)
    return each(sorted(readers, key=natural_key), lambda switch: read_switch(
        readers[switch], sorted(link.port_on(switch) for link in topology.links_of(switch)), job_ids))


def read_switch(reader: CounterReader, ports: Iterable[int], job_ids: Iterable[int] | None = None) -> dict:
    """{"jobs": ..., "ports": ...} of one switch, in one Read: the cells of its ports and of `job_ids`
    (every job counter's cells when None: the jobs are those that counted a packet). Reading whole
    counters took 80 switches' thousands of cells through the P4Runtime client's decoding: 11 s at k=8."""
    from finsy import P4CounterEntry

    ports = sorted(ports)
    jobs = None if job_ids is None else sorted(set(job_ids))
    wanted = [P4CounterEntry(name, index=j) for name in JOB_COUNTERS.values() for j in ([None] if jobs is None else jobs)]
    wanted += [P4CounterEntry(name, index=p) for name in (PORT_RX, PORT_TX, ECN_MARKED) for p in ports]
    cells: dict[str, dict[int, tuple[int, int]]] = {}
    for e in reader.read(wanted):
        cells.setdefault(e.counter_id, {})[e.index] = (e.packet_count, e.byte_count)
    if jobs is None:
        jobs = sorted({j for name in JOB_COUNTERS.values() for j, (packets, _) in cells.get(name, {}).items() if packets})
    rx, tx, ecn = (cells.get(name, {}) for name in (PORT_RX, PORT_TX, ECN_MARKED))
    return {"jobs": {j: {short: cells.get(name, {}).get(j, (0, 0))[0] for short, name in JOB_COUNTERS.items()}
                     for j in jobs},
            "ports": {p: dict(zip(PORT_FIELDS, (*rx.get(p, (0, 0)), *tx.get(p, (0, 0)), ecn.get(p, (0, 0))[0])))
                      for p in ports}}


def natural_key(name: str) -> list:
    """Sort key that puts s2 before s10 and s1-h2 before s1-h10."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _port(counters: Mapping[str, Any], switch: str, port: int) -> Mapping[str, int] | None:
    ports = counters.get(switch, {}).get("ports", {})
    return ports.get(port, ports.get(str(port)))


# ---------------------------------------------------------------------------- links

def link_name(topology: Any, link: Any) -> str:
    """"s1-h1" for a host link (switch first), "s1-s2" in file order between switches."""
    if topology.is_host(link.a):
        return f"{link.b}-{link.a}"
    return f"{link.a}-{link.b}"


def link_bytes(topology: Any, counters: Mapping[str, Any]) -> dict[str, int]:
    """Bytes carried by each link, both directions summed, from the switches' port counters.

    A link none of whose ends were read is left out; a direction is taken from the sending
    switch, or from the receiving switch when a host sent it.
    """
    out = {}
    for link in topology.links:
        total, seen = 0, False
        for src, dst in ((link.a, link.b), (link.b, link.a)):
            sent = _port(counters, src, link.port_on(src)) if topology.is_switch(src) else None
            got = _port(counters, dst, link.port_on(dst)) if topology.is_switch(dst) else None
            if sent is not None:
                total, seen = total + sent["tx_bytes"], True
            elif got is not None:
                total, seen = total + got["rx_bytes"], True
        if seen:
            out[link_name(topology, link)] = total
    return out


# ---------------------------------------------------------------------------- results.json

def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check(ok: bool, field: str, value: Any, want: str) -> None:
    if not ok:
        raise ResultsError(f"{RESULTS_FILE}: field {field}: {value!r} is not {want}")


_NON_NEGATIVE_INT = (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "an integer >= 0")
_NON_NEGATIVE = (lambda v: _is_number(v) and v >= 0, "a number >= 0")
_FIELDS = {
    "config": (lambda v: isinstance(v, dict), "an object"),
    "seeds": (lambda v: isinstance(v, dict), "an object"),
    "counters": (lambda v: isinstance(v, dict), "an object"),
    "versions": (lambda v: isinstance(v, dict), "an object"),
    "link_bytes": (lambda v: isinstance(v, dict) and all(isinstance(n, int) and n >= 0 for n in v.values()),
                   "an object of byte counts"),
    "final_accuracy": (lambda v: _is_number(v) and 0 <= v <= 1, "a number in 0..1"),
    "steps": _NON_NEGATIVE_INT,
    "step_time_s": _NON_NEGATIVE,
    "allreduce_exact": (lambda v: isinstance(v, bool), "true or false"),
    "elements": _NON_NEGATIVE_INT,
    "workers": _NON_NEGATIVE_INT,
    "seconds": _NON_NEGATIVE,
    "goodput_elements_per_s": _NON_NEGATIVE,
    "iteration_s": _NON_NEGATIVE,
    "compute_s": _NON_NEGATIVE,
    "sums_correct": (lambda v: isinstance(v, bool), "true or false"),
}
REQUIRED = {
    "train": ("config", "seeds", "final_accuracy", "steps", "step_time_s", "link_bytes", "counters", "versions"),
    "allreduce": ("config", "seeds", "allreduce_exact", "elements", "workers", "seconds", "goodput_elements_per_s",
                  "counters", "versions"),
    "model": ("config", "seeds", "model", "workers", "iteration_s", "compute_s", "exposed_comm_s", "sums_correct",
              "link_bytes", "counters", "versions"),
    "script": ("config", "seeds", "script", "workers", "link_bytes", "counters", "versions"),
}


def validate_results(results: Mapping[str, Any], workload: str = "train") -> None:
    """Raise ResultsError unless `results` has the workload's required fields with sane values."""
    if workload not in REQUIRED:
        raise ResultsError(f"{RESULTS_FILE}: unknown workload {workload!r} (choose from {', '.join(REQUIRED)})")
    for field in REQUIRED[workload]:
        if field not in results:
            raise ResultsError(f"{RESULTS_FILE}: field {field} is missing ({workload} workload)")
    for field, value in results.items():
        if field in _FIELDS:
            ok, want = _FIELDS[field]
            _check(ok(value), field, value, want)
    for switch, data in results["counters"].items():
        _check(isinstance(data, dict) and {"jobs", "ports"} <= set(data), f"counters.{switch}", data,
               "an object with jobs and ports")


def write_results(run_dir: str | os.PathLike, results: Mapping[str, Any], workload: str = "train") -> Path:
    """Validate and write RUN_DIR/results.json (sorted keys, indented); return its path."""
    validate_results(results, workload)
    path = Path(run_dir) / RESULTS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(_json_keys(results), sort_keys=True, indent=2)
    path.write_text(text + "\n")
    return path


def _json_keys(value: Any) -> Any:
    """Int dict keys as strings, so sorting keys never compares int with str."""
    if isinstance(value, Mapping):
        return {str(k): _json_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_keys(v) for v in value]
    return value


def versions(target: str = "embedded") -> dict[str, str]:
    """What produced the numbers: python, torch, numpy, aggnet (+ git commit), the P4 target."""
    def dist(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    aggnet = dist("aggnet")
    commit = _git_commit()
    out = {"python": platform.python_version(), "torch": dist("torch"), "numpy": dist("numpy"),
           "aggnet": f"{aggnet} ({commit})" if commit else aggnet}
    if target == "bmv2":
        out["target"] = f"bmv2 {_first_line(['simple_switch_grpc', '--version'])}"
    else:
        out["target"] = f"{target} (aggnet {aggnet})"
    return out


def _git_commit() -> str | None:
    """Short commit of the source tree, '+dirty' when it has local changes; None outside git."""
    repo = Path(__file__).resolve().parent.parent
    if shutil.which("git") is None or not (repo / ".git").exists():
        return None
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + ("+dirty" if dirty else "")


def _first_line(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "(version unknown)"
    return ((done.stdout or done.stderr).strip().splitlines() or ["(version unknown)"])[0]


# ---------------------------------------------------------------------------- tables

class WordWrapped:
    """A table that fits the width it is rendered in without cutting a word (a number, a header
    word, a link name) across lines: rich shrinks the widest columns of a table that is too wide
    below their longest word, which splits "accuracy" or "5,914,800" mid-way. Here each column
    gets at least its longest word, the columns whose cells are longer share what is left and wrap
    between words, and when even the longest words do not fit side by side every row is stacked
    as "header value" lines."""

    def __init__(self, table: Table):
        self.table = table

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.table)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield fitted(self.table, options.max_width)


def fitted(table: Table, width: int) -> RenderableType:
    """`table` with column widths that keep every word whole within `width` (WordWrapped)."""
    columns = table.columns
    texts = [[_plain(column.header), *map(_plain, column.cells)] for column in columns]
    longest = [max(cell_len(cell) for cell in cells) for cells in texts]
    shortest = [max((cell_len(word) for cell in cells for word in cell.split()), default=1) for cells in texts]
    _, right, _, left = table.padding
    frame = len(columns) * (left + right) + (2 if table.box and table.show_edge else 0) + \
        (len(columns) - 1 if table.box else 0)
    room = width - frame
    if sum(longest) <= room:
        return table
    if sum(shortest) > room:
        return _stacked(table, texts)
    widths = list(shortest)
    spare = room - sum(widths)
    for i in sorted(range(len(columns)), key=lambda i: longest[i] - shortest[i]):  # the least wanting first:
        grow = min(longest[i] - widths[i], spare)                                    # most columns stay on one line
        widths[i] += grow
        spare -= grow
    out = copy.copy(table)
    out.columns = [dataclasses.replace(column, width=w) for column, w in zip(columns, widths)]
    return out


def _plain(cell: Any) -> str:
    return Text.from_markup(cell).plain if isinstance(cell, str) else cell.plain if isinstance(cell, Text) else ""


def _stacked(table: Table, texts: list[list[str]]) -> Table:
    """One "header value" line per cell, a blank line between rows: for terminals too narrow for the columns."""
    out = Table(title=table.title, title_justify="left", caption=table.caption, caption_justify="left", box=None,
                show_header=False, padding=(0, 1, 0, 0))
    out.add_column(style="bold")
    out.add_column(overflow="fold")
    for row in range(len(texts[0]) - 1):
        if row:
            out.add_row()
        for cells in texts:
            out.add_row(cells[0], cells[row + 1])
    return out


# Short headers keep the tables within 80 columns; the caption says what they mean.
JOB_HEADERS = {"received": "recv", "aggregated": "aggr", "completed": "done", "duplicates": "dup",
               "retx_answered": "retx", "overflows": "ovfl", "spilled": "spill"}
JOB_LEGEND = ("recv: agg packets received, aggr: contributions added, done: slot rounds completed, "
              "dup: duplicates, retx: duplicates answered with the stored result, ovfl: saturated sums, "
              "spill: chunks that found their shared slot taken (to the parameter server)")
PORT_HEADERS = {"rx_packets": "rx pkts", "rx_bytes": "rx bytes", "tx_packets": "tx pkts", "tx_bytes": "tx bytes",
                "ecn_marks": "ecn"}
PORT_LEGEND = "ecn: packets the port marked as congested, aggregation or TCP (its queue past --ecn-fraction full)"


def counters_table(counters: Mapping[str, Any], topology: Any = None) -> Table:
    """One table with two parts: per-job aggregation counters, per-port packets/bytes.

    With the topology, each port is labelled with the node on its other end. Numbers are
    exact and never cut short nor split (WordWrapped).
    """
    jobs = _table("aggregation per job (packets)", ("switch", "job"), JOB_HEADERS.values())
    ports = _table("traffic per port", ("switch", "port", "peer"), PORT_HEADERS.values())
    for switch in sorted(counters, key=natural_key):
        for job, c in sorted(counters[switch]["jobs"].items(), key=lambda kv: int(kv[0])):
            jobs.add_row(switch, str(job), *(str(c[f]) for f in JOB_HEADERS))
        for port, c in sorted(counters[switch]["ports"].items(), key=lambda kv: int(kv[0])):
            ports.add_row(switch, str(port), _peer(topology, switch, int(port)), *(str(c[f]) for f in PORT_HEADERS))
    jobs.caption = JOB_LEGEND if jobs.row_count else "no aggregation job seen"
    ports.caption = PORT_LEGEND
    outer = Table.grid(padding=(1, 0))
    outer.add_row(WordWrapped(jobs))
    outer.add_row(WordWrapped(ports))
    return outer


def _table(title: str, labels: Iterable[str], numbers: Iterable[str]) -> Table:
    table = Table(title=title, title_justify="left", caption_justify="left", box=box.SIMPLE_HEAD)
    for label in labels:
        table.add_column(label, justify="right" if label in ("job", "port") else "left", overflow="fold")
    for label in numbers:
        table.add_column(label, justify="right", overflow="fold")
    return table


def _peer(topology: Any, switch: str, port: int) -> str:
    if topology is None:
        return ""
    try:
        return topology.neighbor_on(switch, port)
    except KeyError:
        return "?"  # a topology that does not match the running switch


def print_counters(counters: Mapping[str, Any], topology: Any = None, console: Console | None = None) -> None:
    """Print `counters_table` (the end of `aggnet run`, and `aggnet counters`)."""
    (console or Console()).print(counters_table(counters, topology))


# ---------------------------------------------------------------------------- comparison

def accuracy_curve(records: list[dict]) -> list[tuple[float, float]]:
    """(training time so far, test accuracy) at every evaluation of a worker's step records.

    Step 0 is left out of the time: it holds the wait for the job's last worker process to start
    (seconds of process start-up skew, different in every run), not the network's work."""
    out, elapsed = [], 0.0
    for record in records:
        if record.get("step") != 0:
            elapsed += record.get("step_time_s", 0.0)
        if "test_accuracy" in record:
            out.append((round(elapsed, 3), record["test_accuracy"]))
    return out


def time_to_accuracy(records: list[dict], target: float | None) -> float | None:
    """Training time (as in accuracy_curve) until the first evaluation at or above `target`."""
    if target is None:
        return None
    return next((t for t, accuracy in accuracy_curve(records) if accuracy >= target), None)


def compare_summary(results_by_scheme: Mapping[str, Mapping[str, Any]], link: str | None = None) -> dict[str, dict]:
    """Per scheme: time_s (median step, or the all-reduce), final_accuracy (training) or correct
    (all-reduce), and the link compared: `link` (e.g. the parameter server's, "s1-h1") or, when
    None, each run's busiest link."""
    summary = {}
    for scheme, results in results_by_scheme.items():
        links = results.get("link_bytes") or {}
        name = link if link is not None else max(links, key=lambda k: links[k], default=None)
        train = "seconds" not in results
        time_key = "iteration_s" if "iteration_s" in results else "step_time_s" if train else "seconds"
        summary[scheme] = {"time_s": results.get(time_key),
                           "final_accuracy": results.get("final_accuracy"),
                           "correct": None if train else results.get("allreduce_correct"),
                           "link": name, "link_bytes": links.get(name) if name else None,
                           "bottleneck": bottleneck_text(results.get("fidelity") or {})}
    # training: the time each scheme took to the best accuracy every scheme reached
    curves: dict[str, list[tuple[float, float]]] = {s: r.get("accuracy_curve") or [] for s, r in results_by_scheme.items()}
    target = min((max(a for _, a in curve) for curve in curves.values() if curve), default=None)
    for scheme, curve in curves.items():
        reached = None if target is None else next((t for t, a in curve if a >= target), None)
        summary[scheme].update(target_accuracy=target if curve else None, time_to_target_s=reached)
    return summary


def bottleneck_text(fidelity: Mapping[str, Any]) -> str:
    """What bound a run, short: "link s1->h5 97%", "switch s1 100%", "machine 2 cores 94%", or "none" below
    testbed.fidelity.BUSY. A verdict resolved in time (a scenario's jobs: testbed.fidelity.over_time) says
    more when the bottleneck moves, so it comes first: what bound the most of the time, if half of it or more
    ("links 81% of the time (s1->s3, s2->s3)", "process agg@h9 70% of the time (agg@h9)", "cores 60% of the
    time"), else "none"."""
    t = fidelity.get("over_time")
    if t:
        kind = max(("link", "process", "machine"), key=lambda k: t.get(k, 0.0))
        share = t.get(kind, 0.0)
        if share < 0.5:
            return "none"
        if kind == "machine":
            return f"cores {share:.0%} of the time"
        names = ", ".join(list(t[BOUND_BY[kind]])[:2])
        return f"{'links' if kind == 'link' else 'process'} {share:.0%} of the time ({names})"
    b = fidelity.get("bottleneck")
    return "none" if not b else f"{b['kind'].split()[0]} {b['name']} {b['load']:.0%}"


def comparison_table(summary: Mapping[str, Mapping[str, Any]]) -> WordWrapped:
    """Schemes side by side, with ratios to the first scheme (the one the others are compared to);
    light rules and one space of padding keep all its columns side by side in 80 columns."""
    allreduce = any(s["correct"] is not None for s in summary.values())
    table = Table(title="schemes compared", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False,
                  padding=(0, 1, 0, 0))
    target = next((s["target_accuracy"] for s in summary.values() if s["target_accuracy"] is not None), None)
    reach = [] if target is None else [f"time to {target:.3f} (s)"]
    columns = ("scheme", "all-reduce (ms)" if allreduce else "step time (ms)", "sum" if allreduce else "accuracy",
               *reach, "link", "link bytes", "bytes vs first", "time vs first", "bottleneck")
    for column in columns:
        table.add_column(column, justify="left" if column in ("scheme", "sum", "link", "bottleneck") else "right",
                         overflow="fold")  # only a terminal narrower than a word folds it
    first = next(iter(summary.values()), {})
    for scheme, s in summary.items():
        quality = ("right" if s["correct"] else "WRONG") if allreduce else _fmt(s["final_accuracy"], 1, "{:.3f}")
        reached = [_fmt(s["time_to_target_s"], 1, "{:.2f}")] if reach else []
        table.add_row(scheme, _fmt(s["time_s"], 1000, "{:.1f}"), quality, *reached,
                      s["link"] or "-", _fmt(s["link_bytes"], 1, "{:,.0f}"),
                      _ratio(s["link_bytes"], first.get("link_bytes")),
                      _ratio(s["time_s"], first.get("time_s")), s["bottleneck"])
    return WordWrapped(table)


def _fmt(value: Any, scale: float, spec: str) -> str:
    return "-" if value is None else spec.format(value * scale)


def _ratio(value: Any, base: Any) -> str:
    return "-" if value is None or not base else f"{value / base:.2f}x"
