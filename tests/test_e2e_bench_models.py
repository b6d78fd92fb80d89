"""scripts/bench_models.py as a user runs it, cut to one case (ResNet-50, 4 workers, 10 Gb/s emulated,
one iteration): every scheme's run, in-network at its own time scale (--scheme-scale's default), the
JSON with the speedups taken from the runs' own iteration times, the PNG, and the table beside them.
Whether a run was bound by a link depends on how busy the machine is, so the time scale each scheme
ends at is checked against the script's rule applied to what its runs measured (--max-scale 4: at
most one repeat, of the ring). Root only (Mininet)."""
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
    done = subprocess.run([sys.executable, "scripts/bench_models.py", "--out", str(tmp_path), "--models", "resnet50",
                           "--workers", "4", "--rates-gbps", "10", "--link-mbps", "50", "--iterations", "1",
                           "--max-scale", "4"],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    figure = json.loads((tmp_path / "models.json").read_text())
    case, = figure["models"]["resnet50"]
    assert (case["workers"], case["emulated_gbps"]) == (4, 10.0)
    runs = case["schemes"]
    assert all(runs[s]["sums_correct"] is True for s in ("innet", "ring", "ps"))
    tried = scales_tried(tmp_path / "resnet50-4w-10gbps")
    for scheme, first in (("innet", 4.0), ("ring", 1.0)):  # repeated 4x slower while not bound by a link, up to 4
        scales, bound = zip(*tried[scheme])
        assert scales[0] == first, tried
        assert all(not bound[i - 1] and scales[i] == 4 * scales[i - 1] for i in range(1, len(scales))), tried
        assert bound[-1] or 4 * scales[-1] > 4, tried
    assert [scale for scale, _ in tried["ps"]] == [1], tried  # never repeated
    assert [runs[s]["time_scale"] for s in ("innet", "ring", "ps")] == [tried[s][-1][0] for s in ("innet", "ring", "ps")]
    assert case["speedup_vs_ring"] == runs["ring"]["iteration_s"] / runs["innet"]["iteration_s"]
    assert case["speedup_vs_ps"] == runs["ps"]["iteration_s"] / runs["innet"]["iteration_s"]
    for run in runs.values():  # the compute is the profile's, so no scheme is faster than it
        assert run["iteration_s"] >= run["compute_s"] and run["bound_over"] == "communication"
    assert (tmp_path / "models.png").stat().st_size > 10_000
    row = (tmp_path / "models.md").read_text().splitlines()[2]
    assert row.startswith("| resnet50, 4, 10 Gb/s | ") and f"({case['speedup_vs_ring']:.2f}x)" in row


def scales_tried(case: Path) -> dict[str, list[tuple[float, bool]]]:
    """Per scheme, in the order run: each run's time scale and whether the fidelity monitor found it bound by a link."""
    tried: dict[str, list[tuple[float, bool]]] = {}
    for comparison in sorted(case.glob("compare-*/comparison.json"), key=lambda p: p.stat().st_mtime):
        for scheme, run_dir in json.loads(comparison.read_text())["runs"].items():
            run = json.loads((Path(run_dir) / "results.json").read_text())
            bound = ((run.get("fidelity") or {}).get("bottleneck") or {}).get("kind") == "link"
            tried.setdefault(scheme, []).append((time_scale_of(run), bound))
    return tried
