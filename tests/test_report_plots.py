"""PNG plots from real training records (the reference trainer on digits) and bad metrics files."""
import json
import struct

import pytest

from hosts.agent_config import TrainConfig
from hosts.data import load_dataset
from hosts.train import train_reference
from testbed import plots, report


def png_size(path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def ink(path) -> float:
    """Share of pixels that are not white: a blank or nearly blank figure has almost none."""
    import matplotlib.image

    pixels = matplotlib.image.imread(path)[..., :3]
    return float((pixels.sum(axis=2) < 2.9).mean())


@pytest.fixture(scope="module")
def metrics_dir(tmp_path_factory):
    """Two 'workers' that trained for real (different seeds), written as agents write them."""
    folder = tmp_path_factory.mktemp("workers")
    for worker, seed in (("h1", 0), ("h2", 1)):
        config = TrainConfig(steps=40, eval_every=10, seed=seed)
        with open(folder / f"{worker}.metrics.jsonl", "w") as f:
            train_reference(config, load_dataset("digits", seed), 2, lambda r: f.write(json.dumps(r) + "\n"))
    (folder / "h1.log").write_text("not a metrics file\n")
    return folder


def test_load_metrics_reads_every_worker(metrics_dir):
    metrics = plots.load_metrics(metrics_dir)
    assert sorted(metrics) == ["h1", "h2"]
    assert [r["step"] for r in metrics["h1"]] == list(range(40))
    assert [r["step"] for r in metrics["h1"] if "test_accuracy" in r] == [9, 19, 29, 39]
    assert metrics["h1"][-1]["test_accuracy"] > 0.5


def test_training_plot(metrics_dir, tmp_path):
    path = plots.plot_training(plots.load_metrics(metrics_dir), tmp_path / "training.png", "digits, 2 workers")
    width, height = png_size(path)
    assert (width, height) == (11 * 110, 4 * 110)
    assert ink(path) > 0.02


def test_link_bytes_and_comparison_plots(metrics_dir, tmp_path):
    metrics = plots.load_metrics(metrics_dir)
    link_bytes = {f"s1-h{i}": 1000 * i * i for i in range(1, 13)}
    path = plots.plot_link_bytes(link_bytes, tmp_path / "link_bytes.png")
    assert png_size(path)[0] == round((0.7 * 12 + 2) * 110) and ink(path) > 0.02
    many = {f"s{i}-s{i + 1}": i for i in range(1, 400)}  # a big network: its busiest links only
    path = plots.plot_link_bytes(many, tmp_path / "many.png")
    assert png_size(path)[0] == round((0.7 * plots.MAX_LINK_BARS + 2) * 110)

    runs = {scheme: {"step_time_s": sorted(r["step_time_s"] for r in metrics[w])[20],
                     "final_accuracy": metrics[w][-1]["test_accuracy"], "link_bytes": link_bytes}
            for scheme, w in (("innet", "h1"), ("ps", "h2"))}
    path = plots.plot_comparison(report.compare_summary(runs, link="s1-h3"), tmp_path / "cmp" / "comparison.png")
    assert png_size(path) == (12 * 110, 4 * 110) and ink(path) > 0.02

    bench = {scheme: {"seconds": seconds, "allreduce_correct": True, "link_bytes": link_bytes}
             for scheme, seconds in (("innet", 0.4), ("ring", 0.7))}
    path = plots.plot_comparison(report.compare_summary(bench), tmp_path / "cmp" / "allreduce.png")
    assert png_size(path) == (8 * 110, 4 * 110) and ink(path) > 0.02  # no accuracy panel


def test_bad_metrics_line_is_named(tmp_path):
    (tmp_path / "h3.metrics.jsonl").write_text('{"step": 0, "loss": 1.0, "step_time_s": 0.1}\n{"step": 1, "loss"\n')
    with pytest.raises(plots.MetricsError, match=r"h3\.metrics\.jsonl:2: not a step record \(JSONDecodeError"):
        plots.load_metrics(tmp_path)
    (tmp_path / "h3.metrics.jsonl").write_text('{"step": 0, "loss": 1.0}\n')
    with pytest.raises(plots.MetricsError, match=r"h3\.metrics\.jsonl:1: not a step record \(KeyError"):
        plots.load_metrics(tmp_path)
