"""Testbed lifecycle on real Mininet: start, a dead switch reported by name, clean teardown."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest
from procs import wait_until

from controller.topology import load_topology
from testbed import clean
from testbed.network import Testbed
from testbed.nodes import SwitchDied, TargetMissing, check_target

pytestmark = pytest.mark.root
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAR4 = os.path.join(REPO, "topologies", "star4.yaml")


def leftovers() -> tuple[set[str], dict[int, str]]:
    """Our veths, and switch / host-shell processes (pid -> command line) around now."""
    procs = {}
    for pid in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "testbed.cli switch" in cmd or "mininet:" in cmd:
            procs[int(pid)] = cmd
    return set(clean.root_veths()), procs


def left_since(before: tuple[set[str], dict[int, str]]) -> tuple[set[str], dict[int, str]]:
    """What is around now that was not `before` (a network elsewhere, e.g. an isolated soak, was)."""
    veths, procs = leftovers()
    return veths - before[0], {pid: cmd for pid, cmd in procs.items() if pid not in before[1]}


@pytest.fixture(autouse=True)
def before():
    """What was around before the test; the test leaves nothing more."""
    if os.geteuid() != 0:
        pytest.skip("needs root for Mininet")
    around = leftovers()
    yield around
    assert left_since(around) == (set(), {})


def test_star_starts_and_a_killed_switch_is_reported_by_name(tmp_path):
    with pytest.raises(SwitchDied, match=r"^s1: exited with code -9"):
        with Testbed(load_topology(STAR4), "embedded", str(tmp_path)) as tb:
            tb.check()
            assert sorted(clean.root_veths()) == [f"s1-eth{i}" for i in range(1, 5)]
            h1 = tb.host("h1")
            assert "10.0.0.2" in h1.cmd("ip neigh show 10.0.0.2") and "PERMANENT" in h1.cmd("ip neigh")
            assert h1.cmd("cat /proc/sys/net/ipv6/conf/all/disable_ipv6").strip() == "1"
            assert "rx-checksumming: off" in h1.cmd("ethtool -k h1-eth0")
            assert os.path.exists(tmp_path / "logs" / "s1.log")
            tb.switch("s1").process.send_signal(signal.SIGKILL)
            assert wait_until(tb.dead_switches)[0].startswith("s1: exited with code -9")
            tb.check()
    # the autouse fixture checks that nothing is left


def test_nodes_whose_shells_were_killed_still_tear_down(tmp_path):
    """A host and a switch shell killed from outside: stop() must not wait on them forever."""
    with Testbed(load_topology(STAR4), "embedded", str(tmp_path)) as tb:
        os.kill(tb.host("h1").pid, signal.SIGKILL)
        os.kill(tb.switch("s1").shell.pid, signal.SIGKILL)
        tb.host("h1").shell.wait()
        tb.switch("s1").shell.wait()
    # needs_root asserts that no interface or process is left


def test_killed_testbed_process_is_cleaned_up_by_aggnet_clean(tmp_path, before):
    script = (
        "import sys, time\n"
        "from controller.topology import load_topology\n"
        "from testbed.network import Testbed\n"
        f"tb = Testbed(load_topology({STAR4!r}), 'embedded', {str(tmp_path)!r})\n"
        "tb.start()\n"
        "print('up', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert proc.stdout.readline().strip() == "up"
        assert len(clean.root_veths()) == 4
        switch_pid = int(subprocess.run(["pgrep", "-f", f"testbed.cli switch .*{tmp_path}"],  # the launcher's child
                                         capture_output=True, text=True).stdout.split()[0])
        os.kill(switch_pid, signal.SIGSTOP)  # a hung switch: it will not act on PDEATHSIG's SIGTERM
        proc.send_signal(signal.SIGKILL)  # the testbed dies without any teardown
        proc.wait()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "removed process s1" in out.stdout  # the switch outlived its testbed until now
    assert left_since(before) == (set(), {})
    again = subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], capture_output=True, text=True, cwd=REPO)
    assert again.returncode == 0 and again.stdout == ""


def test_bmv2_target_absent_is_a_clear_error():
    if shutil.which("simple_switch_grpc"):
        pytest.skip("BMv2 is on PATH here")
    with pytest.raises(TargetMissing, match="needs simple_switch_grpc"):
        check_target("bmv2")
