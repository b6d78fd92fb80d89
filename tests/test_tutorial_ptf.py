"""The p4lang tutorials' workflow, unchanged, with `aggnet switch` in place of `simple_switch_grpc`.

Our copy of the `basic` exercise (tests/data/tutorial_basic: basic.p4, a P4Runtime helper in the
tutorials' style, a PTF test) is compiled by p4c; the switch starts with runptf.sh's command line
(`--log-file ... --log-flush --dump-packet-data 10000 -i 0@IF ... --no-p4 -- --grpc-server-addr ...`)
and the `ptf` command (PyPI's) runs the PTF tests against it over veths, each test pushing p4c's
P4Info and JSON (in BMv2's P4DeviceConfig) in its setUp and ending its stream in tearDown. The
same run against the real simple_switch_grpc shows the PTF test itself is right.
Root only; run under `flock /tmp/aggnet-net.lock` (veths in the root namespace).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import bmv2_ref
import pytest
from procs import free_port, stop_process, veth_pairs, wait_for

from controller.p4c import compile_bmv2

DATA = Path(__file__).resolve().parent / "data" / "tutorial_basic"
BIN = Path(sys.executable).parent  # the venv's commands: aggnet, ptf
P4C = shutil.which("p4c")
PORTS = 4
PAIRS = [(f"ptfS{i}", f"ptfP{i}") for i in range(PORTS)]  # (switch side, PTF side)
PTF_TESTS = 6  # the classes in tests/data/tutorial_basic/ptf/basic_fwd.py

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create veth pairs"),
    pytest.mark.skipif(P4C is None, reason="p4c is not on PATH (source /opt/p4ref/env.sh)"),
    pytest.mark.skipif(not (BIN / "ptf").exists(), reason="needs PTF (pip install ptf, requirements.txt)"),
    pytest.mark.skipif(not bmv2_ref.BMV2_P4_STUBS.exists(), reason=f"needs BMv2's Python stubs ({bmv2_ref.BMV2_P4_STUBS})"),
]


def switch_command(target: str) -> list[str]:
    """The binary that runptf.sh starts: BMv2's, or ours in its place."""
    if target == "aggnet":
        return [str(BIN / "aggnet"), "switch"]
    binary = shutil.which("simple_switch_grpc")
    if binary is None:
        pytest.skip("simple_switch_grpc is not on PATH (source /opt/p4ref/env.sh)")
    return [binary]


def run_ptf(build: Path, grpc_port: int, cwd: Path) -> subprocess.CompletedProcess:
    """The `ptf` command as runptf.sh runs it, with the exercise's test parameters."""
    params = (f"grpcaddr='127.0.0.1:{grpc_port}';p4info='{build / 'basic.p4info.txtpb'}';"
              f"config='{build / 'basic.json'}'")
    argv = [str(BIN / "ptf"), "--pypath", str(DATA), "--pypath", str(bmv2_ref.p4_stubs_path(cwd / "stubs")),
            *(arg for i, (_, peer) in enumerate(PAIRS) for arg in ("-i", f"{i}@{peer}")),
            f"--test-params={params}", "--test-dir", str(DATA / "ptf")]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("target", ["aggnet", "simple_switch_grpc"])
@pytest.mark.timeout(600 + 120)  # PTF's own limit, and the rest (pyproject's cap: 420 s)
def test_tutorial_basic_ptf_passes(target, tmp_path):
    build = tmp_path / "build"
    compile_bmv2(str(DATA / "basic.p4"), str(build), P4C)
    grpc_port = free_port()
    argv = [*switch_command(target), "--log-file", str(tmp_path / "ss-log"), "--log-flush",
            "--dump-packet-data", "10000", *(arg for i, (sw, _) in enumerate(PAIRS) for arg in ("-i", f"{i}@{sw}")),
            "--thrift-port", str(free_port()), "--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"]
    with veth_pairs(PAIRS):
        proc = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            wait_for(grpc_port, proc, tmp_path / "ss-log.txt")
            done = run_ptf(build, grpc_port, tmp_path)
        finally:
            stop_process(proc)
    output = done.stdout + done.stderr
    ran = re.search(r"^Ran (\d+) tests? in", output, re.M)
    switch_log = tmp_path / "ss-log.txt"  # --log-file BASE: BASE.txt, on both switches
    assert done.returncode == 0 and ran and int(ran.group(1)) == PTF_TESTS and re.search(r"^OK$", output, re.M), \
        output[-4000:] + "\nthe switch's log:\n" + (switch_log.read_text()[-2000:] if switch_log.exists() else "none")
