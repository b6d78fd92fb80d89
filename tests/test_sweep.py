"""`aggnet sweep`'s grid and its guard (testbed/sweep.py): the points a grid makes, values checked before
anything runs, and what a finished run's fidelity verdict does to the number of runs at once."""
from __future__ import annotations

import json
import subprocess

import pytest

from testbed import sweep


def test_a_grid_is_every_combination_in_axis_order_and_bad_axes_are_one_line():
    grid = sweep.parse_grid(["topo=star4,tree2", "--scheme=innet,ring,ps"])
    assert sweep.points(grid)[:4] == [{"topo": "star4", "scheme": "innet"}, {"topo": "star4", "scheme": "ring"},
                                      {"topo": "star4", "scheme": "ps"}, {"topo": "tree2", "scheme": "innet"}]
    assert len(sweep.points(grid)) == 6
    for bad, why in ((["topo"], "NAME=V1,V2"), (["topo=a", "topo=b"], "given twice"), ([], "at least one")):
        with pytest.raises(sweep.SweepError, match=why):
            sweep.parse_grid(bad)
    with pytest.raises(sweep.SweepError, match="--colour is not an `aggnet run` option"):
        sweep.check_points([], [{"colour": "red"}])
    with pytest.raises(Exception, match="--scheme") as error:
        sweep.check_points(["--workload", "allreduce"], [{"scheme": "carrier-pigeon"}])
    assert "\n" not in str(error.value)


def finished_point(tmp_path, results: dict | None, code: int = 0) -> tuple[sweep.Sweeper, subprocess.Popen]:
    """A sweep folder with point p1, whose run has ended (exit `code`) having written `results`."""
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / sweep.STATE).write_text(json.dumps({"grid": {"k": ["1"]}, "options": [],
                                                    "points": [{"id": "p1", "values": {"k": "1"}, "status": "running"}]}))
    run_dir = tmp_path / "points" / "p1" / "run"
    run_dir.mkdir(parents=True)
    (tmp_path / "points" / "p1" / "aggnet.out").write_text("aggnet: it ended\n")
    if results is not None:
        (run_dir / "results.json").write_text(json.dumps(results))
    proc = subprocess.Popen(["sh", "-c", f"exit {code}"])
    proc.wait()
    return sweep.Sweeper(tmp_path, 4, console=type("Quiet", (), {"print": lambda *_: None})()), proc


def verdict(kind: str) -> dict:
    return {"seconds": 1.5, "link_bound_s": 1.0, "allreduce_correct": True, "allreduce_exact": True,
            "fidelity": {"bottleneck": {"kind": kind, "name": "x", "load": 0.95}}}


def test_a_run_the_cores_bound_beside_others_runs_again_with_fewer_at_once(tmp_path):
    sweeper, proc = finished_point(tmp_path, verdict("machine"))
    sweeper.limit, sweeper.running = 4, {"p1": (proc, 3)}
    assert sweeper.finish("p1") is True and sweeper.limit == 2
    assert sweeper.point("p1")["status"] == "pending" and sweep.results_of(tmp_path, sweeper.point("p1")) is None


def test_a_run_the_cores_bound_alone_keeps_its_result_and_a_link_bound_one_allows_another(tmp_path):
    sweeper, proc = finished_point(tmp_path, verdict("machine"))
    sweeper.limit, sweeper.running = 1, {"p1": (proc, 1)}
    assert sweeper.finish("p1") is False and sweeper.limit == 1
    assert sweeper.point("p1")["status"] == "done" and sweeper.point("p1")["summary"]["bottleneck"] == "machine"
    assert sweep.table_rows(sweeper.state)[1][0][6] == "cores 95%"
    sweeper, proc = finished_point(tmp_path / "b", verdict("link"))
    sweeper.limit, sweeper.running = 2, {"p1": (proc, 2)}
    assert sweeper.finish("p1") is False and sweeper.limit == 3
    header, rows = sweep.table_rows(sweeper.state)
    assert rows == [["1", "1.500", "1.000", "1.50", "1", "exact", "link 95%", "done"]]


def test_a_run_that_failed_is_named_by_its_last_line(tmp_path):
    sweeper, proc = finished_point(tmp_path, None, code=1)
    sweeper.running = {"p1": (proc, 1)}
    assert sweeper.finish("p1") is False
    assert sweeper.point("p1")["status"] == "failed" and sweeper.point("p1")["error"] == "aggnet: it ended"
