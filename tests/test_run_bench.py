"""The all-reduce benchmark's inputs and verdicts, and a whole benchmark over loopback (scheme ps)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from procs import free_port

from hosts import quantize
from hosts.allreduce_bench import Vectors, check, value_limit

REPO = Path(__file__).resolve().parent.parent


def test_vectors_are_seeded_per_rank_and_stay_within_the_limit():
    vectors = Vectors(7, 1000, "int32", 100, 8)
    a, b = vectors.of(0), vectors.of(1)
    assert np.array_equal(a, Vectors(7, 1000, "int32", 100, 8).of(0)) and not np.array_equal(a, b)
    every = np.stack([vectors.of(r) for r in range(8)])
    assert every.dtype == np.int32 and np.abs(every).max() <= 100 and np.abs(every).max() > 90
    assert vectors.int_error(every.astype(np.int64).sum(axis=0)) == 0  # the closed form is the sum
    assert (np.diff(every, axis=0) != 0).mean() > 0.9  # ranks differ at (almost) every element
    assert Vectors(7, 10, "float32", 0, 2).of(0).dtype == np.float32


@pytest.mark.parametrize("scheme, workers", [("innet", 4), ("innet", 8), ("ps", 4)])
def test_value_limit_keeps_the_worst_case_sum_exact(scheme, workers):
    total = workers * value_limit(scheme, workers)
    assert total <= (2**31 - 1 if scheme == "innet" else 2**24)
    assert total > (2**31 - 1 if scheme == "innet" else 2**24) - workers


def test_int_check_exact_and_wrong():
    inputs = Vectors(1, 500, "int32", value_limit("innet", 3), 3)
    right = np.sum(np.stack([inputs.of(r) for r in range(3)]).astype(np.int64), axis=0).astype(np.int32)
    assert check("innet", "int32", inputs, right) == {"correct": True, "exact": True, "max_abs_error": 0.0,
                                                       "bound": 0.0}
    wrong = right.copy()
    wrong[17] += 1
    verdict = check("innet", "int32", inputs, wrong)
    assert verdict["correct"] is False and verdict["max_abs_error"] == 1.0


def test_float_check_uses_the_quantization_bound():
    inputs = Vectors(2, 2000, "float32", 0, 4)
    e_max = max(quantize.max_exponent(inputs.of(r)) for r in range(4))
    f = quantize.frac_bits(e_max, 4)
    quantized = sum(quantize.quantize(inputs.of(r), f).astype(np.int64) for r in range(4))
    result = quantize.dequantize(quantized, f)
    verdict = check("innet", "float32", inputs, result)
    assert verdict["correct"] and 0 < verdict["max_abs_error"] <= verdict["bound"]
    assert verdict["bound"] >= quantize.error_bound(4, f)
    off = result.copy()
    off[3] += 4 * verdict["bound"]
    assert not check("innet", "float32", inputs, off)["correct"]


def test_ps_float_check_is_bit_exact_in_the_servers_order():
    inputs = Vectors(3, 100, "float32", 0, 3)
    in_order = (inputs.of(0) + inputs.of(1)) + inputs.of(2)
    assert check("ps", "float32", inputs, in_order)["exact"]
    assert not check("ps", "float32", inputs, np.nextafter(in_order, np.inf))["correct"]


def test_benchmark_processes_over_loopback_with_a_parameter_server(tmp_path):
    ps_port = free_port()
    config = {"scheme": "ps", "timeout_s": 30,
              "workers": [{"name": f"w{i}", "ip": "127.0.0.1", "port": free_port()} for i in range(3)],
              "ps": {"name": "ps", "ip": "127.0.0.1", "port": ps_port}}
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    py = [sys.executable, "-m"]
    server = subprocess.Popen(py + ["hosts", "ps", "--config", str(path), "--out", str(tmp_path)], cwd=REPO)
    workers = [subprocess.Popen(py + ["hosts", "bench", "--config", str(path), "--worker", f"w{i}",
                                      "--elements", "50000", "--seed", "5", "--out", str(tmp_path)], cwd=REPO)
               for i in range(3)]
    assert [w.wait(60) for w in workers] == [0, 0, 0]
    assert server.wait(30) == 0
    reports = [json.loads((tmp_path / f"w{i}.bench.json").read_text()) for i in range(3)]
    assert all(r["exact"] and r["elements"] == 50000 and r["workers"] == 3 for r in reports)
    assert all(r["seconds"] > 0 and r["goodput_elements_per_s"] == pytest.approx(50000 / r["seconds"])
               for r in reports)


def test_ring_float_check_allows_the_chunk_order_roundings_only():
    inputs = Vectors(4, 300, "float32", 0, 4)
    from_rank_2 = ((inputs.of(2) + inputs.of(3)) + inputs.of(0)) + inputs.of(1)  # one chunk's order on the ring
    verdict = check("ring", "float32", inputs, from_rank_2)
    assert verdict["correct"] and verdict["bound"] > 0
    assert not check("ring", "float32", inputs, from_rank_2 + 4 * verdict["bound"])["correct"]


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_benchmark_processes_over_loopback_on_a_ring(tmp_path, dtype):
    config = {"scheme": "ring", "timeout_s": 30,
              "workers": [{"name": f"w{i}", "ip": "127.0.0.1", "port": free_port()} for i in range(3)]}
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(config))
    workers = [subprocess.Popen([sys.executable, "-m", "hosts", "bench", "--config", str(path), "--worker", f"w{i}",
                                 "--elements", "30001", "--seed", "6", "--dtype", dtype, "--out", str(tmp_path)],
                                cwd=REPO)
               for i in range(3)]
    assert [w.wait(60) for w in workers] == [0, 0, 0]
    reports = [json.loads((tmp_path / f"w{i}.bench.json").read_text()) for i in range(3)]
    assert all(r["correct"] and r["scheme"] == "ring" and r["bytes_sent"] > 0 for r in reports)
    assert all(r["exact"] for r in reports) == (dtype == "int32")
