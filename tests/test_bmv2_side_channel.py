"""BMv2's side channel (simple_switch_CLI) reads and answers like the embedded one.

The replies parsed here are in the format BMv2's runtime_CLI.py prints. The batch tests run a
stand-in CLI (tests/data/bmv2/simple_switch_CLI, same prompt and output format) as a real
subprocess behind a real SwitchConnection, so batching, parsing and errors are exercised
without BMv2; tests/test_bmv2_run.py covers the real thing where BMv2 is installed.
"""
from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from controller.installer import load_program
from controller.p4rt import P4RuntimeError, SwitchConnection
from controller.side_channel import (TM_ONLY, Bmv2Cli, TcpSideChannel, cli_line, parse_reply, side_channel,
                                     split_outputs)
from p4target.runtime import RuntimeServer
from p4target.sidechannel import SideChannelError

DATA = Path(__file__).parent / "data" / "bmv2"
BITMAP = "AggIngress.agg_bitmap"

# What simple_switch_CLI prints for: register_read X 3, register_write X 1 5, register_read X,
# register_read AggIngress.nope 0, then end of input.
CLI_OUTPUT = """Obtaining JSON from switch...
Done
Control utility for runtime P4 table manipulation
RuntimeCmd: AggIngress.agg_count[3]= 7
RuntimeCmd: RuntimeCmd: AggIngress.agg_count= 0, 5, 0, 1
RuntimeCmd: Error: Invalid register name (AggIngress.nope)
RuntimeCmd: 
"""


def test_each_command_gets_the_text_after_its_prompt():
    assert split_outputs(CLI_OUTPUT) == ["AggIngress.agg_count[3]= 7", "", "AggIngress.agg_count= 0, 5, 0, 1",
                                         "Error: Invalid register name (AggIngress.nope)", ""]


@pytest.mark.parametrize("line, output, reply", [
    ("register_read AggIngress.agg_count 3", "AggIngress.agg_count[3]= 7", "7"),
    ("register_read AggIngress.agg_count", "AggIngress.agg_count= 0, 5, 0, 1", "0 5 0 1"),
    ("register_write AggIngress.agg_count 1 5", "", ""),
    ("register_reset AggIngress.agg_count", "", ""),
    ("counter_read AggIngress.port_rx 2", "AggIngress.port_rx[2]= (1234 bytes, 9 packets)", "packets=9 bytes=1234"),
    ("set_queue_rate 200 2", "", ""),
])
def test_replies_read_like_the_embedded_side_channel(line, output, reply):
    assert parse_reply(line, output) == reply


@pytest.mark.parametrize("line, output", [
    ("register_read AggIngress.nope 0", "Error: Invalid register name (AggIngress.nope)"),
    ("register_write AggIngress.agg_count 99999 0", "Invalid register operation (ERROR_INDEX_OUT_OF_RANGE)"),
    ("set_queue_rate 1e9", "Error: Bad format for rate_pps, expected integer"),
])
def test_cli_error_output_becomes_a_one_line_error_naming_the_command(line, output):
    with pytest.raises(SideChannelError) as err:
        parse_reply(line, output)
    assert str(err.value) == f"{line!r}: {output}"


def test_rates_become_whole_packets_per_second_and_bit_rates_full_size_frames():
    assert cli_line("set_queue_rate 200.4 2") == "set_queue_rate 200 2"
    assert cli_line("set_queue_rate 0") == "set_queue_rate 0"  # unlimited stays unlimited
    assert cli_line("set_queue_rate_bps 100000000 3") == "set_queue_rate 8333 3"  # 100 Mbit/s of 1500 B frames
    assert cli_line("set_queue_rate_bps 1000 3") == "set_queue_rate 1 3"  # never rounds a limit down to "none"
    assert cli_line("register_write AggIngress.agg_count 1 5") == "register_write AggIngress.agg_count 1 5"


@pytest.mark.parametrize("verb", TM_ONLY)
def test_traffic_manager_only_verbs_fail_on_bmv2(verb):
    with pytest.raises(SideChannelError, match=f"^error: {verb} is not available on BMv2: "):
        cli_line(f"{verb} 5 2")


def test_unknown_verbs_and_bad_numbers_are_one_line_errors():
    with pytest.raises(SideChannelError, match="^error: table_dump is not a side channel command on BMv2"):
        cli_line("table_dump AggIngress.agg_job")
    with pytest.raises(SideChannelError, match="^error: 'set_queue_rate fast': 'fast' is not a number$"):
        cli_line("set_queue_rate fast")


