"""`aggnet counters` without Mininet: a real `aggnet switch` process (aggnet.p4, no interfaces),
found through a testbed record in a private state folder, read while a controller holds the
primary session. The Mininet end-to-end check is tests/test_counters_testbed.py."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from finsy import P4CounterData, P4CounterEntry
from procs import free_port, wait_until

from controller.installer import load_program
from controller.p4rt import P4RuntimeError, SwitchConnection
from p4target.runtime import RuntimeServer
from testbed import clean, counters_cli
from testbed.cli import main

REPO = Path(__file__).resolve().parent.parent


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_switch_command_lines_of_both_targets():
    embedded = [sys.executable, "-m", "testbed.cli", "switch", "--device-id", "3", "-i", "1@s3-eth1",
                "-i", "2@s3-eth2", "--grpc-server-addr", "127.0.0.1:50003", "--cpu-port", "255", "p4src/aggnet.p4"]
    assert counters_cli.parse_switch_command("s3", embedded) == counters_cli.SwitchProcess(
        "s3", 3, "127.0.0.1:50003", {1: "s3-eth1", 2: "s3-eth2"})
    bmv2 = ["simple_switch_grpc", "--device-id", "1", "-i", "1@s1-eth1", "--thrift-port", "9091", "--log-console",
            "build/aggnet.json", "--", "--grpc-server-addr", "127.0.0.1:50001", "--cpu-port", "255"]
    assert counters_cli.parse_switch_command("s1", bmv2) == counters_cli.SwitchProcess(
        "s1", 1, "127.0.0.1:50001", {1: "s1-eth1"})
    assert counters_cli.parse_switch_command("h1", ["bash", "--norc", "-is", "mininet:h1"]) is None


def test_no_running_network_is_a_one_line_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(clean, "STATE_DIR", str(tmp_path / "state"))
    assert main(["counters"]) == 1
    err = capsys.readouterr().err
    assert err == "aggnet counters: no AggNet network is running (start one with `aggnet run`)\n"
    # a record whose owner is gone is not a running network
    clean.write_record({"owner": 2 ** 22 + 7, "owner_start": 1, "run_dir": "/x", "processes": []})
    assert main(["counters"]) == 1
    assert "no AggNet network is running" in capsys.readouterr().err


@pytest.fixture
def network(tmp_path, monkeypatch):
    """One `aggnet switch` process with aggnet.p4, a primary controller session, and the record a
    Testbed would write for it (owner: this test process)."""
    monkeypatch.setattr(clean, "STATE_DIR", str(tmp_path / "state"))
    grpc_port, side_port = free_port(), free_port()
    log = tmp_path / "s1.log"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", "1",
                             "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--thrift-port", str(side_port),
                             "--log", str(log)], cwd=REPO)
    conn = None
    try:
        wait_until(lambda: port_open(grpc_port), proc, lambda: log.read_text() if log.exists() else "")
        program = load_program(str(REPO / "p4src" / "aggnet.p4"))
        conn = SwitchConnection(f"127.0.0.1:{grpc_port}", 1, name="s1")
        conn.set_pipeline(program.p4info, program.device_config)
        run_dir = tmp_path / "run"
        me = os.getpid()
        clean.write_record({"owner": me, "owner_start": clean.process_start_time(me), "run_dir": str(run_dir),
                            "interfaces": [], "processes": [
                                {"name": "h1", "pid": me, "start": clean.process_start_time(me)},
                                {"name": "s1", "pid": proc.pid, "start": clean.process_start_time(proc.pid)}]})
        yield conn, run_dir
    finally:
        if conn is not None:
            conn.close()
        proc.terminate()
        proc.wait(10)


def set_counter(conn: SwitchConnection, name: str, index: int, packets: int) -> None:
    conn.write([conn.modify(P4CounterEntry(name, index=index, data=P4CounterData(packet_count=packets)))])


def table_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.split()[:1] == ["s1"]]


def test_reads_the_running_switch_and_leaves_the_controller_primary(network, capsys):
    conn, run_dir = network
    written = {"agg_received": 40, "agg_aggregated": 36, "agg_completed": 9, "agg_duplicates": 4,
               "agg_retx_answered": 2, "agg_overflows": 1, "agg_spilled": 3}
    for name, value in written.items():
        set_counter(conn, f"AggIngress.{name}", 5, value)
    set_counter(conn, "AggIngress.agg_received", 9, 3)

    assert main(["counters"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"run folder {run_dir}"
    assert table_rows(out) == [["s1", "5", *map(str, written.values())], ["s1", "9", "3", "0", "0", "0", "0", "0", "0"]]

    assert main(["counters", "s1", "--run", str(run_dir), "--job", "7"]) == 0
    assert table_rows(capsys.readouterr().out) == [["s1", "7", "0", "0", "0", "0", "0", "0", "0"]]

    set_counter(conn, "AggIngress.agg_received", 5, 41)  # the controller is still primary


def test_unknown_switch_or_run_folder_is_named(network, capsys):
    _, run_dir = network
    assert main(["counters", "s7"]) == 1
    assert capsys.readouterr().err == "aggnet counters: no running switch 's7' (running: s1)\n"
    assert main(["counters", "--run", "/nowhere"]) == 1
    assert capsys.readouterr().err == "aggnet counters: no running AggNet network uses the run folder /nowhere\n"


def test_read_errors_are_one_line_and_hint_at_the_program():
    """In-process switch: no pipeline yet, then a program without aggnet.p4's counters."""
    server = RuntimeServer(device_id=1, address="127.0.0.1:0")
    switch = counters_cli.SwitchProcess("s9", 1, f"127.0.0.1:{server.start()}", {1: "s9-eth1"})
    try:
        with pytest.raises(P4RuntimeError, match=r"^s9: GetForwardingPipelineConfig failed: FAILED_PRECONDITION"):
            counters_cli.read_switches([switch])
        server.load_source((REPO / "tests/data/testbed/ipv4_counters.p4").read_text(), "ipv4_counters.p4")
        with pytest.raises(counters_cli.CountersError,
                           match=r"^s9: P4Info has no counter 'AggIngress.agg_received' \(is aggnet.p4 loaded\?\)$"):
            counters_cli.read_switches([switch])
    finally:
        server.stop()
