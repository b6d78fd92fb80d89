"""`aggnet switch` started with simple_switch_grpc's command line, as p4lang/tutorials start BMv2.

Real processes: the tutorials' exact flags (ports and the interface renamed so tests can run side
by side) start a switch that serves P4Runtime with the given device id and logs where BMv2 would;
`--pcap DIR` captures there; bad values are one line and a non-zero exit. (Every option of BMv2's
--help, refusals, value parsing, flavours and pcap-file ports: tests/test_switch_command_line.py.)
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from procs import free_port, stop_process, wait_for, wait_until

from controller.p4rt import P4RuntimeError, SwitchConnection
from p4target.ports import read_pcap

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "testbed" / "ipv4_counters.p4"
SWITCH_END, HOST_END = "tut1-eth1", "tut1-host"


def switch_process(argv: list[str], cwd: Path) -> subprocess.Popen:
    """`aggnet switch ARGV` run from `cwd` (relative paths in ARGV are the user's), this checkout's code."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", *argv], cwd=cwd, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen) -> None:
    stop_process(proc)
    if proc.stderr is not None:
        proc.stderr.close()


def wait_log(path: Path, text: str, proc: subprocess.Popen) -> str:
    """The log once it holds `text` (fails with the log if the process exits first)."""
    def content() -> str:
        return path.read_text() if path.exists() else ""

    return wait_until(lambda: text in content() and content(), proc, content)


@pytest.fixture
def veth():
    if os.geteuid() != 0:
        pytest.skip("needs root to create a veth pair")
    subprocess.run(["ip", "link", "add", SWITCH_END, "type", "veth", "peer", "name", HOST_END], check=True)
    try:
        for name in (SWITCH_END, HOST_END):
            subprocess.run(["sysctl", "-qw", f"net.ipv6.conf.{name}.disable_ipv6=1"], check=True)
            subprocess.run(["ip", "link", "set", name, "up"], check=True)
        yield
    finally:
        subprocess.run(["ip", "link", "del", SWITCH_END], check=False)


def test_tutorials_command_line(veth, tmp_path):
    (tmp_path / "logs").mkdir()  # the tutorials' Makefile makes logs/ before it starts the switches
    grpc_port, thrift_port = free_port(), free_port()
    proc = switch_process(["--log-file", "logs/s1", "--log-flush", "--dump-packet-data", "10000",
                           "-i", f"1@{SWITCH_END}", "--device-id", "0", "--thrift-port", str(thrift_port), "--no-p4",
                           "--", "--grpc-server-addr", f"0.0.0.0:{grpc_port}", "--cpu-port", "255"], tmp_path)
    try:
        log = wait_log(tmp_path / "logs" / "s1.txt", "device 0 up", proc)  # where simple_switch_grpc writes it
        assert f"ports 1@{SWITCH_END}, grpc 0.0.0.0:{grpc_port}" in log
        assert "--dump-packet-data: the Python engine runs the program" in log
        with SwitchConnection(f"127.0.0.1:{grpc_port}", device_id=0) as conn:  # primary of device 0
            assert conn.pipeline_cookie() is None  # --no-p4: no program until a controller pushes one
        with pytest.raises(P4RuntimeError, match="this is device 0"):
            SwitchConnection(f"127.0.0.1:{grpc_port}", device_id=1, arbitration_timeout=10).close()
        assert proc.poll() is None
    finally:
        stop(proc)
    assert not (tmp_path / "logs" / "s1-p4runtime-requests.txt").exists()  # the tutorials' client writes that


def test_pcap_dir_captures_both_directions(veth, tmp_path):
    pcaps = tmp_path / "pcaps"
    pcaps.mkdir()
    grpc_port, log = free_port(), tmp_path / "s2.txt"
    proc = switch_process(["-i", f"1@{SWITCH_END}", "--pcap", str(pcaps), "--log-file", str(tmp_path / "s2"),
                           "--thrift-port", str(free_port()), str(PROGRAM),
                           "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"], tmp_path)
    tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
    try:
        wait_log(log, "device 0 up", proc)
        tx.bind((HOST_END, 0))
        frame = bytes.fromhex("000000000001000000000009" "88b5") + b"pcap-me".ljust(50, b".")
        tx.send(frame)
        path = pcaps / f"{SWITCH_END}_in.pcap"
        wait_until(lambda: path.exists() and any(f == frame for _, f in read_pcap(str(path))), proc, log.read_text)
    finally:
        tx.close()
        stop(proc)
    assert (pcaps / f"{SWITCH_END}_out.pcap").exists()


def test_no_p4_wins_over_the_program(tmp_path):
    grpc_port = free_port()
    proc = switch_process([str(PROGRAM), "--no-p4", "--log-file", "s3", "--thrift-port", str(free_port()), "-L", "info",
                           "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"], tmp_path)
    try:
        wait_for(grpc_port, proc, tmp_path / "s3.txt")
        log = wait_log(tmp_path / "s3.txt", "device 0 up", proc)
    finally:
        stop(proc)
    assert f"ignoring {PROGRAM}: --no-p4 was given" in log and "pipeline set" not in log  # as BMv2 does


@pytest.mark.parametrize(("argv", "message"), [
    (["--cpu-port", "x"], "error: --cpu-port 'x': expected a decimal integer"),
    (["--", "--drop-port", "600"], "error: --drop-port 600: out of range 0..511"),
    (["--", "--drop-port", "500"], "error: --drop-port 500: not supported by aggnet switch (the drop port is 511"),
    (["-L", "loud"], "argument -L/--log-level: invalid choice: 'loud'"),
    (["--grpc-server-ssl", "--grpc-server-cert", "c.pem"],
     "error: --grpc-server-ssl needs --grpc-server-cert and --grpc-server-key"),
    (["--grpc-server-with-client-auth"], "error: --grpc-server-with-client-auth given without --grpc-server-ssl"),
    (["--pcap", "nowhere"], "error: --pcap nowhere: not a directory"),
    (["--log-file", "no/such/dir/s1"], "error: cannot open the log file"),
])
def test_bad_values_are_one_line_and_non_zero(tmp_path, argv, message):
    proc = switch_process([*argv, "--thrift-port", str(free_port()), "--grpc-server-addr",
                           f"127.0.0.1:{free_port()}"], tmp_path)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    lines = err.strip().splitlines()
    assert message in lines[-1], err
    assert len(lines) == 1 or lines[0].startswith("usage:"), err  # argparse's own errors come with its usage
