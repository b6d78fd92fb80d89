#!/usr/bin/env python3
"""How big a network this machine holds: the memory of one embedded switch by port and by aggregation
slot, of an all-reduce worker at 1M elements, and from them the largest k-ary fat-tree that fits;
with --run, the fat-tree k=8 command itself, timed from command to result, its memory measured. Root
only (veth pairs, Mininet).

Switches are measured as a network runs them: forked by a switch launcher (testbed.launcher) that has
read the program. What a forked switch adds is its own pages (USS: Private_Clean + Private_Dirty of
/proc/PID/smaps_rollup, its native engine's loop running, its receive and send rings open); the
launcher's pages are shared by all (its RSS, once). N veth pairs are made for a switch on N ports;
the per-port cost is the slope between the fewest and most ports, the base the intercept. The
per-slot cost is the slope between aggnet.p4 built with AGG_SLOTS at the given counts, on 8 ports.
A slot's registers are not touched until a job uses it (the pages stay unallocated: the measured
slope is ~0), so the bytes a slot takes in use are also stated from the program: its cells in every
slot register, both pools, one 8-byte engine word each. A worker's peak is the largest VmHWM the
workers of a 4-worker star4 all-reduce of 1M int32 elements report (hosts.allreduce_bench: their
peak resident memory, shared pages of the host launcher included: an upper bound); a host's shell
is an idle `bash --norc`. A fat-tree k needs 5k^2/4 switches of k ports, k^3/4 hosts and runs up
to k^3/8 workers (half its hosts, as the k=8 run's 64); the largest even k whose processes fit in
MemAvailable is reported. Kernel memory (veths, namespaces, socket buffers) is not counted, so that
k is an upper bound; --run measures the real thing for one command (MemAvailable sampled every second while it runs: the peak drop):

    .venv/bin/python scripts/bench_scale.py --out bench/scale.json [--ports 1,4,8,16] [--slots 512,1024,2048] \\
        [--run "--workload allreduce --topo fattree8 --workers 64 --elements 1000000"]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
import procs  # noqa: E402 - tests/procs.py: free ports, veth pairs, waiting for a listener

PREFIX = f"k8m{os.getpid() % 1000}"  # unique interface names: {PREFIX}p{i} / {PREFIX}q{i}
SLOTS_LINE = re.compile(r"#define AGG_SLOTS \d+")


def status_kb(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM from /proc/PID/status, in kB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def uss_kb(pid: int) -> int:
    """The pages only this process has (Private_Clean + Private_Dirty), in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        key, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            fields[key] = int(value.split()[0])
    return fields["Private_Clean"] + fields["Private_Dirty"]


def program_with_slots(program: str, slots: int, tmp: Path) -> str:
    """The self-contained source of `program` with AGG_SLOTS set to `slots`, as a file, compiled and built
    into the cache first (as a switch loading it at start will ask for it)."""
    from p4target.compiled import printed
    from p4target.device_config import device_config_source
    from p4target.native.build import build

    source = device_config_source(program)
    assert SLOTS_LINE.search(source), f"{program} has no #define AGG_SLOTS"
    path = tmp / f"slots{slots}.p4"
    path.write_text(SLOTS_LINE.sub(f"#define AGG_SLOTS {slots}", source))
    form = printed(path.read_text(), str(path))
    assert form is not None, f"{path}: not for the native engine"
    build(form[1].source)
    return str(path)


def forked_switch_kb(launcher, n: int, program: str, tmp: Path) -> int:
    """USS of one switch the launcher forks on n ports running `program`, once its engine's loop runs."""
    from p4target.sidechannel import send_command

    pairs = [(f"{PREFIX}p{i}", f"{PREFIX}q{i}") for i in range(n)]
    thrift, log = procs.free_port(), tmp / f"switch-{n}-{Path(program).stem}.log"
    args = [arg for port, (end, _) in enumerate(pairs, start=1) for arg in ("-i", f"{port}@{end}")]
    argv = [sys.executable, "-m", "testbed.cli", "switch", *args, "--thrift-port", str(thrift),
            "--grpc-server-addr", f"127.0.0.1:{procs.free_port()}", "--log", str(log), program]
    with procs.veth_pairs(pairs):
        proc = launcher.launch(argv, str(tmp / "switch.out"), dict(os.environ))
        try:
            procs.wait_for(thrift, proc, log)
            while "native engine" not in log.read_text():
                if proc.poll() is not None:
                    raise RuntimeError(f"aggnet switch on {n} ports exited: {log.read_text()[-300:]}")
                time.sleep(0.5)
            send_command(thrift, "port_stats")
            time.sleep(2)  # the loop has opened every port's rings
            return uss_kb(proc.pid)
        finally:
            procs.stop_process(proc)


def slot_bytes(program: str) -> int:
    """What one aggregation slot of `program` occupies once a job uses it: its cells in every slot register (both
    pools), one 8-byte engine word each (p4target.native.store: a cell of up to 64 bits)."""
    from controller.installer import SLOT_REGISTERS, VALUES_REGISTER, load_program
    from controller.p4rt import load_schema

    loaded = load_program(program)
    schema = load_schema(loaded.p4info)
    return round(sum(schema.registers[name].size for name in (*SLOT_REGISTERS, VALUES_REGISTER)) * 8 / loaded.slots)


def mem_available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    raise RuntimeError("/proc/meminfo has no MemAvailable")


