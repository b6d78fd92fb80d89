"""`aggnet run --target bmv2`: refused with a clear reason where BMv2 is missing or cannot do what the
topology asks; where BMv2 is installed (and we are root), a short run aggregates in the switch."""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller.side_channel import cli_line
from controller.topology import load_topology
from testbed.network import Testbed, check_links, link_queue_commands
from testbed.p4switch import BMV2_PROGRAMS, P4Switch, TargetUnsupported

sys.path.insert(0, str(Path(__file__).resolve().parent / "data" / "run"))
import e2e  # noqa: E402

STAR4 = str(e2e.REPO / "topologies" / "star4.yaml")
MISSING = [p for p in BMV2_PROGRAMS if shutil.which(p) is None]


@pytest.mark.skipif(not MISSING, reason="BMv2 and p4c are installed here")
def test_run_without_bmv2_exits_2_naming_what_is_missing(tmp_path):
    done = subprocess.run(e2e.aggnet_cmd("run", "--target", "bmv2", "--steps", "5", "--out", str(tmp_path)),
                          capture_output=True, text=True, cwd=e2e.REPO, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: --target bmv2 needs {', '.join(MISSING)} on PATH (not found)"
    assert list(tmp_path.iterdir()) == []  # refused before any run folder or network


def with_link(topo, **shaping):
    return dataclasses.replace(topo, links=(dataclasses.replace(topo.links[1], **shaping),) + topo.links[1:])


@pytest.mark.parametrize("shaping, asked", [({"delay_ms": 5.0}, "delay_ms"), ({"loss": 1.0}, "loss"),
                                            ({"delay_ms": 2.0, "loss": 0.5}, "delay_ms and loss")])
def test_delay_or_loss_on_bmv2_is_refused_before_the_network_starts(shaping, asked):
    topo = with_link(load_topology(STAR4), **shaping)
    check_links(topo, "embedded")  # the embedded traffic manager has both
    with pytest.raises(TargetUnsupported) as err:
        Testbed(topo, "bmv2")
    assert str(err.value) == (f"{STAR4}: link h2-s1: {asked} need the embedded target's traffic manager; "
                              "BMv2 shapes only bw_mbps and queue_pkts")


def test_bmv2_switches_start_empty_for_the_controller_to_push():
    with pytest.raises(TargetUnsupported, match="BMv2 switches start without a program"):
        Testbed(load_topology(STAR4), "bmv2", program="p4src/aggnet.p4")
    switch = P4Switch.__new__(P4Switch)  # the command line only; a real node would start a shell
    vars(switch).update(target="bmv2", device_id=3, grpc_port=50003, thrift_port=9093, pcap_dir=None,
                        cpu_port=255, program="p4src/aggnet.p4", intfs={})
    assert switch.command() == ["simple_switch_grpc", "--device-id", "3", "--thrift-port", "9093", "--log-console",
                                "--no-p4", "--", "--grpc-server-addr", "127.0.0.1:50003", "--cpu-port", "255"]


def test_link_rate_and_depth_become_bmv2_queue_commands():
    link = dataclasses.replace(load_topology(STAR4).links[0], queue_pkts=64)
    assert [cli_line(c) for c in link_queue_commands(link, 1)] == ["set_queue_rate 8333 1", "set_queue_depth 64 1"]


@pytest.mark.bmv2
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} on PATH")
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for Mininet")
def test_short_run_on_bmv2_aggregates_in_the_switch(tmp_path):
    done, results = e2e.aggnet_run(tmp_path, "--target", "bmv2", "--steps", "5", "--topo", "star4")
    assert done.returncode == 0, done.stderr
    job = results["counters"]["s1"]["jobs"]["1"]
    assert job["received"] > 0 and job["aggregated"] > 0 and job["completed"] > 0 and job["overflows"] == 0
    assert results["steps"] == 5 and results["versions"]["target"].startswith("bmv2")
    build = e2e.run_dir(tmp_path) / "build"
    assert (build / "aggnet.json").stat().st_size > 0 and (build / "aggnet.p4info.txtpb").stat().st_size > 0
    assert e2e.leftovers(tmp_path) == []
