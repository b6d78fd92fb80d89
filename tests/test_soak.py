"""`aggnet soak` as a user runs it, the short form (issue 21 item 1): a minute of a seeded fault
schedule on two in-network jobs (tree2), in a network namespace of its own. Every round's
workers go through every step once and end with round 0's weights, every switch or worker kill
is followed by a resume, the resources of the processes that run to the end do not grow, and
nothing is left running; bad options are one line and exit 2."""
from __future__ import annotations

import json
import os

import e2e
import pytest

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet"),
              pytest.mark.timeout(1200 + 120)]  # the soak's own limit, and its teardown (pyproject's cap: 420 s)
# Within the first 36 s: a flap of s2-s1, a controller restart, a kill of s1 and of a worker
# (testbed.soak.draw_schedule, as tests/test_soak_judge.py draws them); then another restart and worker kill.
SEED = 46


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    out = tmp_path_factory.mktemp("soak")
    done = e2e.run_command(e2e.aggnet_cmd("soak", "--minutes", "1", "--gap", "8", "--seed", str(SEED),
                                          "--sample-every", "2", "--isolate", "--out", str(out)),
                           timeout=1200, cwd=e2e.REPO)
    run = e2e.run_dir(out)
    yield done, json.loads((run / "soak.json").read_text()), run
    assert e2e.processes_mentioning(str(out)) == {}


def test_short_soak_loses_no_step_and_grows_nothing(soak):
    done, report, run = soak
    assert done.returncode == 0, done.stderr
    assert report["verdicts"] == {"rounds_with_faults": len(report["rounds"]) - 1, "lineage_ok": True,
                                  "weights_equal": True, "growth_ok": True}
    assert report["verdicts"]["rounds_with_faults"] >= 1
    for name, job in report["jobs"].items():
        assert job["rounds"] == len(report["rounds"]), name
        assert job["steps_applied"] == report["steps_per_round"] * job["rounds"] == 300 * job["rounds"], name
    for r in report["rounds"]:
        for job in r["jobs"].values():
            assert job["lineage_ok"] and set(job["steps_applied"].values()) == {300}
            assert job["weights_equal_round_0"] is (None if r["round"] == 0 else True)
    assert (run / "soak.png").stat().st_size > 0 and report["samples"] >= 20
    assert "report:" in done.stdout


def test_the_seeded_schedule_was_applied_in_order_and_the_kills_resumed(soak):
    _, report, _ = soak
    schedule = [(a["kind"], a["target"]) for a in report["schedule"]]
    applied = [a["action"] for a in report["applied"]]
    assert applied, "no fault was applied"
    kinds = {a.split(":")[0] for a in applied}
    assert kinds >= {"kill_switch", "restart_controller", "kill_worker", "link_down", "link_up"}
    assert len(applied) <= len(schedule)
    for entry, (kind, target) in zip(report["applied"], schedule):
        assert entry["action"].startswith(f"{kind}:{target}")
    causes = [r["cause"] for r in report["resumes"]]
    for entry in report["applied"]:
        if entry["action"].startswith(("kill_switch", "kill_worker")) and "note" not in entry:
            assert any(c.startswith(entry["action"]) for c in causes), (entry, causes)


def test_growth_is_judged_for_the_processes_that_ran_throughout(soak):
    _, report, _ = soak
    verdicts = {(v["series"].split("[")[0], v["metric"]): v["verdict"] for v in report["growth"]
                if v["verdict"] != "ended"}
    for metric in ("rss_kb", "fds", "threads"):
        assert verdicts[("soak", metric)] == "ok"
        assert verdicts[("shell.h1", metric)] == "ok"
    for metric in ("interfaces", "namespaces", "processes", "run_files"):
        assert verdicts[("system", metric)] == "ok"
    assert all(v != "growth" for v in verdicts.values())


@pytest.mark.parametrize(("args", "message"), [
    (["--minutes", "0"], "--minutes: must be positive"),
    (["--minutes", "1", "--gap", "-1"], "--gap: must be positive, got -1"),
    (["--minutes", "1", "--scenario", "nope.yaml"], "nope.yaml: cannot read scenario"),
])
def test_bad_options_are_one_line(args, message, tmp_path):
    done = e2e.run_command(e2e.aggnet_cmd("soak", *args, "--out", str(tmp_path)), timeout=120, cwd=e2e.REPO)
    assert done.returncode == 2 and done.stderr.strip().startswith(message) and "\n" not in done.stderr.strip()
    assert list(tmp_path.iterdir()) == []
