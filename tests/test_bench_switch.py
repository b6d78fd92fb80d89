"""scripts/bench_switch.py as a user runs it, cut short: `aggnet switch` on p4c's JSON and
simple_switch_grpc on the same JSON and veths, one short window each; both forward, and the JSON
holds their rates, the BMv2 binary used and the ratio between them. Root only; run under
`flock /tmp/aggnet-net.lock` (it makes namespaces and veths, and deletes them)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
P4REF = Path("/opt/p4ref/bin")  # where the bench finds p4c and simple_switch_grpc

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces and veth pairs)"),
    pytest.mark.skipif(not ((P4REF / "p4c").exists() and (P4REF / "simple_switch_grpc").exists()),
                       reason=f"needs p4c and simple_switch_grpc in {P4REF}"),
    pytest.mark.timeout(600 + 120),  # the bench's own limit, and its teardown (pyproject's cap: 420 s)
]


def test_bench_switch_runs_aggnet_on_p4c_json_beside_simple_switch_grpc(tmp_path):
    out = tmp_path / "switch.json"
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "bench_switch.py"), "--targets", "native_json,bmv2_grpc",
                           "--programs", "ipv4_lpm", "--runs", "1", "--window", "0.5", "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(out.read_text())
    fwd = result["programs"]["ipv4_lpm"]
    assert fwd["native_json"]["median_pps"] > 0 and fwd["bmv2_grpc"]["median_pps"] > 0, fwd
    assert fwd["bmv2_grpc"]["binary"].endswith("/simple_switch_grpc")
    assert result["ratios"]["native_json_vs_bmv2_grpc_ipv4_lpm"] == round(
        fwd["native_json"]["median_pps"] / fwd["bmv2_grpc"]["median_pps"], 3)
