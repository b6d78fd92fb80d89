"""scripts/bench_target.py runs every benchmark program and writes its JSON report."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_bench_target_writes_json(tmp_path):
    out = tmp_path / "target.json"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts/bench_target.py"), "--out", str(out),
                           "--packets", "300", "--rounds", "1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr  # 1 = below a floor (a loaded machine), still a report
    report = json.loads(out.read_text())
    results = report["results"]
    assert set(results) == {"ipv4_forwarding", "aggregation_32_lanes", "aggnet_32_lanes", "aggnet_64_lanes",
                            "aggnet_128_lanes"}
    for r in results.values():
        assert r["pps"] > 0 and r["floor_pps"] > 0 and r["meets_floor"] == (r["pps"] >= r["floor_pps"])
    assert results["aggregation_32_lanes"]["lanes"] == 32
    assert [results[f"aggnet_{n}_lanes"]["lanes"] for n in (32, 64, 128)] == [32, 64, 128]
    assert results["aggnet_64_lanes"]["packet_bytes"] == 14 + 20 + 8 + 16 + 64 * 4
    assert results["aggnet_64_lanes"]["scalar_pps"] > 0 and results["aggnet_64_lanes"]["vector_speedup"] > 0