def test_targets_choose_their_side_channel():
    assert isinstance(side_channel("embedded", 9091), TcpSideChannel)
    bmv2 = side_channel("bmv2", 9092)
    assert isinstance(bmv2, Bmv2Cli) and (bmv2.port, bmv2.program) == (9092, "simple_switch_CLI")
    with pytest.raises(SideChannelError, match="unknown target 'tofino'"):
        side_channel("tofino", 9090)


# ---------------------------------------------------------------------------- the stand-in CLI, as a process

@pytest.fixture
def fake_cli(tmp_path, monkeypatch):
    """The stand-in CLI as an executable on PATH; returns a reader of its state file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cli = bin_dir / "simple_switch_CLI"
    source = (DATA / "simple_switch_CLI").read_text().split("\n", 1)[1]
    cli.write_text(f"#!{sys.executable}\n{source}")
    cli.chmod(cli.stat().st_mode | stat.S_IXUSR)
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"registers": {BITMAP: [0] * 600, "AggIngress.agg_count": [7] * 4}}))
    monkeypatch.setenv("FAKE_BMV2_STATE", str(state))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return lambda: json.loads(state.read_text())


@pytest.fixture
def bmv2_conn(fake_cli):
    """A primary SwitchConnection (in-process P4Runtime server) whose side channel is the stand-in CLI."""
    server = RuntimeServer(device_id=1, address="127.0.0.1:0")
    port = server.start()
    conn = SwitchConnection(f"127.0.0.1:{port}", device_id=1, name="s1", side_channel=side_channel("bmv2", 9091))
    conn.use_p4info(load_program("p4src/aggnet.p4").p4info)
    yield conn
    conn.close()
    server.stop()


def test_a_register_region_is_written_by_one_cli_process(bmv2_conn, fake_cli):
    bmv2_conn.register_write(BITMAP, {i: i % 7 for i in range(500)})
    state = fake_cli()
    assert len(state["invocations"]) == 1 and len(state["invocations"][0]) == 500
    assert state["registers"][BITMAP][:500] == [i % 7 for i in range(500)]
    assert bmv2_conn.register_read(BITMAP, 13) == {13: 6}
    assert bmv2_conn.register_read("AggIngress.agg_count") == {0: 7, 1: 7, 2: 7, 3: 7}


def test_queue_settings_reach_the_cli_and_delay_does_not(bmv2_conn, fake_cli):
    bmv2_conn.set_queue_rate(250.0, 2)
    bmv2_conn.set_queue_depth(64)
    assert fake_cli()["queues"] == [["set_queue_rate", 250, 2], ["set_queue_depth", 64]]
    with pytest.raises(P4RuntimeError, match="^s1: error: set_queue_delay is not available on BMv2"):
        bmv2_conn.side_command("set_queue_delay 5 2")


def test_there_are_no_queue_statistics_on_bmv2_and_asking_costs_no_cli_run(bmv2_conn, fake_cli):
    from controller.monitor import queue_stats

    assert queue_stats(bmv2_conn) is None  # the adaptation loop then goes by utilization alone
    assert "invocations" not in fake_cli()


def test_a_cli_error_names_switch_port_and_command(bmv2_conn):
    with pytest.raises(P4RuntimeError) as err:
        bmv2_conn.register_write(BITMAP, {599: 1, 600: 1})
    assert str(err.value) == ("s1: error: simple_switch_CLI --thrift-port 9091: 'register_write AggIngress.agg_bitmap "
                              "600 1': Invalid register operation (ERROR_INDEX_OUT_OF_RANGE)")


def test_a_cli_that_dies_mid_batch_says_where(fake_cli):
    cli = Bmv2Cli(9091)
    with pytest.raises(SideChannelError) as err:
        cli.run([f"register_write {BITMAP} 0 1", "register_read Crash.me 0", f"register_read {BITMAP} 0"])
    assert str(err.value) == ("error: simple_switch_CLI --thrift-port 9091 stopped after 1 of 3 commands "
                              "(at 'register_read Crash.me 0'): RuntimeError: TTransportException: Could not read 4 bytes")


def test_an_unreachable_switch_and_a_missing_cli_are_one_line_errors(fake_cli):
    with pytest.raises(SideChannelError) as err:
        Bmv2Cli(1).run([f"register_read {BITMAP} 0"])
    assert str(err.value) == ("error: simple_switch_CLI --thrift-port 1 stopped after 0 of 1 commands (at "
                              f"'register_read {BITMAP} 0'): Could not connect to thrift client on port 1")
    with pytest.raises(SideChannelError, match="^error: no_such_CLI not found on PATH"):
        Bmv2Cli(9091, program="no_such_CLI").run([f"register_read {BITMAP} 0"])
