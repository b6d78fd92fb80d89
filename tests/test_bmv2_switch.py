"""A real BMv2 behind the controller's interface: aggnet.p4 compiled by p4c and pushed over P4Runtime to
simple_switch_grpc, then registers, counters and queue settings through the same SwitchConnection the
installer and monitor use (its side channel is the real simple_switch_CLI). One veth port, no Mininet."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess

import pytest
from procs import wait_until

from controller.installer import load_program
from controller.p4rt import P4RuntimeError, SwitchConnection
from controller.switch_cli import Bmv2Cli, side_channel
from hosts import codec
from p4target.sidechannel import SideChannelError
from testbed.nodes import port_open

pytestmark = [pytest.mark.bmv2, pytest.mark.root,
              pytest.mark.skipif(any(shutil.which(p) is None for p in ("simple_switch_grpc", "simple_switch_CLI", "p4c")),
                                 reason="needs p4c, simple_switch_grpc and simple_switch_CLI on PATH "
                                        "(source /opt/p4ref/env.sh)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="needs root for the veth port")]
BITMAP = "AggIngress.agg_bitmap"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def aggnet_bmv2(tmp_path_factory):
    """aggnet.p4 compiled by p4c for BMv2 (once for this module)."""
    return load_program("p4src/aggnet.p4", "bmv2", str(tmp_path_factory.mktemp("build")))


@pytest.fixture
def bmv2_conn(aggnet_bmv2, tmp_path):
    """A primary SwitchConnection to a real simple_switch_grpc on one veth port (port 1: bva, its peer bvb),
    with aggnet.p4 pushed over P4Runtime; its side channel is the real simple_switch_CLI."""
    subprocess.run(["ip", "link", "add", "bva", "type", "veth", "peer", "name", "bvb"], check=True)
    grpc_port, thrift_port = _free_port(), _free_port()
    proc = None
    try:
        for intf in ("bva", "bvb"):  # no IPv6: its router solicitations would reach the counters too
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{intf}.disable_ipv6=1"], check=True)
            subprocess.run(["ip", "link", "set", intf, "up"], check=True)
        log = open(tmp_path / "s1.log", "w")
        proc = subprocess.Popen(["simple_switch_grpc", "--device-id", "1", "-i", "1@bva", "--thrift-port",
                                 str(thrift_port), "--log-console", "--log-level", "warn", "--no-p4", "--",
                                 "--grpc-server-addr", f"127.0.0.1:{grpc_port}"], stdout=log, stderr=log)
        wait_until(lambda: port_open(grpc_port) and port_open(thrift_port), proc, (tmp_path / "s1.log").read_text)
        conn = SwitchConnection(f"127.0.0.1:{grpc_port}", device_id=1, name="s1",
                                side_channel=side_channel("bmv2", thrift_port))
        conn.set_pipeline(aggnet_bmv2.p4info, aggnet_bmv2.device_config)
        yield conn
        conn.close()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        subprocess.run(["ip", "link", "del", "bva"], capture_output=True)


def test_registers_are_written_and_read_in_batches(bmv2_conn):
    bmv2_conn.register_write(BITMAP, {i: i % 7 for i in range(500)})
    assert bmv2_conn.register_read(BITMAP, 13) == {13: 6}
    cells = bmv2_conn.register_read(BITMAP)
    assert len(cells) == 2048 and [cells[i] for i in range(500)] == [i % 7 for i in range(500)]
    bmv2_conn.side_command(f"register_reset {BITMAP}")
    assert bmv2_conn.register_read(BITMAP, 13) == {13: 0}


def test_counters_count_what_crossed_the_port(bmv2_conn):
    frame = codec.frame(b"hello", "02:00:00:00:00:02", "02:00:00:00:00:01", "10.0.0.1", "10.0.0.2", 1234, 4321)
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as sock:
        sock.bind(("bvb", 0))
        for _ in range(3):
            sock.send(frame)
    wait_until(lambda: bmv2_conn.side_command("counter_read AggIngress.port_rx 1").startswith("packets=3 "))
    assert bmv2_conn.side_command("counter_read AggIngress.port_rx 1") == f"packets=3 bytes={3 * len(frame)}"


def test_queue_settings_are_taken_and_delay_is_refused(bmv2_conn):
    bmv2_conn.set_queue_rate(250.0, 1)
    bmv2_conn.set_queue_depth(64)
    bmv2_conn.side_command("set_queue_rate_bps 20e6 1")
    with pytest.raises(P4RuntimeError, match="^s1: error: set_queue_delay is not available on BMv2"):
        bmv2_conn.side_command("set_queue_delay 5 1")


def test_there_are_no_queue_statistics_on_bmv2(bmv2_conn):
    from controller.monitor import queue_stats

    assert queue_stats(bmv2_conn) is None  # the adaptation loop then goes by utilization alone


def test_a_cli_error_names_switch_port_and_command(bmv2_conn):
    port = bmv2_conn.side_channel.port
    with pytest.raises(P4RuntimeError) as err:
        bmv2_conn.register_write(BITMAP, {2047: 1, 2048: 1})
    assert str(err.value) == (f"s1: error: simple_switch_CLI --thrift-port {port}: 'register_write AggIngress.agg_bitmap "
                              "2048 1': Invalid register operation (INVALID_INDEX)")


def test_an_unreachable_switch_and_a_missing_cli_are_one_line_errors():
    port = _free_port()
    with pytest.raises(SideChannelError) as err:
        Bmv2Cli(port).run([f"register_read {BITMAP} 0"])
    assert str(err.value).startswith(f"error: simple_switch_CLI --thrift-port {port} stopped after 0 of 1 commands (at "
                                     f"'register_read {BITMAP} 0'): Could not connect to any of [('127.0.0.1', {port})]")
    with pytest.raises(SideChannelError, match="^error: no_such_CLI not found on PATH"):
        Bmv2Cli(port, program="no_such_CLI").run([f"register_read {BITMAP} 0"])
