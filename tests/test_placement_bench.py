"""scripts/bench_placement.py runs and writes the JSON scripts/bench.sh collects (small size here)."""
from __future__ import annotations

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_bench_writes_json(tmp_path):
    out = tmp_path / "placement.json"
    proc = subprocess.run([os.path.join(ROOT, ".venv", "bin", "python"), "scripts/bench_placement.py",
                           "--out", str(out), "--switches", "200", "--k", "8", "--seed", "5"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(out.read_text())
    assert (data["switches"], data["k"], data["seed"]) == (200, 8, 5)
    assert data["soar_seconds"] >= 0 and data["congestion_seconds"] >= 0
    assert 0 < data["soar_utilization"] < data["none_utilization"]
    assert data["congestion_max_link_load"] >= 1
