"""`aggnet run --target bmv2`: refused with a clear reason where BMv2 is missing or cannot do what the
topology asks; where BMv2 is installed (and we are root), scripts/run.sh trains exactly as on the
embedded target, and all-reduce is exact with 1% loss and on a two-level tree of aggregating switches."""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import e2e
import pytest

from controller.switch_cli import cli_line
from controller.topology import load_topology
from p4target.runtime.tls import TlsFiles
from protocol.wire import DEFAULT_LANES, program_name
from testbed.network import (
    Testbed,
    check_links,
    kernel_loss_script,
    link_queue_commands,
)
from testbed.nodes import Bmv2Switch, TargetUnsupported

STAR4 = str(e2e.REPO / "topologies" / "star4.yaml")
MISSING = [p for p in Bmv2Switch.programs if shutil.which(p) is None]
STEPS = 80  # the digits MLP is past 80% accuracy by then


@pytest.mark.skipif(not MISSING, reason="BMv2 and p4c are installed here")
def test_run_without_bmv2_exits_2_naming_what_is_missing(tmp_path):
    done = subprocess.run(e2e.aggnet_cmd("run", "--target", "bmv2", "--steps", "5", "--out", str(tmp_path)),
                          capture_output=True, text=True, cwd=e2e.REPO, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --target bmv2 needs {', '.join(MISSING)} on PATH (not found)"
    assert list(tmp_path.iterdir()) == []  # refused before any run folder or network


def with_link(topo, **shaping):
    return dataclasses.replace(topo, links=(dataclasses.replace(topo.links[1], **shaping),) + topo.links[1:])


@pytest.mark.parametrize("shaping", [{"delay_ms": 5.0}, {"delay_ms": 2.0, "loss": 0.5}])
def test_delay_on_bmv2_is_refused_before_the_network_starts(shaping):
    topo = with_link(load_topology(STAR4), **shaping)
    check_links(topo, "embedded")  # the embedded traffic manager has delay
    with pytest.raises(TargetUnsupported) as err:
        Testbed(topo, "bmv2")
    assert str(err.value) == (f"{STAR4}: link h2-s1: delay_ms needs the embedded target's traffic manager; "
                              "on BMv2 links have bw_mbps, queue_pkts and loss")


def test_loss_on_bmv2_is_a_kernel_drop_at_the_switch_port_not_a_queue_setting():
    link = dataclasses.replace(load_topology(STAR4).links[1], loss=2.5)
    assert link_queue_commands(link, 2, "bmv2") == ["set_queue_rate_bps 100000000 2"]
    assert link_queue_commands(link, 2, "embedded")[1] == "set_queue_loss 0.025 2"
    script = kernel_loss_script({"s1-eth2": 0.025, "s1-eth1": 0.5})
    assert script == ('table netdev aggnet {\n'
                      '  chain loss0 { type filter hook egress device "s1-eth1" priority 0; '
                      'numgen random mod 1000000 < 500000 drop; }\n'
                      '  chain loss1 { type filter hook egress device "s1-eth2" priority 0; '
                      'numgen random mod 1000000 < 25000 drop; }\n}\n')


def test_bmv2_switches_start_empty_for_the_controller_to_push():
    with pytest.raises(TargetUnsupported, match="bmv2 switches start without a program"):
        Testbed(load_topology(STAR4), "bmv2", program="p4src/aggnet.p4")
    switch = Bmv2Switch.__new__(Bmv2Switch)  # the command line only; a real node would start a shell
    vars(switch).update(device_id=3, grpc_port=50003, side_channel_port=9093, pcap_dir=None, cpu_port=255, intfs={})
    assert switch.command() == ["simple_switch_grpc", "--device-id", "3", "--thrift-port", "9093", "--log-console",
                                "--log-level", "warn", "--no-p4", "--", "--grpc-server-addr", "127.0.0.1:50003",
                                "--cpu-port", "255"]
    switch.tls = TlsFiles("ca.pem", "switch.pem", "switch.key")  # target options: after `--`, as BMv2 wants them
    assert switch.command()[-8:] == ["--grpc-server-ssl", "--grpc-server-cert", "switch.pem", "--grpc-server-key",
                                     "switch.key", "--grpc-server-cacert", "ca.pem", "--grpc-server-with-client-auth"]


def test_link_rate_and_depth_become_bmv2_queue_commands():
    link = dataclasses.replace(load_topology(STAR4).links[0], queue_pkts=64)
    assert [cli_line(c) for c in link_queue_commands(link, 1)] == ["set_queue_rate 8333 1", "set_queue_depth 64 1"]


needs_bmv2 = pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} on PATH (source /opt/p4ref/env.sh)")
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")


