"""BMv2's side channel (simple_switch_CLI) reads and answers like the embedded one.

The replies parsed here are in the format BMv2's runtime_CLI.py prints; tests/test_bmv2_switch.py
drives the real simple_switch_CLI against a real switch.
"""
from __future__ import annotations

import pytest

from controller.switch_cli import (
    TM_ONLY,
    Bmv2Cli,
    TcpSideChannel,
    cli_line,
    parse_reply,
    side_channel,
    split_outputs,
)
from p4target.sidechannel import SideChannelError

# What simple_switch_CLI prints for: register_read X 3, register_write X 1 5, register_read X,
# register_read AggIngress.nope 0, then end of input.
CLI_OUTPUT = """Obtaining JSON from switch...
Done
Control utility for runtime P4 table manipulation
RuntimeCmd: AggIngress.agg_count[3]= 7
RuntimeCmd: RuntimeCmd: AggIngress.agg_count= 0, 5, 0, 1
RuntimeCmd: Error: Invalid register name (AggIngress.nope)
""" + "RuntimeCmd: \n"  # the last prompt, with its trailing space


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
    ("register_write AggIngress.agg_count 99999 0", "Invalid register operation (INVALID_INDEX)"),
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
