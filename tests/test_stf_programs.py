"""STF packet tests of small P4 programs on the embedded pipeline, run as a user would.

Each tests/data/stf/NAME.p4 has NAME.stf (must pass) and maybe negative variants that must
fail with exit 1 and a readable diff, or exit 2 when malformed. Expected packets in the .stf
files were computed independently (scapy for IPv4 checksums, Python for the arithmetic).
"""
import os
import subprocess

import pytest

from p4target.stf import StfError, run_stf_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "tests", "data", "stf")
PASSING = ["lpm_forward", "ternary_priority", "registers_counters", "multicast_clone", "recirculate",
           "parser_reject", "arithmetic", "wide_values", "compound_assign", "for_loops", "serializable_types",
           "statement_forms", "generic_structs", "sample_forms", "parser_control_flow",
           "header_nested_structs", "union_stack_index", "int_cast", "action_loops", "parser_unroll",
           "int_params", "compound_assign_call", "union_extract"]


def path(name: str) -> str:
    return os.path.join(DATA, name)


def aggnet_stf(program: str, test: str, *extra: str) -> subprocess.CompletedProcess:
    exe = os.path.join(ROOT, ".venv", "bin", "aggnet")
    return subprocess.run([exe, "p4", "stf", *extra, path(program), path(test)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("name", PASSING)
def test_stf_suite_passes(name, engine):
    result = run_stf_file(path(name + ".p4"), path(name + ".stf"), engine)
    assert result.failures == []
    assert result.packets_in > 0 and result.packets_out > 0


def test_cli_pass_prints_summary():
    proc = aggnet_stf("multicast_clone.p4", "multicast_clone.stf")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("multicast_clone.stf: 3 packets in, 5 out")


def test_cli_wrong_checksum_expectation_exits_1_with_diff():
    proc = aggnet_stf("lpm_forward.p4", "lpm_forward_wrong_checksum.stf")
    assert proc.returncode == 1
    out = proc.stdout
    assert "FAIL" in out and "port 4, packet #1:" in out
    assert "expected: 00000000 04040000 000000AA 08004500 00210007 00003F11 66BF" in out
    assert "got:      00000000 04040000 000000AA 08004500 00210007 00003F11 66BE" in out
    assert "first difference at byte 25" in out
    assert "Traceback" not in proc.stderr


def test_cli_unexpected_packet_and_missing_packet_both_reported():
    proc = aggnet_stf("lpm_forward.p4", "lpm_forward_missing_entry.stf")
    assert proc.returncode == 1
    assert "port 2, packet #2:\n  expected: nothing (no `expect` for it)" in proc.stdout
    assert "port 4, packet #1:" in proc.stdout and "got:      nothing" in proc.stdout


@pytest.mark.parametrize("engine", ["python", "native"])
def test_wrong_register_and_counter_checks_fail(engine):
    result = run_stf_file(path("registers_counters.p4"), path("registers_counters_wrong.stf"), engine)
    assert [f.split(": ", 1)[1] for f in result.failures] == [
        "register RIngress.acc[3]: expected == 113, got 112",
        "counter RIngress.per_index(3) packets: expected == 3, got 2"]


@pytest.mark.parametrize("test,message", [
    ("malformed_packet.stf", "malformed_packet.stf:3: error: packet data must be an even number of hex digits"),
    ("malformed_action.stf", "malformed_action.stf:2: error: no action of table MyIngress.ipv4_lpm named 'set_nhop'"),
])
def test_cli_malformed_stf_exits_2_with_one_line(test, message):
    proc = aggnet_stf("lpm_forward.p4", test)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(path(message))


def test_cli_bad_program_exits_2(tmp_path):
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\n#include <v1model.p4>\nheader h_t { bit<8> f; }\n"
                   "control c(inout h_t h) { apply { h.g = 1; } }\n")
    exe = os.path.join(ROOT, ".venv", "bin", "aggnet")
    proc = subprocess.run([exe, "p4", "stf", str(bad), path("arithmetic.stf")], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith(str(bad) + ":4:") and "Traceback" not in proc.stderr


def write_stf(tmp_path, text: str) -> str:
    stf = tmp_path / "t.stf"
    stf.write_text(text)
    return str(stf)


def test_expect_without_data_accepts_any_packets_on_that_port(tmp_path):
    stf = write_stf(tmp_path, "packet 0 c8 64 64 64\npacket 0 00 00 00 00\nexpect 2\n")
    assert run_stf_file(path("arithmetic.p4"), stf).passed


def test_expectations_are_ordered_per_port(tmp_path):
    stf = write_stf(tmp_path, "expect 2 00 01\nexpect 2 c8 64\npacket 0 c8 64 64 64\npacket 0 00 01 7f 80\n")
    result = run_stf_file(path("arithmetic.p4"), stf)
    assert len(result.failures) == 2 and result.failures[0].startswith("port 2, packet #1:")


def test_dollar_rejects_longer_packet(tmp_path):
    stf = write_stf(tmp_path, "packet 0 c8 64 64 64\nexpect 2 c8 64 64 64 2c $\n")
    (failure,) = run_stf_file(path("arithmetic.p4"), stf).failures
    assert "packet too long: 13 bytes, expected exactly 5 ($)" in failure


def test_missing_stf_file_is_an_error(tmp_path):
    with pytest.raises(StfError, match="cannot read STF file"):
        run_stf_file(path("arithmetic.p4"), str(tmp_path / "nope.stf"))
