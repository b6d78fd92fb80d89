"""results.json: validation with one-line errors naming the field, writing, versions, comparison."""
import json
import platform

import pytest
from rich.console import Console

from testbed import report

COUNTERS = {"s1": {"jobs": {1: {"received": 8, "aggregated": 4, "completed": 2, "duplicates": 0,
                                "retx_answered": 0, "overflows": 0}},
                   "ports": {1: {"rx_packets": 2, "rx_bytes": 372, "tx_packets": 2, "tx_bytes": 372}}}}


def train_results(**changes):
    results = {"config": {"scheme": "innet", "workers": 4}, "seeds": {"model": 0, "data": 0},
               "final_accuracy": 0.93, "steps": 200, "step_time_s": 0.041, "link_bytes": {"s1-h1": 744},
               "counters": COUNTERS, "versions": report.versions()}
    results.update(changes)
    return results


def test_written_file_is_sorted_indented_and_reads_back(tmp_path):
    path = report.write_results(tmp_path / "run", train_results())
    text = path.read_text()
    assert path == tmp_path / "run" / "results.json"
    assert text.startswith('{\n  "config"') and text.endswith("}\n")
    back = json.loads(text)
    assert list(back) == sorted(back)
    assert back["counters"]["s1"]["jobs"]["1"]["aggregated"] == 4  # int keys become JSON strings
    assert back["final_accuracy"] == 0.93
    # what was read back (string keys) validates again
    report.validate_results(back)


@pytest.mark.parametrize("changes, message", [
    ({"final_accuracy": 1.5}, "field final_accuracy: 1.5 is not a number in 0..1"),
    ({"final_accuracy": float("nan")}, "field final_accuracy: nan is not a number in 0..1"),
    ({"steps": True}, "field steps: True is not an integer >= 0"),
    ({"steps": -1}, "field steps: -1 is not an integer >= 0"),
    ({"step_time_s": "fast"}, "field step_time_s: 'fast' is not a number >= 0"),
    ({"link_bytes": {"s1-h1": -3}}, "field link_bytes: {'s1-h1': -3} is not an object of byte counts"),
    ({"counters": {"s1": {"jobs": {}}}}, "field counters.s1: {'jobs': {}} is not an object with jobs and ports"),
])
def test_bad_values_are_named(tmp_path, changes, message):
    with pytest.raises(report.ResultsError) as err:
        report.write_results(tmp_path, train_results(**changes))
    assert str(err.value) == f"results.json: {message}"
    assert err.value.exit_code == 3
    assert not (tmp_path / "results.json").exists()


@pytest.mark.parametrize("field", report.REQUIRED["train"])
def test_every_required_training_field_is_checked(tmp_path, field):
    results = train_results()
    del results[field]
    with pytest.raises(report.ResultsError, match=f"^results.json: field {field} is missing \\(train workload\\)$"):
        report.write_results(tmp_path, results)


def test_allreduce_workload_has_its_own_fields(tmp_path):
    results = {"config": {"workload": "allreduce"}, "seeds": {"data": 1}, "allreduce_exact": True, "elements": 1 << 20, "workers": 4,
               "seconds": 12.5, "goodput_elements_per_s": (1 << 20) / 12.5, "counters": COUNTERS,
               "versions": report.versions()}
    assert json.loads(report.write_results(tmp_path, results, "allreduce").read_text())["allreduce_exact"] is True
    with pytest.raises(report.ResultsError, match="field allreduce_exact: 'yes' is not true or false"):
        report.write_results(tmp_path, {**results, "allreduce_exact": "yes"}, "allreduce")
    with pytest.raises(report.ResultsError, match="field final_accuracy is missing"):
        report.write_results(tmp_path, results)  # the training workload wants more
    with pytest.raises(report.ResultsError, match="unknown workload 'bench'"):
        report.write_results(tmp_path, results, "bench")


def test_versions_name_what_ran():
    v = report.versions("embedded")
    assert v["python"] == platform.python_version()
    assert v["torch"].startswith("2.") and v["numpy"][0].isdigit()
    assert v["aggnet"].startswith("0.1.0")
    assert v["target"].startswith("embedded")


