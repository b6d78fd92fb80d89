"""The launcher (testbed/launcher.py): a process it forks runs the command line's own entry point, with the
exit code, log, environment and title (/proc/PID/cmdline) the command would have had if started anew,
and its exit is reported; a command line it cannot run is refused."""
from __future__ import annotations

import os
import signal
import sys

import pytest
from procs import free_port, wait_for

from testbed import clean
from testbed.launcher import SWITCH_MODULES, Launcher, LaunchError


@pytest.fixture
def launcher():
    started = Launcher(dict(os.environ), SWITCH_MODULES)
    yield started
    started.stop()


def test_a_forked_command_exits_logs_and_is_titled_as_the_command(launcher, tmp_path):
    log = tmp_path / "out.log"
    listed = launcher.launch([sys.executable, "-m", "testbed.cli", "p4", "compile", "--list-passes"], str(log),
                             {**os.environ, "AGGNET_MARK": "1"})
    assert listed.wait(60) == 0 and log.read_text().startswith("check ")  # the pass list, as `aggnet p4 compile` prints it
    bad = launcher.launch([sys.executable, "-m", "testbed.cli", "p4", "compile", str(tmp_path / "none.p4")], str(log),
                          dict(os.environ))
    assert bad.wait(60) == 2 and "none.p4" in log.read_text().splitlines()[-1]  # one line, exit 2, as the command
    thrift = free_port()
    argv = [sys.executable, "-m", "testbed.cli", "switch", "--device-id", "3", "--grpc-server-addr",
            f"127.0.0.1:{free_port()}", "--thrift-port", str(thrift), "--log", str(tmp_path / "s3.log")]
    switch = launcher.launch(argv, str(log), dict(os.environ))
    wait_for(thrift, switch, tmp_path / "s3.log")
    assert clean.process_argv(switch.pid) == argv and switch.poll() is None
    switch.send_signal(signal.SIGTERM)
    assert switch.wait(60) == 0 and "stopping" in (tmp_path / "s3.log").read_text()
    with pytest.raises(LaunchError, match="runs `"):
        launcher.launch(["/bin/true"], str(log), dict(os.environ))
