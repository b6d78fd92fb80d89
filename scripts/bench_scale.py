#!/usr/bin/env python3
"""How big a network this machine holds: the memory of one embedded switch process by port count,
and from it the largest k-ary fat-tree that fits. Root only (it makes veth pairs).

For each port count N, N veth pairs are made in the root namespace and `aggnet switch` runs
aggnet.p4 (--lanes, default 364) on one end of each, its native engine's loop running (the
receive rings and send rings are opened then); once its side channel answers and its log says
the native engine took the program, its resident set (VmRSS, with RssAnon/RssFile/RssShmem)
is read. The per-port cost is the slope between the smallest and largest N; the base the
intercept. A fat-tree k needs 5k^2/4 switches of k ports, k^3/4 hosts (each a Mininet shell, whose
RSS is that of an idle `bash --norc`) and runs up to k^3/8 all-reduce workers (half its hosts, as the
k=8 run's 64; a worker's RSS is that of `python -m hosts` once the bench role's modules are imported);
the largest even k whose processes fit in MemAvailable is reported. Kernel memory (veths, namespaces,
socket buffers) is not counted, so the largest k is an upper bound:

    .venv/bin/python scripts/bench_scale.py --out bench/scale.json [--ports 1,4,8,16]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]
import procs  # noqa: E402 - tests/procs.py: free ports, veth pairs, stopping a process

PREFIX = f"k8m{os.getpid() % 1000}"  # unique interface names: {PREFIX}p{i} / {PREFIX}q{i}


def memory_kb(pid: int) -> dict[str, int]:
    """VmRSS and its parts from /proc/PID/status, in kB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(value.split()[0])
    return out


def switch_memory(n: int, program: str, tmp: Path) -> dict[str, int]:
    """One `aggnet switch` on n ports running `program`: its memory once the native engine runs."""
    from p4target.sidechannel import send_command

    pairs = [(f"{PREFIX}p{i}", f"{PREFIX}q{i}") for i in range(n)]
    thrift, log = procs.free_port(), tmp / f"switch-{n}.log"
    args = [arg for port, (end, _) in enumerate(pairs, start=1) for arg in ("-i", f"{port}@{end}")]
    with procs.veth_pairs(pairs):
        proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", *args, "--thrift-port", str(thrift),
                                 "--grpc-server-addr", f"127.0.0.1:{procs.free_port()}", "--log", str(log), program],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            procs.wait_for(thrift, proc, log)
            while "native engine" not in log.read_text():
                if proc.poll() is not None:
                    raise RuntimeError(f"aggnet switch on {n} ports exited: {log.read_text()[-300:]}")
                time.sleep(0.5)
            send_command(thrift, "port_stats")
            time.sleep(2)  # the loop has opened every port's rings
            return memory_kb(proc.pid)
        finally:
            procs.stop_process(proc)


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
        return memory_kb(proc.pid)["VmRSS"] / 1024
    finally:
        proc.kill()
        proc.wait()


def fat_tree_mb(k: int, base_mb: float, port_mb: float, host_mb: float, worker_mb: float) -> float:
    """Resident memory of a fat-tree k's switches and hosts plus k^3/8 all-reduce workers."""
    return 5 * k * k / 4 * (base_mb + k * port_mb) + k ** 3 / 4 * host_mb + k ** 3 / 8 * worker_mb


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--ports", default="1,4,8,16", help="port counts to measure (comma-separated)")
    parser.add_argument("--lanes", type=int, default=364, help="aggnet.p4 variant (default 364)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_scale.py: needs root (veth pairs)", file=sys.stderr)
        return 2
    from testbed.run import program_path

    counts = sorted({int(n) for n in args.ports.split(",")})
    with tempfile.TemporaryDirectory() as tmp:
        runs = {n: switch_memory(n, program_path(args.lanes), Path(tmp)) for n in counts}
    host_mb = idle_rss_mb(["bash", "--norc"])
    worker_mb = idle_rss_mb([sys.executable, "-c", "import sys, hosts.roles, hosts.allreduce_bench; sys.stdin.read()"])
    lo, hi = counts[0], counts[-1]
    port_mb = (runs[hi]["VmRSS"] - runs[lo]["VmRSS"]) / (hi - lo) / 1024
    base_mb = runs[lo]["VmRSS"] / 1024 - lo * port_mb
    available_mb = mem_available_kb() / 1024
    need = {k: round(fat_tree_mb(k, base_mb, port_mb, host_mb, worker_mb)) for k in range(2, 40, 2)}
    fits = [k for k, mb in need.items() if mb <= available_mb]
    out = {"lanes": args.lanes, "rss_kb_by_ports": runs, "switch_base_mb": round(base_mb, 1),
           "per_port_mb": round(port_mb, 2), "host_mb": round(host_mb, 1), "worker_mb": round(worker_mb, 1),
           "mem_available_mb": round(available_mb), "fat_tree_mb": {k: need[k] for k in (4, 8, 10, 12)},
           "largest_fat_tree_k": fits[-1] if fits else None}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