def test_comparison_uses_the_busiest_or_the_named_link():
    innet = train_results(step_time_s=0.02, link_bytes={"s1-h1": 100, "s1-h2": 120})
    ps = train_results(step_time_s=0.05, final_accuracy=0.94, link_bytes={"s1-h1": 900, "s1-h5": 400},
                       fidelity={"bottleneck": {"kind": "link", "name": "s1->h5", "load": 0.97}})
    busiest = report.compare_summary({"innet": innet, "ps": ps})
    no_curve = {"target_accuracy": None, "time_to_target_s": None}
    assert busiest == {"innet": {"time_s": 0.02, "final_accuracy": 0.93, "correct": None, "link": "s1-h2",
                                 "link_bytes": 120, "bottleneck": "none", **no_curve},
                       "ps": {"time_s": 0.05, "final_accuracy": 0.94, "correct": None, "link": "s1-h1",
                              "link_bytes": 900, "bottleneck": "link s1->h5 97%", **no_curve}}
    named = report.compare_summary({"innet": innet, "ps": ps}, link="s1-h5")
    assert named["innet"]["link_bytes"] is None and named["ps"]["link_bytes"] == 400

    console = Console(width=160, record=True)
    console.print(report.comparison_table(busiest))
    rows = {r[0]: r for r in (line.replace("│", " ").split() for line in console.export_text().splitlines())
            if r and r[0] in busiest}
    assert rows["innet"][1:] == ["20.0", "0.930", "s1-h2", "120", "1.00x", "1.00x", "none"]
    assert rows["ps"][1:] == ["50.0", "0.940", "s1-h1", "900", "7.50x", "2.50x", "link", "s1->h5", "97%"]


def test_allreduce_comparison_shows_the_all_reduce_time_and_the_verdict():
    innet = {"seconds": 0.40, "allreduce_correct": True, "link_bytes": {"s1-h1": 100}}
    ring = {"seconds": 0.70, "allreduce_correct": False, "link_bytes": {"s1-h1": 175}}
    summary = report.compare_summary({"innet": innet, "ring": ring})
    assert summary["ring"] == {"time_s": 0.70, "final_accuracy": None, "correct": False, "link": "s1-h1",
                               "link_bytes": 175, "bottleneck": "none", "target_accuracy": None,
                               "time_to_target_s": None}
    console = Console(width=160, record=True)
    console.print(report.comparison_table(summary))
    text = console.export_text()
    assert "all-reduce (ms)" in text and "step time" not in text
    rows = {r[0]: r for r in (line.replace("│", " ").split() for line in text.splitlines()) if r and r[0] in summary}
    assert rows["innet"][1:] == ["400.0", "right", "s1-h1", "100", "1.00x", "1.00x", "none"]
    assert rows["ring"][1:] == ["700.0", "WRONG", "s1-h1", "175", "1.75x", "1.75x", "none"]


def test_training_comparison_times_each_scheme_to_the_accuracy_all_reached():
    records = {"innet": [{"step": 0, "step_time_s": 9.0}, {"step": 1, "step_time_s": 0.1, "test_accuracy": 0.80},
                         {"step": 2, "step_time_s": 0.1, "test_accuracy": 0.95}],
               "ring": [{"step": 0, "step_time_s": 1.0}, {"step": 1, "step_time_s": 0.2, "test_accuracy": 0.85},
                        {"step": 2, "step_time_s": 0.2, "test_accuracy": 0.93}]}
    runs = {scheme: train_results(accuracy_curve=report.accuracy_curve(r)) for scheme, r in records.items()}
    assert runs["innet"]["accuracy_curve"] == [(0.1, 0.80), (0.2, 0.95)]  # step 0 (start-up) is not counted
    summary = report.compare_summary(runs)
    assert [(s["target_accuracy"], s["time_to_target_s"]) for s in summary.values()] == [(0.93, 0.2), (0.93, 0.4)]
    console = Console(width=200, record=True)
    console.print(report.comparison_table(summary))
    assert "time to 0.930 (s)" in console.export_text()
