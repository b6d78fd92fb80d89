"""Issue 5's proof on real Mininet: on fattree4 with 8 workers, the link utilization the
controller predicts for a placement matches the packets the switches count during one
all-reduce, within 5%, link by link and in total.

What is compared: upward aggregation messages only, the quantity SOAR's model counts (the
result's multicast down the tree is not modelled). Predicted: per link, the messages one
chunk puts on it (controller.placement.evaluate on the job's tree) times the chunks of the
run (the benchmark's vector plus its one-chunk warm-up). The aggregating set is the
installed one: the placement's switches plus any forwarding switch the installer promoted
(JobPlan.promoted), which changes what the links carry; the test checks it against the
placement recorded in results.json. Measured, from aggnet.p4's per-port counters: a worker's
link by the packets its edge switch received on that port; a switch-to-switch link by the
packets the lower switch sent up it (only upward traffic leaves a switch on its uplink:
results are multicast downward). Retransmissions and stray host packets (IPv6 neighbour
discovery) count against the 5%.
"""
from __future__ import annotations

import os

import e2e
import pytest

from controller.installer import plan_job
from controller.placement import Job, place_jobs
from controller.placement.algorithms import evaluate
from controller.topology import load_topology
from testbed.config import resolve_topology
from testbed.run import JOB_NAME, REPO

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")]
WORKERS = tuple(f"h{i}" for i in range(1, 9))  # pods 0 and 1 of the fat-tree
LANES = 32
ELEMENTS = 1000 * LANES
CHUNKS = ELEMENTS // LANES + 1  # + the benchmark's warm-up all-reduce of one chunk
TOLERANCE = 0.05


def predicted_messages(topo, k: int, algo: str, seed: int) -> tuple[dict[str, int], tuple[str, ...], tuple[str, ...]]:
    """Messages per chunk on each tree link ("child-parent") for the tree the installer builds;
    also the placement's aggregators and the switches the installer promoted."""
    jp = place_jobs(topo, [Job(JOB_NAME, WORKERS, k=k, slots=64)], algo, seed=seed)[0]
    plan = plan_job(jp, 1)
    installed = evaluate(jp.tree, plan.aggregators - {jp.tree.root})
    return installed.messages, jp.placement.aggregators, plan.promoted


def measured_upward(topo, counters: dict, link: str) -> int:
    """Packets that went up `link` ("child-parent"), from the switches' port counters."""
    child, parent = link.split("-")
    if topo.is_host(child):
        return counters[parent]["ports"][str(topo.port_of(parent, child))]["rx_packets"]
    return counters[child]["ports"][str(topo.port_of(child, parent))]["tx_packets"]


def test_predicted_utilization_matches_port_counters(tmp_path):
    topo = load_topology(resolve_topology("fattree4", str(REPO)))
    k, algo, seed = 3, "soar", 5
    per_chunk, placed, promoted = predicted_messages(topo, k, algo, seed)
    assert promoted  # this placement exercises the installer's promotion (see the docstring)
    done, results = e2e.aggnet_run(tmp_path, "--workload", "allreduce", "--topo", "fattree4", "--workers", "8",
                                   "--algo", algo, "--k", str(k), "--seed", str(seed), "--elements", str(ELEMENTS),
                                   "--lanes", str(LANES))
    assert done.returncode == 0, done.stderr
    assert results["allreduce_exact"] is True
    assert tuple(results["placement"]["aggregators"]) == placed
    assert tuple(results["placement"]["promoted"]) == promoted
    # the placement alone would predict a different load: promotion matters to the count
    assert results["placement"]["utilization"] != sum(per_chunk.values())

    predicted = {link: m * CHUNKS for link, m in per_chunk.items()}
    measured = {link: measured_upward(topo, results["counters"], link) for link in predicted}
    lines = [f"{link:>8}: predicted {predicted[link]:>6}, counted {measured[link]:>6}" for link in predicted]
    print("\n" + "\n".join(lines))
    for link in predicted:
        assert measured[link] == pytest.approx(predicted[link], rel=TOLERANCE), link
    total_predicted, total_measured = sum(predicted.values()), sum(measured.values())
    print(f"utilization: predicted {total_predicted}, counted {total_measured} "
          f"({total_measured / total_predicted - 1:+.2%})")
    assert total_measured == pytest.approx(total_predicted, rel=TOLERANCE)
    # and nothing travels off the tree
    tree_links = {frozenset(link.split("-")) for link in predicted}
    off_tree = {name: b for name, b in results["link_bytes"].items() if frozenset(name.split("-")) not in tree_links}
    assert off_tree and all(b == 0 for b in off_tree.values()), off_tree
    assert e2e.leftovers(tmp_path) == []