def losses(run: Path, worker: str = "h1") -> list[float]:
    """The training loss of every step, as the worker logged it."""
    lines = (run / "logs" / f"{worker}.metrics.jsonl").read_text().splitlines()
    return [json.loads(line)["loss"] for line in lines]


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@needs_bmv2
@needs_root
@pytest.mark.timeout(2 * 600 + 120)  # two runs of at most 600 s each (pyproject's cap: 420 s)
def test_run_sh_on_bmv2_trains_exactly_as_on_the_embedded_target(tmp_path):
    """scripts/run.sh's training (shortened), once per target: the sums are exact integers, so every
    step's loss and the final accuracy are the same numbers on BMv2 as on the embedded target."""
    runs = {}
    for target in ("embedded", "bmv2"):
        done = e2e.run_command(["bash", str(e2e.REPO / "scripts" / "run.sh"), "--target", target, "--steps", str(STEPS),
                                "--out", str(tmp_path / target)], timeout=600)
        assert done.returncode == 0, done.stderr
        runs[target] = e2e.run_dir(tmp_path / target)
    results = {t: json.loads((r / "results.json").read_text()) for t, r in runs.items()}
    bmv2 = results["bmv2"]
    assert bmv2["steps"] == STEPS and bmv2["final_accuracy"] >= 0.80
    assert bmv2["final_accuracy"] == results["embedded"]["final_accuracy"]
    assert losses(runs["bmv2"]) == losses(runs["embedded"])
    job = bmv2["counters"]["s1"]["jobs"]["1"]
    assert job["aggregated"] > 0 and job["completed"] > 0 and job["overflows"] == 0
    assert bmv2["versions"]["target"].startswith("bmv2")
    build = runs["bmv2"] / "build"
    program = Path(program_name(DEFAULT_LANES)).stem  # run.sh's program: the default lanes'
    assert (build / f"{program}.json").stat().st_size > 0 and (build / f"{program}.p4info.txtpb").stat().st_size > 0
    assert e2e.leftovers(tmp_path) == []


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@needs_bmv2
@needs_root
@pytest.mark.parametrize("topo, workers, k, elements, loss, lanes", [
    ("star4", 4, 1, 1_000_000, 1, 364),  # issue 11: 1M elements, 1% loss at every switch port (nftables)
    ("tree2", 8, 3, 200_000, None, 32),  # every switch aggregates: s2 and s3 send partials up to s1
])
def test_allreduce_on_bmv2_is_exact(tmp_path, topo, workers, k, elements, loss, lanes):
    extra = ["--loss", str(loss)] if loss else []
    done, results = e2e.aggnet_run(tmp_path, "--target", "bmv2", "--workload", "allreduce", "--topo", topo,
                                   "--k", str(k), "--elements", str(elements), "--lanes", str(lanes), "--seed", "5",
                                   *extra)
    assert done.returncode == 0, done.stderr
    assert "bmv2: links have no added delay" in done.stdout + done.stderr
    assert results["allreduce_exact"] is True and results["workers"] == workers
    assert all(r["exact"] for r in results["per_worker"].values())
    assert set(results["placement"]["aggregators"]) == set(results["counters"])  # every switch aggregates
    chunks = -(-elements // lanes) + 1  # + the warm-up chunk
    for switch, counters in results["counters"].items():
        assert counters["jobs"]["1"]["completed"] == chunks, switch
    if loss:
        assert sum(r["retransmissions"] for r in results["per_worker"].values()) > 0
    assert e2e.leftovers(tmp_path) == []
