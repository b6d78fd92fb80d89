"""Switch failure detection through SwitchConnection.alive: a real `aggnet switch` process is
killed (SIGKILL, as `aggnet faults kill_switch` does) and the detector names it."""
from __future__ import annotations

import signal
import subprocess
import sys

from test_installer_switch_process import REPO, free_port, wait_for

from controller.failover import FailureDetector
from controller.p4rt import SwitchConnection
from controller.topology import parse_topology


def test_killed_switch_process_ends_the_stream_and_is_detected(tmp_path):
    port = free_port()
    log = tmp_path / "s1.log"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", "1", "--grpc-server-addr",
                             f"127.0.0.1:{port}", "--thrift-port", str(free_port()), "--log", str(log)], cwd=REPO)
    conn = None
    try:
        wait_for(port, proc, log)
        conn = SwitchConnection(f"127.0.0.1:{port}", 1, name="s1")
        topo = parse_topology({"name": "one", "hosts": [{"name": "h1"}], "links": [{"a": "h1", "b": "s1"}],
                               "switches": [{"name": "s1", "device_id": 1, "grpc_port": port}]}, "<test>")
        detector = FailureDetector(topo, {"s1": conn}, interval_s=0.02)
        assert conn.alive and detector.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        failure = detector.detect(timeout_s=30)
        assert failure is not None and (failure.kind, failure.name) == ("switch", "s1")
        assert not conn.alive
    finally:
        if proc.poll() is None:
            proc.kill()
        if conn is not None:
            conn.close()
    assert not conn.alive  # and a closed one stays so
