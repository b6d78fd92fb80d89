"""Split aggregation against the in-network tree that waits, as a user compares them (root, Mininet):
`aggnet compare --schemes innet,split` trains the digits MLP on star4 with worker h2 computing
0.15 s longer every step. The waiting tree pays that delay every step; in split aggregation the
switches sum h1 and h3 with the aggregator on h4 in h2's seat, h2's gradients come in at most
S = 4 rounds late and h2 pulls the rounds it missed. Split trains faster and reaches the accuracy
of the tree that waits. Then a model job (`aggnet run --workload model:ncf`) the same way, its
staleness counted in iterations: h2's buckets join the same bucket's round up to 2 iterations on."""
from __future__ import annotations

import json
import os

import pytest
from e2e import REPO, aggnet_cmd, aggnet_run, run_command

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
STEPS, DELAY, BOUND = 80, 0.15, 4


def metrics(run: dict, worker: str) -> list[dict]:
    path = os.path.join(run["run_dir"], "logs", f"{worker}.metrics.jsonl")
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_split_aggregation_beats_the_waiting_tree_and_converges_alike(tmp_path):
    done = run_command(aggnet_cmd("compare", "--schemes", "innet,split", "--topo", "star4", "--workers", "3",
                                  "--straggler", f"h2={DELAY}", "--staleness", str(BOUND), "--steps", str(STEPS),
                                  "--eval-every", "20", "--out", str(tmp_path)), 600, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]
    folder, = tmp_path.glob("compare-*")
    runs = {s: json.loads(next((folder / s).glob("*/results.json")).read_text()) for s in ("innet", "split")}
    innet, split = runs["innet"], runs["split"]
    assert (split["scheme"], split["split_workers"], split["aggregators"]) == ("split", ["h2"], ["h4"])
    seat = split["aggregation"]["h4-agg"]
    assert seat["rounds"] == STEPS and 0 < seat["max_staleness"] <= BOUND  # late, never more than S rounds
    straggler = split["per_worker"]["h2"]
    assert straggler["skipped_steps"] > 0 and seat["pulled"] == straggler["skipped_steps"]
    assert seat["contributions"] == STEPS - straggler["skipped_steps"]  # every gradient it computed, once
    assert all(not r.get("skipped") for r in metrics(innet, "h2"))
    # the tree that waits pays the delay on every step (at least STEPS x DELAY on top of its own work, whatever
    # the machine's load); split only when h2 would fall S rounds behind, so it is faster by about that delay
    waited = sum(r["step_time_s"] for r in metrics(innet, "h1"))
    went_on = sum(r["step_time_s"] for r in metrics(split, "h1"))
    assert waited >= STEPS * DELAY and went_on < waited, (went_on, waited)
    # the same weights on every worker, and the accuracy of the synchronous run
    assert len({r["final_accuracy"] for r in split["per_worker"].values()}) == 1
    assert split["final_accuracy"] >= innet["final_accuracy"] - 0.02, (split["final_accuracy"],
                                                                        innet["final_accuracy"])


def test_a_split_model_job_goes_on_without_its_straggler_within_two_iterations(tmp_path):
    """NCF's 3 buckets (31 ms of compute), 7 iterations, h2 0.5 s slow (a waiting tree waits for it every
    iteration): in split aggregation h2 computes some iterations and pulls the others, each of its gradients
    summed once in the same bucket's round at most 2 iterations on, some iterations' rounds closing without
    any of it, and every worker's sums exact against the aggregator's record of what each round holds."""
    iterations, delay = 7, 0.5  # its delay dwarfs the others' iteration, however loaded the machine
    done, split = aggnet_run(tmp_path, "--scheme", "split", "--staleness", "2", "--workload", "model:ncf",
                             "--workers", "3", "--straggler", f"h2={delay}", "--iterations", str(iterations),
                             "--grad-scale", "0.002", "--link-mbps", "50", "--lanes", "364")
    assert done.returncode == 0, done.stderr[-2000:]
    assert split["sums_correct"] is True
    assert (split["scheme"], split["split_workers"], split["aggregators"]) == ("split", ["h2"], ["h4"])
    seat, h2 = split["aggregation"]["h4-agg"], split["per_worker"]["h2"]
    buckets = len(h2["buckets"])
    lead = 2 + buckets  # two barriers and the warm-up pass: every worker in each
    computed = [it["iteration"] for it in h2["iterations"] if not it.get("skipped")]
    assert 0 < h2["skipped_iterations"] == iterations - len(computed) and seat["pulled"] == h2["skipped_iterations"] * buckets
    assert computed[0] == 0 and computed[-1] == iterations - 1  # the first and last iteration wait for everyone
    held = seat["included"]
    assert len(held) == lead + buckets * iterations == len(h2["sums"])
    sent = list(range(lead)) + [lead + i * buckets + b for i in computed for b in range(buckets)]
    joined = sorted((step, index) for index, pairs in enumerate(held) for _, step in pairs)
    assert [step for step, _ in joined] == sent and seat["contributions"] == len(sent)  # each gradient once
    late = [(index - step) // buckets for step, index in joined if index != step]
    assert late and all((index - step) % buckets == 0 for step, index in joined)  # the same bucket, later
    assert max(late) == seat["max_staleness"] <= 2 and min(late) >= 1
    went_on = [i for i in range(iterations) if not any(held[lead + i * buckets + b] for b in range(buckets))]
    assert went_on  # iterations whose rounds closed without any of h2's gradients
