"""Helpers for the end-to-end tests: run `aggnet` as a user would, find what it left behind."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def aggnet_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "testbed.cli", *args]


def run_dir(out: Path) -> Path:
    """The single run folder `aggnet run --out OUT` created."""
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def run_command(argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """subprocess.run, except that on timeout the command first prints where its threads are (SIGUSR1),
    then gets SIGTERM (a run then tears its network down) before SIGKILL; the error raised then ends
    with the command's stderr."""
    return finish_command(start_command(argv, **kwargs), timeout)


def start_command(argv: list[str], **kwargs) -> subprocess.Popen:
    """Start `argv` (in the repository by default) with its output captured; finish_command waits for it."""
    kwargs.setdefault("cwd", REPO)
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs)


def finish_command(proc: subprocess.Popen, timeout: float) -> subprocess.CompletedProcess:
    """Wait for a command start_command started, as run_command does."""
    with proc:
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)
            time.sleep(1)
            proc.terminate()
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            raise AssertionError(f"{' '.join(proc.args[2:])}: no exit after {timeout:g} s; its stderr:\n"
                                 f"{err[-6000:]}") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def aggnet_run(out: Path, *args: str, timeout: float = 600) -> tuple[subprocess.CompletedProcess, dict | None]:
    """`aggnet run ... --out OUT`; returns the process and results.json (None when not written). Every
    embedded switch of the run ran its program on the native engine (results.json's `engines`)."""
    done = run_command(aggnet_cmd("run", *args, "--out", str(out)), timeout, cwd=REPO)
    path = run_dir(out) / "results.json"
    results = json.loads(path.read_text()) if path.exists() else None
    if results is not None:
        assert set(results["engines"].values()) <= {"native"}, results["engines"]
    return done, results


def processes_mentioning(text: str) -> dict[int, str]:
    """pid -> command line of the live processes whose command line contains `text` (e.g. a run folder)."""
    found = {}
    for pid in (d for d in os.listdir("/proc") if d.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmd and int(pid) != os.getpid():
            found[int(pid)] = cmd
    return found


def leftovers(folder: Path) -> list[str]:
    """Mininet-style veths in the root namespace that no running network claims, and any process still
    working for `folder` (another network may run beside the test's, in a run slot of its own)."""
    from testbed.clean import live_records, root_veths

    claimed = {intf for record in live_records() for intf in record.get("interfaces", [])}
    veths = [v for v in root_veths() if v not in claimed]
    return [f"interface {i}" for i in veths] + [f"process {c}" for c in processes_mentioning(str(folder)).values()]


def judged_busiest(fidelity: dict, carried_bytes: float, link_mbps: float) -> float:
    """The busiest link direction's load, once it is checked to be what the fidelity monitor measured and judged.

    Whether links or this machine's cores bound a run depends on how busy the machine is, so a test does not
    expect either; it checks what holds on any machine: the busiest direction ran at no less than
    `carried_bytes` (what it must have carried) over the measured seconds at `link_mbps` (the rate as run,
    after any time scale), plus one full token bucket; and the verdict follows from the loads: a link when
    one reached testbed.fidelity.BUSY of its rate, else something else at BUSY, with the warning that the
    run measured the machine, or nothing."""
    from p4target.tm import DEFAULT_BURST_S
    from testbed.fidelity import BUSY
    from testbed.network import FRAME_BYTES, HOST_BURST_FRAMES

    loads = fidelity["link_utilization"]
    busiest = max(loads, key=loads.get)
    rate = link_mbps * 1e6 / 8
    bucket = max(FRAME_BYTES, rate * DEFAULT_BURST_S, HOST_BURST_FRAMES * FRAME_BYTES)
    assert loads[busiest] >= carried_bytes / (rate * fidelity["seconds"] + fidelity["phases"] * bucket) - 0.001, fidelity
    verdict = fidelity["bottleneck"]
    if loads[busiest] >= BUSY:
        assert verdict == {"kind": "link", "name": busiest, "load": loads[busiest]} and fidelity["warning"] is None, fidelity
    else:
        assert verdict is None or (verdict["kind"] != "link" and verdict["load"] >= BUSY and fidelity["warning"]), fidelity
    return loads[busiest]
