#!/usr/bin/env python3
"""Switch process packet rates on veth ports, side by side: the embedded switch on its native
and Python engines, the native engine on p4c's BMv2 JSON of the program (`native_json`: p4c's
lowering, against `native`: our front end's IR lowered by p4target/lowered/from_ir, both printed as
C by p4target/backends/c.py), BMv2 simple_switch (default and speed builds) and simple_switch_grpc
(`bmv2_grpc`, the speed build's if it has one), all three BMv2s and `native_json` on the same p4c
JSON, and a Linux bridge; `native_pcap` (and `python_pcap`) is the engine with both ports captured
(`--pcap DIR`, one write per record: the cost of captures that survive SIGKILL). Root only.

Two network namespaces hold the far ends of two veth pairs; the switch (pinned to CPU 0) owns
the near ends as ports 1 and 2. A C sender (scripts/bench_sender.c, AF_PACKET sendmmsg, pinned
to CPU 1) blasts frames into port 1 for a warm-up plus a window. Two rates per window: what
arrives on the far end of port 2 (its kernel rx counter, no process reading it), and what the
switch took in (the program's per-port ingress counter, read over the side channel or a
simple_switch_CLI session). Forwarding is rated by the first, aggregation by the second.
The switch's CPU time in the window gives its busy fraction and packets per CPU-second (its
capacity when the sender, on a loaded machine, cannot saturate it). The Linux bridge forwards on
the switch's core too (receive packet steering), so the sender's rate through it is the most this
sender offers any forwarder. Each target runs 3 windows;
the JSON has every run, the medians and the ratios of issue 13 (rates, and per CPU-second):

    .venv/bin/python scripts/bench_switch.py --out bench/switch.json [--window 3]

Programs: IPv4 LPM forwarding (tests/data/testbed/ipv4_counters.p4), aggnet.p4 at 32 and 256
lanes. The aggregation stream: one job whose switch aggregates 2 children (on port 1, told
apart by source address) and sends each completed slot to its parent on port 2: the first
contribution of a pair writes the lanes, the second adds them (saturating) and leaves. The
aggregation rate is contributions processed per second.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PREFIX = f"h3b{os.getpid() % 1000}"  # unique interface and namespace names
NS_TX, NS_RX = f"{PREFIX}tx", f"{PREFIX}rx"
SW = [f"{PREFIX}s1", f"{PREFIX}s2"]
PEER = [f"{PREFIX}h1", f"{PREFIX}h2"]
BRIDGE = f"{PREFIX}br"
BMV2_NOTIFICATIONS = f"/tmp/{PREFIX}-bmv2.ipc"  # not BMv2's default: other simple_switch processes may run
SWITCH_CPU, SENDER_CPU = 0, 1
PERF_GRPC = Path("/opt/p4ref-perf/bin/simple_switch_grpc")  # the speed build has none so far: the default build's
BMV2 = {"bmv2": Path("/opt/p4ref/bin/simple_switch"), "bmv2_perf": Path("/opt/p4ref-perf/bin/simple_switch"),
        "bmv2_grpc": PERF_GRPC if PERF_GRPC.exists() else Path("/opt/p4ref/bin/simple_switch_grpc")}
P4C = Path("/opt/p4ref/bin/p4c")
CLI = Path("/opt/p4ref/bin/simple_switch_CLI")
CLI_PYTHONPATH = "/opt/p4ref/lib/python-extra"  # the CLI's thrift module (what /opt/p4ref/env.sh sets)
AGG_IP, SWITCH_MAC = "10.0.255.254", "02:00:00:00:ff:fe"
CHILDREN = ("10.0.0.1", "10.0.0.3")


def sh(*cmd: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------------------- the veth setup

def veths_up() -> None:
    sh("ip", "netns", "add", NS_TX)
    sh("ip", "netns", "add", NS_RX)
    for sw, peer, ns in zip(SW, PEER, (NS_TX, NS_RX)):
        sh("ip", "link", "add", sw, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", peer, "netns", ns)
        sh("sysctl", "-qw", f"net.ipv6.conf.{sw}.disable_ipv6=1")
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", f"net.ipv6.conf.{peer}.disable_ipv6=1")
        sh("ip", "link", "set", sw, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", peer, "up")


def veths_down() -> None:
    for cmd in (["ip", "link", "del", BRIDGE], ["ip", "link", "del", SW[0]], ["ip", "link", "del", SW[1]],
                ["ip", "netns", "del", NS_TX], ["ip", "netns", "del", NS_RX]):
        sh(*cmd, check=False)


def rx_count() -> int:
    """Frames that reached the far end of port 2."""
    return int(sh("ip", "netns", "exec", NS_RX, "cat", f"/sys/class/net/{PEER[1]}/statistics/rx_packets").stdout)


def cpu_seconds(pid: int | None) -> float:
    """CPU time (user + system, all threads) a process has used so far."""
    if pid is None:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send_window(sender: Path, frames: Path, warmup: float, window: float,
                processed: Callable[[], int] | None, pid: int | None) -> dict:
    """Blast for warm-up + window (+ a tail); the rates at the far end and into the switch in the
    window, and the CPU the switch used for it (its busy fraction: on a loaded machine the sender
    may not saturate it, and packets per CPU-second is then its capacity)."""
    proc = subprocess.Popen(["ip", "netns", "exec", NS_TX, str(sender), PEER[0], str(frames),
                             str(warmup + window + 0.5), str(SENDER_CPU)], stdout=subprocess.PIPE, text=True)
    time.sleep(warmup)
    c0, p0, u0, t0 = rx_count(), processed() if processed else 0, cpu_seconds(pid), time.monotonic()
    time.sleep(window)
    c1, p1, u1, t1 = rx_count(), processed() if processed else 0, cpu_seconds(pid), time.monotonic()
    out, _ = proc.communicate(timeout=30)
    words = out.split()
    run = {"received_pps": round((c1 - c0) / (t1 - t0), 1),
           "sender_pps": round(int(words[1]) / float(words[3]), 1) if len(words) == 6 else None,
           "sender_via": words[5] if len(words) == 6 else None}
    if processed:
        run["processed_pps"] = round((p1 - p0) / (t1 - t0), 1)
        busy = (u1 - u0) / (t1 - t0)
        run["switch_busy"] = round(busy, 3)
        run["processed_per_cpu_s"] = round(run["processed_pps"] / busy, 1) if busy > 0 else None
    return run


# ---------------------------------------------------------------------------- frames

def write_frames(path: Path, frames: list[bytes]) -> None:
    with open(path, "wb") as f:
        for fr in frames:
            f.write(struct.pack("<H", len(fr)) + fr)


def forwarding_frames() -> list[bytes]:
    from hosts import codec

    return [codec.frame(bytes(100), "00:00:00:00:00:09", "00:00:00:00:00:01", "10.0.0.9", "10.0.0.2", 5000 + i, 5001)
            for i in range(64)]


def aggregation_frames(lanes: int, pairs: int = 2048) -> list[bytes]:
    """Pairs of contributions (children 10.0.0.1 and .3) to slots 0..1023, pools alternating."""
    import numpy as np

    from hosts import codec
    from protocol import wire

    rng = np.random.default_rng(lanes)
    out = []
    for k in range(pairs):
        slot, pool = k % 1024, (k // 1024) % 2
        for src in CHILDREN:
            vals = rng.integers(-2**20, 2**20, size=(1, lanes)).astype(np.int32)
            payload = codec.encode(1, slot, k, wire.FLAG_POOL if pool else 0, vals).tobytes()
            out.append(codec.frame(payload, "02:00:00:00:00:01", SWITCH_MAC, src, AGG_IP, codec.AGG_PORT,
                                   codec.AGG_PORT))
    return out


# ---------------------------------------------------------------------------- programs and entries

def programs(names: list[str]) -> dict[str, dict]:
    """The programs asked for: source, table entries (simple_switch_CLI syntax), frames."""
    from protocol.wire import program_name

    forward = ["table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.0.2/32 => 00:00:00:00:00:02 2"]
    agg = ["table_add AggIngress.agg_job AggIngress.set_job 1 => 0 1024 2 1 0 2 0"]
    for index, src in enumerate(CHILDREN):
        agg.append(f"table_add AggIngress.agg_child AggIngress.set_child 1 1 {src}&&&0xffffffff => {index} 1")
    specs = {"ipv4_lpm": (REPO / "tests" / "data" / "testbed" / "ipv4_counters.p4", forward, forwarding_frames,
                          "MyIngress.port_in", "received_pps")}
    for lanes in (32, 256):
        specs[f"aggnet_l{lanes}"] = (REPO / "p4src" / program_name(lanes), agg,
                                     lambda lanes=lanes: aggregation_frames(lanes), "AggIngress.port_rx",
                                     "processed_pps")
    return {name: {"p4": p4, "entries": entries, "frames": frames(), "counter": counter, "rate": rate}
            for name, (p4, entries, frames, counter, rate) in specs.items() if name in names}


# ---------------------------------------------------------------------------- targets

def wait_until(ready, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start")
        time.sleep(0.2)


def start_embedded(engine: str, prog: dict, tmp: Path, program: Path | None = None, options: tuple[str, ...] = ()):
    """`aggnet switch` on `engine`, running `program` (default: the P4 source), with more `options`."""
    from p4target.sidechannel import SideChannelError, send_command

    thrift = free_port()
    log = tmp / f"switch-{engine}-{(program or prog['p4']).suffix[1:]}.log"
    proc = subprocess.Popen(["taskset", "-c", str(SWITCH_CPU), sys.executable, "-m", "testbed.cli", "switch",
                             "--engine", engine, "-i", f"1@{SW[0]}", "-i", f"2@{SW[1]}", "--thrift-port", str(thrift),
                             "--grpc-server-addr", f"127.0.0.1:{free_port()}", "--log", str(log), *options,
                             str(program or prog["p4"])],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready() -> bool:
        try:
            send_command(thrift, "port_stats", timeout=1)
            return True
        except Exception:  # noqa: BLE001 - not up yet
            return False

    try:
        wait_until(ready, proc, f"aggnet switch --engine {engine}")
        for line in prog["entries"]:
            send_command(thrift, line)
        text = log.read_text()
        if engine == "native" and "native engine" not in text:
            raise RuntimeError(f"the native engine did not take the program: {text[-500:]}")
    except (RuntimeError, SideChannelError) as exc:
        stop(proc)
        raise RuntimeError(str(exc)) from None

    def processed() -> int:
        return int(send_command(thrift, f"counter_read {prog['counter']} 1").split()[0].split("=")[1])
    return proc, processed


def p4c_json(prog: dict, tmp: Path) -> Path:
    """p4c's BMv2 JSON of the program (compiled once per run)."""
    out = tmp / "p4c" / prog["p4"].stem
    json_path = out / (prog["p4"].stem + ".json")
    if not json_path.exists():
        out.mkdir(parents=True, exist_ok=True)
        sh(str(P4C), "--target", "bmv2", "--arch", "v1model", "-I", str(prog["p4"].parent), "-o", str(out),
           str(prog["p4"]))
    return json_path


