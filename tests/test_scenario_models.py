"""Root end-to-end: `aggnet experiment` of two model jobs, time-scaled, on Mininet leaf-spine
(tests/data/scenario/two_models.yaml): NCF from the start and ResNet-50 arriving later, each with its
A100 profile, a straggler slowing one worker of job a, heavy-tailed background flows. Checks each
job's results in the cluster's time, the arrival, the straggler, the flows, and the per-job verdict
measured over that job's own phases and links. One mode, split: the timeline's straggler takes a host
aggregator's seat in its job's tree, every bucket a round of its own length, and the job is timed on
its on-time worker; the other job is plain in-network, timed on its slowest rank."""
import json
import os
import subprocess
import sys

import e2e
import pytest

from testbed.scenario import load_scenario

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
SCENARIO = "tests/data/scenario/two_models.yaml"


def test_two_model_jobs_time_scaled_with_arrivals_stragglers_and_background(tmp_path):
    scn = load_scenario(SCENARIO)
    factor = scn.scale
    done = subprocess.run([sys.executable, "-m", "testbed.cli", "experiment", SCENARIO, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=900, cwd=e2e.REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    root, = [p for p in tmp_path.iterdir() if p.is_dir()]
    results = json.loads((root / "split" / "results.json").read_text())
    summary = json.loads((root / "summary.json").read_text())
    logs = root / "split" / "logs"
    t0 = json.loads(next(logs.glob("*.schedule.json")).read_text())["start"]  # the timeline's clock
    a, b = results["jobs"]["a"], results["jobs"]["b"]
    assert results["adapt_samples"] > 0  # mode split moves trees off congested links, as mode aware does
    edge = {"h1": "s3", "h3": "s4", "h5": "s5", "h7": "s6"}
    for name, model, workers, other, timed in (("a", "ncf", ("h1", "h3"), ("h5", "h7"), ("h1",)),
                                               ("b", "resnet50", ("h5", "h7"), ("h1", "h3"), ("h5", "h7"))):
        job = results["jobs"][name]
        assert job["model"] == model and job["profile"]["name"] == "a100" and job["sums_correct"] is True
        assert len(job["iteration_times_s"]) == 3 and job["iteration_p99_s"] >= job["iteration_median_s"]
        reports = [json.loads((logs / name / f"{h}.model.json").read_text()) for h in timed]
        for i, t in enumerate(job["iteration_times_s"]):  # the slowest on-time rank's, in the cluster's time
            assert t == pytest.approx(max((r["iterations"][i]["window"][1] - r["iterations"][i]["window"][0])
                                          for r in reports) / factor, rel=1e-6)
        assert job["iteration_median_s"] >= job["compute_s"] and job["emulated_link_gbps"] == pytest.approx(10.0)
        fid = job["fidelity"]
        assert fid["measured_over"] == "communication" and fid["seconds"] > 0
        assert {f"{h}->{edge[h]}" for h in workers} <= set(fid["link_utilization"])  # its own links,
        assert not {f"{h}->{edge[h]}" for h in other} & set(fid["link_utilization"])  # no other job's
        assert set(fid["host_cpu"]) == {f"{name}.{h}" for h in workers} | ({"agg@h2"} if name == "a" else set())
        over = fid["over_time"]  # the verdict resolved in time, on the job's own links
        assert over["link"] + over["process"] + over["machine"] + over["none"] == pytest.approx(1.0, abs=0.002)
        assert set(over["links"]) <= set(fid["link_utilization"]) and sum(over["links"].values()) == pytest.approx(
            over["link"], abs=0.002 * len(over["links"]) + 1e-9)
    # job b arrived 0.2 s (the cluster's) after the start: its processes started then
    b_start = min(json.loads((logs / "b" / f"{h}.model.json").read_text())["comm_intervals"][0][0]
                  for h in ("h5", "h7"))
    assert b["arrived_s"] == 0.2 and b_start >= t0 + 0.2 * factor
    # h3 computes 3 times as long in every iteration of job a; nothing slows job b
    assert a["straggled_iterations"] == 3 and b["straggled_iterations"] == 0
    h3 = json.loads((logs / "a" / "h3.model.json").read_text())
    assert all(it["compute_s"] == pytest.approx(3 * a["compute_s"]) for it in h3["iterations"])
    # the drawn background flows ran, each sender on its schedule: never more than its megabytes (the
    # cluster's) x the 5% of every byte the scenario sends, and one pacing burst (a sender that lost the
    # cores for a while sends less: no lower bound)
    flows = results["timeline"]["flows"]
    assert flows and {f["src"] for f in flows} <= {"h2", "h4"} and {f["dst"] for f in flows} <= {"h6", "h8"}
    for f in flows:
        sent, got = results["flows"][f["name"]]["send"]["bytes"], results["flows"][f["name"]]["recv"]["bytes"]
        burst = sum(r for _, _, r in f["intervals"]) * 1e6 / 8 * scn.data_scale / factor * 0.01  # 10 ms of any rate
        assert 0 < got <= sent <= f["megabytes"] * 1e6 * scn.data_scale + burst + 1400
    # the timeline's straggler (h3) sends to the host aggregator on h2, which takes its seat in a's tree for
    # every round (two barriers, the warm-up pass, 3 iterations of every bucket: staleness 0); b is plain
    assert (a["scheme"], a["split_workers"], a["aggregators"]) == ("split", ["h3"], ["h2"])
    assert (b["scheme"], "split_workers" in b) == ("innet", False)
    agg, = a["aggregation"].values()
    buckets = len(h3["buckets"])
    assert (agg["rounds"], agg["contributions"], agg["max_staleness"]) == (2 + 4 * buckets, 2 + 4 * buckets, 0)
    # the table: every job, the mode that ran, the others named as not run
    assert summary["metric"] == "iteration_median_s" and summary["per_job"]["split"]["a"] == a["iteration_median_s"]
    rows = summary["table"].splitlines()
    assert rows[0] == "| job | aware | unaware | split | ring | ps |" and len(rows) == 4
    assert rows[2].startswith("| a | not run | not run | ") and f"{a['iteration_median_s'] * 1e3:,.1f} / " in rows[2]
    assert e2e.leftovers(tmp_path) == []
