"""scripts/bench_models.py and scripts/bench_goodput.py as a user runs them, cut to one case each:
NCF on 4 workers at 10 Gb/s emulated (its GPU profile, one iteration): every scheme's run at the
case's time scale, the JSON with the speedups taken from the runs' own iteration times and the
analytic model's beside them, the PNG and the table; the all-reduce on 4 workers at 100 Gb/s
emulated: goodput from the runs, against each scheme's link bound. Whether a run was bound by a
link depends on how busy the machine is, so the time scale each scheme ends at is checked against
the script's rule applied to what its runs measured (--max-scale 16: at most one repeat of
in-network and the ring, 4 times slower). Root only (Mininet)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from testbed.timescale import time_scale_of

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet"),
              pytest.mark.timeout(900 + 120)]  # the script's own limit, and its teardown (pyproject's cap: 420 s)


def test_bench_models_writes_the_figure_its_json_and_its_table(tmp_path):
    done = subprocess.run([sys.executable, "scripts/bench_models.py", "--out", str(tmp_path), "--models", "ncf",
                           "--workers", "4", "--rates-gbps", "10", "--iterations", "1", "--min-scale", "4",
                           "--max-scale", "16"],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    figure = json.loads((tmp_path / "models.json").read_text())
    case, = figure["models"]["ncf"]
    assert (case["workers"], case["emulated_gbps"]) == (4, 10.0)
    runs = case["schemes"]
    assert all(runs[s]["sums_correct"] is True for s in ("innet", "ring", "ps"))
    tried = scales_tried(tmp_path / "ncf-4w-10gbps")
    for scheme in ("innet", "ring"):  # from the case's scale (0.4 per Gb/s, at least 4), 4x slower while not
        scales, bound = zip(*tried[scheme])  # bound by a link, up to 16
        assert scales[0] == 4.0, tried
        assert all(not bound[i - 1] and scales[i] == 4 * scales[i - 1] for i in range(1, len(scales))), tried
        assert bound[-1] or 4 * scales[-1] > 16, tried
    assert [scale for scale, _ in tried["ps"]] == [4.0], tried  # never repeated
    assert [runs[s]["time_scale"] for s in ("innet", "ring", "ps")] == [tried[s][-1][0] for s in ("innet", "ring", "ps")]
    assert case["speedup_vs_ring"] == runs["ring"]["iteration_s"] / runs["innet"]["iteration_s"]
    assert case["speedup_vs_ps"] == runs["ps"]["iteration_s"] / runs["innet"]["iteration_s"]
    assert case["analytic_speedup_vs_ring"] == runs["ring"]["analytic_iteration_s"] / runs["innet"]["analytic_iteration_s"]
    for run in runs.values():  # the compute is the profile's (A100), so no scheme is faster than it
        assert run["iteration_s"] >= run["compute_s"] == pytest.approx(1048576 / 34.08e6)
        assert run["bound_over"] == "communication"
    assert (tmp_path / "models.png").stat().st_size > 10_000
    row = (tmp_path / "models.md").read_text().splitlines()[2]
    assert row.startswith("| ncf, 4, 10 Gb/s | ") and f"({case['speedup_vs_ring']:.2f}x; " in row


def test_bench_goodput_writes_goodput_against_the_link_bounds(tmp_path):
    elements = 200_000
    done = subprocess.run([sys.executable, "scripts/bench_goodput.py", "--out", str(tmp_path), "--workers", "4",
                           "--elements", str(elements)], capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    goodput = json.loads((tmp_path / "goodput.json").read_text())
    case, = goodput["cases"]
    # the bounds: 550 frames of 1514 bytes (364 values each) a worker in-network; the ring 3/4 of the
    # vector each way in 1448-byte segments of 1514-byte frames, and the ACKs of the other direction
    assert case["innet"]["bound"] == pytest.approx(elements / (550 * 1514 * 8 / 100e9))
    assert case["ring"]["bound"] == pytest.approx(elements / (1.5 * elements * 4 * (1514 + 33) / 1448 * 8 / 100e9))
    for scheme in ("innet", "ring"):
        run = json.loads((Path(case[scheme]["run_dir"]) / "results.json").read_text())
        assert case[scheme]["exact"] is True and case[scheme]["time_scale"] == 100e9 / 25e6
        assert case[scheme]["goodput"] == run["goodput_elements_per_s"] == pytest.approx(elements / run["seconds"])
        assert 0 < case[scheme]["of_bound"] <= 1.05  # its busiest link's bytes at its rate (and a token bucket)
    assert (tmp_path / "goodput.png").stat().st_size > 10_000
    assert (tmp_path / "goodput.md").read_text().splitlines()[2].startswith("| 4 | ")


def scales_tried(case: Path) -> dict[str, list[tuple[float, bool]]]:
    """Per scheme, in the order run: each run's time scale and whether the fidelity monitor found it bound by a link."""
    tried: dict[str, list[tuple[float, bool]]] = {}
    for comparison in sorted(case.glob("compare-*/comparison.json"), key=lambda p: p.stat().st_mtime):
        for scheme, run_dir in json.loads(comparison.read_text())["runs"].items():
            run = json.loads((Path(run_dir) / "results.json").read_text())
            bound = ((run.get("fidelity") or {}).get("bottleneck") or {}).get("kind") == "link"
            tried.setdefault(scheme, []).append((time_scale_of(run), bound))
    return tried