def start_bmv2(binary: Path, prog: dict, tmp: Path):
    """simple_switch or simple_switch_grpc on p4c's JSON, its entries added by simple_switch_CLI (both
    serve Thrift; simple_switch_grpc's P4Runtime server gets a free port, idle)."""
    json_path = p4c_json(prog, tmp)
    thrift = free_port()
    target_options = ["--", "--grpc-server-addr", f"127.0.0.1:{free_port()}"] if binary.name.endswith("_grpc") else []
    proc = subprocess.Popen(["taskset", "-c", str(SWITCH_CPU), str(binary), "--thrift-port", str(thrift),
                             "--notifications-addr", f"ipc://{BMV2_NOTIFICATIONS}",
                             "-i", f"1@{SW[0]}", "-i", f"2@{SW[1]}", str(json_path), *target_options],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def ready() -> bool:
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", thrift)) == 0

    env = dict(os.environ, PYTHONPATH=CLI_PYTHONPATH, PYTHONUNBUFFERED="1")
    try:
        wait_until(ready, proc, str(binary))
        proc.cli = subprocess.Popen([str(CLI), "--thrift-port", str(thrift)], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        for line in prog["entries"]:
            reply = cli_command(proc.cli, line, r"Entry has been added|Error|Invalid|error")
            if "Entry has been added" not in reply:
                raise RuntimeError(f"simple_switch_CLI: {line}: {reply}")
    except RuntimeError:
        stop(proc)
        raise
    cli = proc.cli

    def processed() -> int:
        reply = cli_command(cli, f"counter_read {prog['counter']} 1", r"bytes, (\d+) packets")
        return int(re.search(r"bytes, (\d+) packets", reply).group(1))
    return proc, processed


def cli_command(cli: subprocess.Popen, line: str, until: str) -> str:
    """One command to a running simple_switch_CLI; its output up to a line matching `until`."""
    cli.stdin.write(line + "\n")
    cli.stdin.flush()
    seen = []
    while True:
        out = cli.stdout.readline()
        if not out:
            raise RuntimeError(f"simple_switch_CLI exited: {''.join(seen)[-300:]}")
        seen.append(out)
        if re.search(until, out):
            return "".join(seen)


def stop(proc: subprocess.Popen) -> None:
    cli = getattr(proc, "cli", None)
    if cli is not None:
        cli.stdin.close()
        cli.wait(10)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def bridge_up() -> None:
    """A Linux bridge between the ports, forwarding on the switch's core: a frame the sender puts on a veth is
    otherwise received, bridged and delivered by the kernel on the sender's own core; receive packet steering
    on port 1 moves that work to SWITCH_CPU, so the sender has its core to itself, as with a switch process."""
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    for sw in SW:
        sh("ip", "link", "set", sw, "master", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    rps(f"{1 << SWITCH_CPU:x}")


def bridge_down() -> None:
    rps("0")
    sh("ip", "link", "del", BRIDGE, check=False)


def rps(mask: str) -> None:
    Path(f"/sys/class/net/{SW[0]}/queues/rx-0/rps_cpus").write_text(mask + "\n")


def measure(target: str, prog: dict, sender: Path, frames: Path, tmp: Path, runs: int, window: float) -> dict:
    proc = processed = None
    if target == "bridge":
        bridge_up()
    elif target in BMV2:
        proc, processed = start_bmv2(BMV2[target], prog, tmp)
    elif target == "native_json":
        proc, processed = start_embedded("native", prog, tmp, p4c_json(prog, tmp))
    elif target.endswith("_pcap"):  # both ports captured (--pcap DIR): a record written per frame and direction
        pcaps = tmp / f"pcap-{target}"
        pcaps.mkdir(exist_ok=True)
        proc, processed = start_embedded(target.removesuffix("_pcap"), prog, tmp, options=("--pcap", str(pcaps)))
    else:
        proc, processed = start_embedded(target, prog, tmp)
    try:
        pid = proc.pid if proc is not None else None
        results = [send_window(sender, frames, 1.0, window, processed, pid) for _ in range(runs)]
    finally:
        if proc is not None:
            stop(proc)
        else:
            bridge_down()
    rate = "received_pps" if target == "bridge" else prog["rate"]
    out = {"rate": rate, "runs": results, "median_pps": statistics.median(r[rate] for r in results)}
    capacity = [r["processed_per_cpu_s"] for r in results if r.get("processed_per_cpu_s")]
    if capacity:
        out["median_per_cpu_s"] = statistics.median(capacity)
    if target in BMV2:
        out["binary"] = str(BMV2[target])
    return out


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=3.0, help="seconds per measured window (default 3)")
    parser.add_argument("--runs", type=int, default=3, help="windows per target, the median is reported (default 3)")
    parser.add_argument("--targets", default="native,native_pcap,native_json,python,bmv2,bmv2_perf,bmv2_grpc,bridge")
    parser.add_argument("--programs", default="ipv4_lpm,aggnet_l32,aggnet_l256")
    parser.add_argument("--out", help="write the JSON here")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_switch: needs root (network namespaces and veth pairs)", file=sys.stderr)
        return 1
    from p4target.native.build import build_tool

    with_p4c = {*BMV2, "native_json"}  # targets that run p4c's output
    targets = [t for t in args.targets.split(",")
               if t not in with_p4c or P4C.exists() and (t not in BMV2 or BMV2[t].exists())]
    progs = programs(args.programs.split(","))
    result: dict = {"benchmark": "switch_process_veth", "window_s": args.window, "runs": args.runs,
                    "switch_cpu": SWITCH_CPU, "sender_cpu": SENDER_CPU, "programs": {}}
    tmp = Path(tempfile.mkdtemp(prefix="bench-switch-"))
    held = contextlib.ExitStack()  # the sender stays in the build cache until the end
    try:
        sender = held.enter_context(build_tool(REPO / "scripts" / "bench_sender.c"))
        veths_down()
        veths_up()
        for name, prog in progs.items():
            frames = tmp / f"{name}.frames"
            write_frames(frames, prog["frames"])
            entry = result["programs"][name] = {"frame_bytes": len(prog["frames"][0]), "program": prog["p4"].name}
            for target in targets:
                print(f"bench_switch: {name} on {target} ...", file=sys.stderr, flush=True)
                try:
                    entry[target] = measure(target, prog, sender, frames, tmp, args.runs, args.window)
                except (RuntimeError, subprocess.SubprocessError) as exc:
                    entry[target] = {"error": str(exc)}
                print(f"bench_switch: {name} on {target}: {entry[target].get('median_pps')}", file=sys.stderr)
    finally:
        held.close()
        veths_down()
        shutil.rmtree(tmp, ignore_errors=True)
        Path(BMV2_NOTIFICATIONS).unlink(missing_ok=True)

    def med(prog: str, target: str) -> float | None:
        return result["programs"].get(prog, {}).get(target, {}).get("median_pps")

    fwd = "ipv4_lpm"
    result["sender_through_bridge_pps"] = med(fwd, "bridge")
    ratios = {"native_vs_bridge_forwarding": ratio(med(fwd, "native"), med(fwd, "bridge")),
              "aggnet_l256_vs_forwarding_native": ratio(med("aggnet_l256", "native"), med(fwd, "native"))}
    def cap(prog: str, target: str) -> float | None:
        return result["programs"].get(prog, {}).get(target, {}).get("median_per_cpu_s")

    # ours (from our front end, and from p4c's JSON: the drop-in for BMv2 on the same JSON) against the others
    comparisons = {"native": ("native_json", "python", *BMV2), "native_json": tuple(BMV2),
                   "native_pcap": ("native",), "python_pcap": ("python",)}  # what capturing costs
    for prog in result["programs"]:
        for mine, others in comparisons.items():
            for other in others:
                ratios[f"{mine}_vs_{other}_{prog}"] = ratio(med(prog, mine), med(prog, other))
                # the same per CPU-second of the switch process
                ratios[f"per_cpu_{mine}_vs_{other}_{prog}"] = ratio(cap(prog, mine), cap(prog, other))
    ratios["per_cpu_aggnet_l256_vs_forwarding_native"] = ratio(cap("aggnet_l256", "native"), cap(fwd, "native"))
    result["ratios"] = ratios
    result["targets_met"] = {
        "forwarding_ge_half_bridge": (ratios["native_vs_bridge_forwarding"] or 0) >= 0.5,
        "aggnet_l256_ge_half_forwarding": (ratios["aggnet_l256_vs_forwarding_native"] or 0) >= 0.5,
        "ge_10x_python": all((ratios.get(f"native_vs_python_{p}") or 0) >= 10 for p in result["programs"]),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