def idle_rss_mb(argv: list[str]) -> float:
    """RSS of a process that has started and is waiting on its standard input."""
    proc = subprocess.Popen(argv, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(2)
        return status_kb(proc.pid)["VmRSS"] / 1024
    finally:
        proc.kill()
        proc.wait()


def aggnet_run(options: str, out: Path) -> dict:
    """`aggnet run OPTIONS` timed from command to result, MemAvailable sampled every second while it runs."""
    before, lowest, done = mem_available_kb(), [mem_available_kb()], threading.Event()

    def sample() -> None:
        while not done.wait(1.0):
            lowest[0] = min(lowest[0], mem_available_kb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "testbed.cli", "run", *shlex.split(options), "--out", str(out)],
                         cwd=REPO, capture_output=True, text=True)
    seconds = time.monotonic() - start
    done.set()
    sampler.join()
    results_file = next(out.glob("*/results.json"), None)
    results = json.loads(results_file.read_text()) if results_file else {}
    fidelity = results.get("fidelity") or {}
    return {"command": f"aggnet run {options}", "exit_code": run.returncode, "command_to_result_s": round(seconds, 1),
            "exact": results.get("allreduce_exact"), "allreduce_s": results.get("seconds"),
            "link_bound_s": results.get("link_bound_s"), "phases_s": results.get("phases_s"),
            "bottleneck": fidelity.get("bottleneck"), "warning": fidelity.get("warning"),
            "worker_peak_mb": max((w.get("max_rss_mb", 0) for w in (results.get("per_worker") or {}).values()),
                                  default=None),
            "memory_used_mb": round((before - lowest[0]) / 1024), "load_before": os.getloadavg(),
            "error": None if run.returncode == 0 else run.stderr.strip().splitlines()[-1:]}


def fat_tree_mb(k: int, launcher_mb: float, base_mb: float, port_mb: float, host_mb: float, worker_mb: float) -> float:
    """Resident memory of a fat-tree k's switches (forked: their own pages, the launcher's once), hosts and
    k^3/8 all-reduce workers."""
    return launcher_mb + 5 * k * k / 4 * (base_mb + k * port_mb) + k ** 3 / 4 * host_mb + k ** 3 / 8 * worker_mb


def worker_peak_mb(tmp: Path) -> float:
    """The largest peak memory the workers of a star4 all-reduce of 1M int32 elements report."""
    run = aggnet_run("--workload allreduce --topo star4 --elements 1000000", tmp / "star4")
    if run["exit_code"] != 0 or not run["worker_peak_mb"]:
        raise RuntimeError(f"the star4 all-reduce failed: {run['error']}")
    return run["worker_peak_mb"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--ports", default="1,4,8,16", help="port counts to measure (comma-separated)")
    parser.add_argument("--slots", default="512,1024,2048", help="AGG_SLOTS values to measure, on 8 ports")
    parser.add_argument("--lanes", type=int, default=364, help="aggnet.p4 variant (default 364)")
    parser.add_argument("--run", metavar="OPTIONS", help="also time this `aggnet run` and measure its memory")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_scale.py: needs root (veth pairs, Mininet)", file=sys.stderr)
        return 2
    from testbed.clean import testbed_environment
    from testbed.launcher import SWITCH_MODULES, Launcher
    from testbed.run import program_path

    counts = sorted({int(n) for n in args.ports.split(",")})
    slot_counts = sorted({int(n) for n in args.slots.split(",")})
    program = program_path(args.lanes)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        launcher = Launcher(testbed_environment(), SWITCH_MODULES, program)
        try:
            by_ports = {n: forked_switch_kb(launcher, n, program, tmp) for n in counts}
            by_slots = {s: forked_switch_kb(launcher, 8, program_with_slots(program, s, tmp), tmp) for s in slot_counts}
            launcher_mb = status_kb(launcher.process.pid)["VmRSS"] / 1024
        finally:
            launcher.stop()
        worker_mb = worker_peak_mb(tmp)
        run = aggnet_run(args.run, tmp / "run") if args.run else None
    host_mb = idle_rss_mb(["bash", "--norc"])
    lo, hi = counts[0], counts[-1]
    port_mb = (by_ports[hi] - by_ports[lo]) / (hi - lo) / 1024
    base_mb = by_ports[lo] / 1024 - lo * port_mb
    slot_kb = (by_slots[slot_counts[-1]] - by_slots[slot_counts[0]]) / (slot_counts[-1] - slot_counts[0])
    available_mb = mem_available_kb() / 1024
    need = {k: round(fat_tree_mb(k, launcher_mb, base_mb, port_mb, host_mb, worker_mb)) for k in range(2, 40, 2)}
    fits = [k for k, mb in need.items() if mb <= available_mb]
    out = {"lanes": args.lanes, "switch_uss_kb_by_ports": by_ports, "switch_uss_kb_by_slots_on_8_ports": by_slots,
           "launcher_mb": round(launcher_mb, 1), "switch_base_mb": round(base_mb, 1), "per_port_mb": round(port_mb, 2),
           "per_slot_kb": round(slot_kb, 2), "per_slot_in_use_bytes": slot_bytes(program), "host_mb": round(host_mb, 1),
           "worker_peak_mb_1m": worker_mb,
           "mem_available_mb": round(available_mb), "fat_tree_mb": {k: need[k] for k in (4, 8, 10, 12)},
           "largest_fat_tree_k": fits[-1] if fits else None, "run": run}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
