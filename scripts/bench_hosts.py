#!/usr/bin/env python3
"""One worker's all-reduce packets/s against a loopback aggregation peer, old client vs new, as JSON.

The peer (its own process) is what a root switch does for a job of one worker: it turns
every contribution into a result (sets the `result` flag) and sends it back, in batches
(hosts.batch_socket), so the worker, not the peer, is what the number measures; the peer's
rate per CPU second is reported beside it. The worker (its own process) all-reduces an int32
vector of `--packets` chunks through a window of `--slots` slots and checks the sum,
`--repeat` times; `packets_per_s` is packets sent (contributions, retransmissions included)
per second of the call, `packets_per_cpu_s` the same per second of the worker's CPU time
(what one core would give it, on a machine busy with other work), medians over the repeats.
On loopback the kernel delivers each datagram to the peer's socket inside the sender's
system call, so the worker's CPU time includes that.

"old" is the client at git revision `--baseline` (default: the last one before batched I/O,
one sendto/recv_into per packet), extracted with `git archive` and run from there, "new" is
this checkout's; both in the same run, one after the other, for every lane count.

    .venv/bin/python scripts/bench_hosts.py --out bench/hosts.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "6d5e5f7"  # main before the batched host agents (hosts/allreduce.py with one syscall per packet)
LANES = (32, 256, 364)


# ------------------------------------------------------------------------- the peer process

def run_peer(lanes: int) -> None:
    """Echo contributions back as results until stdin closes; print the port, then the rate."""
    import select
    import socket

    import numpy as np

    from hosts.batch_socket import BatchSocket
    from protocol import wire

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    first, worker = sock.recvfrom(65536)  # the worker's warm-up tells us where it is
    io = BatchSocket(sock, worker, wire.packet_bytes(lanes), batch=512)
    io.data[0, :len(first)] = memoryview(first)
    count, flags, stride = 1, wire.OFFSETS["flags"], io.data.shape[1]
    buffer = io.data.reshape(-1)
    echoed, cpu_since = 0, time.process_time()
    while True:
        io.data[:count, flags] |= wire.FLAG_RESULT
        io.send(buffer, stride * np.arange(count))
        echoed += count
        count = io.recv(0.5)
        if not count and select.select([sys.stdin], [], [], 0)[0]:
            break
    print(json.dumps({"echoed": echoed, "cpu_seconds": time.process_time() - cpu_since}), flush=True)


# ------------------------------------------------------------------------- the worker process

def run_worker(peer_port: int, lanes: int, packets: int, slots: int, repeat: int) -> dict:
    """All-reduce `packets` chunks `repeat` times with whichever `hosts` package is importable."""
    import socket

    import numpy as np

    import hosts
    from hosts.allreduce import AllReduceClient
    try:
        from protocol.job import JobSpec, WorkerSpec
    except ImportError:  # the baseline: the job spec still lived in hosts/
        from hosts.job import JobSpec, WorkerSpec

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    job = JobSpec(job_id=1, workers=(WorkerSpec("h1", "127.0.0.1", sock.getsockname()[1]),), slot_base=0,
                  slot_count=slots, agg_ip="127.0.0.1", agg_port=peer_port, lanes=lanes, timeout_s=0.05)
    values = (np.arange(packets * lanes, dtype=np.int64) % 100_003).astype(np.int32)
    rates, cpu_rates, retx, seconds = [], [], [], []
    with AllReduceClient(job, 0, sock, stall_timeout_s=30) as client:
        client.allreduce_int(values[:lanes])  # warm-up: the peer learns our address
        for _ in range(repeat):
            sent, resent = client.stats.packets_sent, client.stats.retransmissions
            t0, cpu0 = time.perf_counter(), time.process_time()
            out = client.allreduce_int(values)
            dt, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            if not np.array_equal(out, values):
                raise SystemExit("bench_hosts: the peer's results do not match the contributions")
            rates.append((client.stats.packets_sent - sent) / dt)
            cpu_rates.append((client.stats.packets_sent - sent) / cpu)
            retx.append(client.stats.retransmissions - resent)
            seconds.append(dt)
    return {"hosts": str(Path(hosts.__file__).parent), "packets_per_s": statistics.median(rates),
            "packets_per_cpu_s": statistics.median(cpu_rates), "packets_per_s_all": rates, "seconds": seconds,
            "retransmissions": retx}


# ------------------------------------------------------------------------- orchestration

def measure(python_path: str, lanes: int, args: argparse.Namespace) -> dict:
    """One peer and one worker process; the worker's numbers plus the peer's rate."""
    me = [sys.executable, str(Path(__file__).resolve())]
    peer_env = {**os.environ, "PYTHONPATH": str(ROOT)}
    peer = subprocess.Popen(me + ["--role", "peer", "--lanes", str(lanes)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=peer_env)
    try:
        port = int(peer.stdout.readline())
        worker = subprocess.run(me + ["--role", "worker", "--lanes", str(lanes), "--peer-port", str(port),
                                      "--packets", str(args.packets), "--slots", str(args.slots),
                                      "--repeat", str(args.repeat)],
                                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": python_path},
                                cwd=tempfile.gettempdir(), timeout=600)
        if worker.returncode:
            raise SystemExit(f"bench_hosts: worker failed: {worker.stderr.strip().splitlines()[-1:]}")
        result = json.loads(worker.stdout)
    finally:
        peer.stdin.close()  # the peer's cue to stop and report
        peer_out = peer.stdout.read()
        peer.wait(timeout=30)
    peer_stats = json.loads(peer_out.strip().splitlines()[-1])
    result["peer_packets_per_cpu_s"] = peer_stats["echoed"] / peer_stats["cpu_seconds"]
    return result


def extract(rev: str, into: Path) -> None:
    """The `hosts` and `protocol` packages as they were at git revision `rev`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "hosts", "protocol"], capture_output=True,
                             check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=("bench", "peer", "worker"), default="bench", help=argparse.SUPPRESS)
    parser.add_argument("--lanes", type=int, nargs="*", default=list(LANES), help="lane counts (default 32 256 364)")
    parser.add_argument("--packets", type=int, default=100_000, help="chunks per all-reduce (default 100000)")
    parser.add_argument("--slots", type=int, default=512, help="slot window (default 512)")
    parser.add_argument("--repeat", type=int, default=3, help="timed all-reduces per case (default 3)")
    parser.add_argument("--baseline", default=BASELINE, help=f"git revision of the old client (default {BASELINE})")
    parser.add_argument("--peer-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()
    if args.role == "peer":
        run_peer(args.lanes[0])
        return 0
    if args.role == "worker":
        print(json.dumps(run_worker(args.peer_port, args.lanes[0], args.packets, args.slots, args.repeat)))
        return 0

    cases = []
    with tempfile.TemporaryDirectory(prefix="bench-hosts-") as old:
        extract(args.baseline, Path(old))
        for lanes in args.lanes:
            for variant, path in (("old", old), ("new", str(ROOT))):
                result = measure(path, lanes, args)
                print(f"bench_hosts: {lanes} lanes, {variant}: {result['packets_per_s']:.0f} packets/s, "
                      f"{result['packets_per_cpu_s']:.0f} per CPU second (peer: "
                      f"{result['peer_packets_per_cpu_s']:.0f} per CPU second)", file=sys.stderr)
                cases.append({"lanes": lanes, "variant": variant, **result})
    def speedup(key: str) -> dict[str, float]:
        by = {(c["lanes"], c["variant"]): c[key] for c in cases}
        return {str(lanes): by[(lanes, "new")] / by[(lanes, "old")] for lanes in args.lanes}

    report = {"packets": args.packets, "slots": args.slots, "repeat": args.repeat, "baseline": args.baseline,
              "machine": {"cpus": os.cpu_count(), "load_avg": os.getloadavg(), "python": platform.python_version()},
              "cases": cases, "speedup_new_vs_old": speedup("packets_per_s"),
              "cpu_speedup_new_vs_old": speedup("packets_per_cpu_s")}
    text = json.dumps(report, indent=2)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
