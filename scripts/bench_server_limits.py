#!/usr/bin/env python3
"""What hostile or careless clients cost a switch: issue 30's probes against `aggnet switch` and,
side by side, simple_switch_grpc (BMv2), written as JSON.

Each probe runs on a fresh switch process (P4Runtime and Thrift on 127.0.0.1, no interfaces) that
was given p4c's JSON of tests/data/runtime/ipv4_cpu.p4 (its lpm table grown to 131,072 entries;
the P4 source when p4c is absent) over P4Runtime by a primary client. Per probe and target: its wall time, the switch's resident
memory before, at its peak (VmHWM, reset before the probe) and after, and what the client was
answered:

- idle_streams: the primary plus --streams StreamChannels that send nothing (each its own
  connection): how many are refused and what the first is told, and the primary's Capabilities,
  Write and Read latency (median of --calls) beside the others vs with none;
- sigterm_after_malformed: five streams send bytes that are no StreamMessageRequest (and stay
  open), then SIGTERM: the seconds until the process exits (or "hung", killed after
  --stop-timeout), and whether its port is free;
- backup_packet_out_flood: a backup client sends 2,000 PacketOuts of 100 KB and never reads its
  stream;
- huge_action_param: an INSERT whose action parameter is 3 MB: the status and its length;
- wildcard_read: a Read of 10,000 identical wildcards over a table of 50 entries;
- thrift_empty_structs: a Thrift call whose list holds 2,000,000 empty structs (2 MB);
- sidechannel_long_line: 50 MB without a newline on the Thrift/side-channel port, the
  connection held open;
- write_100k: one Write of 100,000 INSERTs, then a Read of them: wall time and the switch's CPU time.

    .venv/bin/python scripts/bench_server_limits.py --out bench/server_limits.json
    (source /opt/p4ref/env.sh first for BMv2; without simple_switch_grpc only aggnet runs)

`--aggnet-root DIR` runs another checkout's `aggnet switch` (e.g. main, for a before/after).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_status

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PROGRAM = ROOT / "tests" / "data" / "runtime" / "ipv4_cpu.p4"
DEVICE_ID = 1
PRIMARY_ID = 1000
CPU_PORT = 255
START_TIMEOUT_S = 60.0
MB = 1 << 20


class BenchError(Exception):
    """The benchmark cannot run (one line; exit 1)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def compile_program(out_dir: str) -> tuple[bytes, object]:
    """The device config and P4Info of ipv4_cpu.p4 with room for 100,000 routes: p4c's JSON (what both targets
    take), or without p4c on PATH the P4 source (aggnet only)."""
    source = PROGRAM.read_text().replace("size = 1024;", "size = 131072;")
    if shutil.which("p4c") is None:
        from p4target.frontend import load_source
        from p4target.p4info import build_p4info

        return source.encode(), build_p4info(load_source(source, "limits.p4"))
    from controller.p4c import compile_bmv2

    path = Path(out_dir) / "limits.p4"
    path.write_text(source)
    return compile_bmv2(str(path), out_dir)


class Switch:
    """One switch process (aggnet or bmv2) with the program pushed by a primary client."""

    def __init__(self, target: str, aggnet_root: Path, work: str, config: tuple[bytes, object]):
        self.target = target
        self.grpc_port, self.thrift_port = free_port(), free_port()
        self.address = f"127.0.0.1:{self.grpc_port}"
        self.log = Path(work) / f"{target}.log"
        if target == "aggnet":
            python = aggnet_root / ".venv" / "bin" / "python"
            command = [str(python if python.exists() else sys.executable), "-m", "testbed.cli", "switch",
                       "--device-id", str(DEVICE_ID), "--grpc-server-addr", self.address,
                       "--thrift-port", str(self.thrift_port), "--cpu-port", str(CPU_PORT), "--log", str(self.log)]
            cwd = aggnet_root
        else:
            command = ["simple_switch_grpc", "--device-id", str(DEVICE_ID), "--thrift-port", str(self.thrift_port),
                       "--no-p4", "--", "--grpc-server-addr", self.address, "--cpu-port", str(CPU_PORT)]
            cwd = Path(work)
        self.process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=self.log.open("ab"))
        self.primary = Primary(self, config)

    def memory(self, field: str) -> float:
        """VmRSS or VmHWM of the switch process, MB."""
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return round(int(line.split()[1]) / 1024, 1)
        raise BenchError(f"{self.target}: no {field} in /proc/{self.process.pid}/status")

    def cpu_s(self) -> float:
        """The switch process's CPU seconds so far (user + system): on a loaded machine a steadier figure than
        wall time."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset_peak(self) -> None:
        with open(f"/proc/{self.process.pid}/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS

    def stop(self, timeout: float) -> dict:
        """SIGTERM; the seconds until it exits, or hung (then SIGKILL)."""
        if self.process.poll() is not None:
            return {"exit": f"had exited ({self.process.returncode})"}
        start = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return {"exit": f"hung: no exit {timeout:.0f} s after SIGTERM, killed"}
        return {"exit": f"exited {code}", "exit_s": round(time.monotonic() - start, 2)}


def stream(channel: grpc.Channel, requests: Iterator) -> Iterator:
    return p4r_grpc.P4RuntimeStub(channel).StreamChannel(requests)


def arbitration(election_id: int) -> p4r.StreamMessageRequest:
    return p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=DEVICE_ID, election_id=p4r.Uint128(low=election_id)))


class Primary:
    """The controller: primary over its own stream (read by a thread), Write, Read, Capabilities."""

    def __init__(self, switch: Switch, config: tuple[bytes, object]):
        self.channel = grpc.insecure_channel(switch.address)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if switch.process.poll() is not None:
                raise BenchError(f"{switch.target}: exited at start: {switch.log.read_text()[-300:]}")
            try:
                grpc.channel_ready_future(self.channel).result(timeout=0.5)
                break
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline:
                    raise BenchError(f"{switch.target}: no P4Runtime server on {switch.address}") from None
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self._responses = stream(self.channel, iter(self._requests.get, None))
        self._requests.put(arbitration(PRIMARY_ID))
        if next(self._responses).arbitration.status.code != 0:
            raise BenchError(f"{switch.target}: the controller is not primary")
        threading.Thread(target=_drain, args=(self._responses,), daemon=True).start()
        json_config, self.p4info = config
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, election_id=p4r.Uint128(low=PRIMARY_ID),
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
            config=p4r.ForwardingPipelineConfig(p4info=self.p4info, p4_device_config=json_config)), timeout=120)
        self.ids = {e.preamble.name: e.preamble.id for kind in ("tables", "actions")
                    for e in getattr(self.p4info, kind)}

    def write(self, updates: list, timeout: float = 120) -> None:
        self.stub.Write(p4r.WriteRequest(device_id=DEVICE_ID, election_id=p4r.Uint128(low=PRIMARY_ID),
                                         updates=updates), timeout=timeout)

    def read(self, entities: list, timeout: float = 120) -> int:
        request = p4r.ReadRequest(device_id=DEVICE_ID, entities=entities)
        return sum(len(r.entities) for r in self.stub.Read(request, timeout=timeout))

    def route(self, i: int, action: str = "NoAction", params: tuple[bytes, ...] = ()) -> p4r.Entity:
        te = p4r.TableEntry(table_id=self.ids["MyIngress.ipv4_lpm"])
        te.match.add(field_id=1).lpm.CopyFrom(p4r.FieldMatch.LPM(value=(0x0A000000 + i).to_bytes(4, "big"),
                                                                  prefix_len=32))
        te.action.action.action_id = self.ids[action]
        for n, value in enumerate(params, 1):
            te.action.action.params.add(param_id=n, value=value)
        return p4r.Entity(table_entry=te)

    def inserts(self, indexes: range) -> list:
        return [p4r.Update(type=p4r.Update.INSERT, entity=self.route(i)) for i in indexes]

    def wildcard(self) -> p4r.Entity:
        return p4r.Entity(table_entry=p4r.TableEntry(table_id=self.ids["MyIngress.ipv4_lpm"]))

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()


def answer(call: Callable[[], object]) -> str:
    """OK, or the status code and the first 160 characters of its message (and its length), and of the first
    per-update p4.v1.Error's."""
    try:
        call()
    except grpc.RpcError as exc:
        text = f"{exc.code().name}: {_shown(exc.details() or '')}"
        for key, value in exc.trailing_metadata() or ():
            if key == "grpc-status-details-bin":
                error = p4r.Error()
                details = rpc_status.Status.FromString(value).details
                if details and details[0].Unpack(error):
                    text += f" / update 0: code {error.canonical_code}: {_shown(error.message)}"
        return text
    return "OK"


def _shown(text: str) -> str:
    return text[:160] + (f"... ({len(text)} characters)" if len(text) > 160 else "")


def latency_ms(call: Callable[[], object], calls: int) -> float | str:
    """Median milliseconds of `calls` calls, or the first error."""
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        outcome = answer(call)
        if outcome != "OK":
            return outcome
        times.append((time.perf_counter() - start) * 1000)
    return round(statistics.median(times), 2)


def controller_latencies(sw: Switch, calls: int) -> dict:
    pc = sw.primary
    update = [p4r.Update(type=p4r.Update.MODIFY, entity=pc.route(0))]
    return {"capabilities_ms": latency_ms(lambda: pc.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=10), calls),
            "write_ms": latency_ms(lambda: pc.write(update, timeout=10), calls),
            "read_ms": latency_ms(lambda: pc.read([pc.wildcard()], timeout=10), calls)}


# -- the probes: each gets a running switch and returns what it measured ------------------------------------
def idle_streams(sw: Switch, args: argparse.Namespace) -> dict:
    sw.primary.write(sw.primary.inserts(range(50)))
    alone = controller_latencies(sw, args.calls)
    channels, ended = [], []
    try:
        for i in range(args.streams):  # each on its own connection; it sends nothing at all
            channel = grpc.insecure_channel(sw.address)
            channels.append(channel)
            call = stream(channel, iter(queue.Queue().get, None))
            threading.Thread(target=_ending, args=(call, i + 2, ended), daemon=True).start()
        time.sleep(3)  # for the refusals to arrive (a benchmark's wait, not a verdict)
        beside = controller_latencies(sw, args.calls)
    finally:
        for channel in channels:
            channel.close()
    refused = sorted(ended)
    return {"streams_opened": args.streams + 1, "streams_refused": len(refused),
            "first_refused": f"stream {refused[0][0]}: {refused[0][1]}" if refused else None,
            "controller_alone": alone, f"controller_beside_{args.streams - len(refused)}_idle": beside}


def _ending(call: Iterator, number: int, ended: list) -> None:
    """Records (stream number, status) when the switch ends a stream."""
    try:
        for _ in call:
            pass
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.CANCELLED:
            ended.append((number, f"{exc.code().name}: {exc.details()}"))


def sigterm_after_malformed(sw: Switch, args: argparse.Namespace) -> dict:
    channels = []
    for _ in range(5):
        channel = grpc.insecure_channel(sw.address)
        channels.append(channel)
        call = channel.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=lambda b: b,
                                     response_deserializer=lambda b: b)
        requests: queue.Queue = queue.Queue()
        requests.put(b"\x0a\xff\xff")  # a field that claims more bytes than follow
        requests.put(b"\x12\x05abc")
        threading.Thread(target=_drain, args=(call(iter(requests.get, None)),), daemon=True).start()
    time.sleep(1)
    sw.primary.close()
    result = sw.stop(args.stop_timeout)
    result["port_free_after"] = _port_free(sw.grpc_port)
    for channel in channels:
        channel.close()
    return result


def _drain(responses: Iterator) -> None:
    try:
        for _ in responses:
            pass
    except grpc.RpcError:
        pass


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def backup_packet_out_flood(sw: Switch, args: argparse.Namespace) -> dict:
    out = p4r.PacketOut(payload=bytes(100_000), metadata=[p4r.PacketMetadata(metadata_id=1, value=b"\x01"),
                                                        p4r.PacketMetadata(metadata_id=2, value=b"\x00")])
    sent = threading.Event()

    def requests() -> Iterator[p4r.StreamMessageRequest]:
        yield arbitration(1)
        for _ in range(2000):
            yield p4r.StreamMessageRequest(packet=out)
        sent.set()
        time.sleep(3)  # the stream stays open a moment, never read

    channel = grpc.insecure_channel(sw.address, options=[("grpc.max_send_message_length", 8 * MB)])
    responses = stream(channel, requests())  # never iterated: the client reads nothing
    delivered = sent.wait(120)
    time.sleep(2)
    channel.close()
    del responses
    return {"packet_outs_taken": "all 2000" if delivered else "not all within 120 s"}


def huge_action_param(sw: Switch, args: argparse.Namespace) -> dict:
    pc = sw.primary
    update = p4r.Update(type=p4r.Update.INSERT, entity=pc.route(1, "MyIngress.ipv4_forward",
                                                                (b"\x01" * (3 * MB), b"\x01")))
    return {"answer": answer(lambda: pc.write([update]))}


def wildcard_read(sw: Switch, args: argparse.Namespace) -> dict:
    pc = sw.primary
    pc.write(pc.inserts(range(50)))
    got: list[int] = []
    outcome = answer(lambda: got.append(pc.read([pc.wildcard()] * 10_000, timeout=300)))
    return {"answer": outcome, "entities_returned": got[0] if got else None}


def thrift_empty_structs(sw: Switch, args: argparse.Namespace) -> dict:
    name = b"standard:bm_mt_add_entry"  # BMv2 serves its API multiplexed
    body = struct.pack(">bh", 15, 3) + struct.pack(">bi", 12, 2_000_000) + bytes(2_000_000) + b"\x00"
    message = struct.pack(">I", 0x80010001) + struct.pack(">i", len(name)) + name + struct.pack(">i", 1) + body
    return {"request_bytes": len(message), "answer": _send_and_listen(sw.thrift_port, message)}


def sidechannel_long_line(sw: Switch, args: argparse.Namespace) -> dict:
    return {"answer": _send_and_listen(sw.thrift_port, b"a" * (50 * MB))}


def _send_and_listen(port: int, data: bytes) -> str:
    """Send `data`, hold the connection 2 s more, and say what came back."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        try:
            conn.sendall(data)
        except OSError as exc:
            return f"send failed: {exc.strerror}"
        conn.settimeout(2)
        try:
            reply = conn.recv(200)
        except TimeoutError:
            return "no reply; connection held open"
        except OSError as exc:
            return f"connection {exc.strerror}"
    return f"closed with {reply[:120]!r}" if reply else "closed without a reply"


def write_100k(sw: Switch, args: argparse.Namespace) -> dict:
    pc = sw.primary
    updates = pc.inserts(range(100_000))
    size = p4r.WriteRequest(updates=updates).ByteSize()
    cpu, start = sw.cpu_s(), time.monotonic()
    outcome = answer(lambda: pc.write(updates, timeout=300))
    write_s, write_cpu_s = time.monotonic() - start, sw.cpu_s() - cpu
    if outcome != "OK":
        return {"request_bytes": size, "answer": outcome}
    cpu, start = sw.cpu_s(), time.monotonic()
    got = pc.read([pc.wildcard()], timeout=300)
    return {"request_bytes": size, "answer": outcome, "write_s": round(write_s, 2),
            "write_switch_cpu_s": round(write_cpu_s, 2), "read_back_s": round(time.monotonic() - start, 2),
            "read_back_switch_cpu_s": round(sw.cpu_s() - cpu, 2), "entries_read_back": got}


PROBES: dict[str, Callable[[Switch, argparse.Namespace], dict]] = {
    f.__name__: f for f in (idle_streams, sigterm_after_malformed, backup_packet_out_flood, huge_action_param,
                            wildcard_read, thrift_empty_structs, sidechannel_long_line, write_100k)}


def run_probe(name: str, target: str, args: argparse.Namespace, work: str, config: tuple[bytes, object]) -> dict:
    sw = Switch(target, args.aggnet_root, work, config)
    try:
        sw.reset_peak()
        before = sw.memory("VmRSS")
        start = time.monotonic()
        measured = PROBES[name](sw, args)
        seconds = time.monotonic() - start
        alive = sw.process.poll() is None
        memory = {"rss_before_mb": before, "rss_peak_mb": sw.memory("VmHWM") if alive else None,
                  "rss_after_mb": sw.memory("VmRSS") if alive else None}
        return {"seconds": round(seconds, 2), **memory, **measured}
    finally:
        sw.primary.close()
        sw.stop(args.stop_timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--probes", default=",".join(PROBES), help="comma-separated, of: " + ", ".join(PROBES))
    parser.add_argument("--targets", default="aggnet,bmv2", help="aggnet, bmv2 or both")
    parser.add_argument("--streams", type=int, default=210, help="idle streams to try to open")
    parser.add_argument("--calls", type=int, default=20, help="controller calls per latency figure")
    parser.add_argument("--stop-timeout", type=float, default=30.0, help="seconds a switch gets to exit on SIGTERM")
    parser.add_argument("--aggnet-root", type=Path, default=ROOT, help="the checkout whose `aggnet switch` runs")
    args = parser.parse_args(argv)
    probes = [p for p in args.probes.split(",") if p]
    targets = [t for t in args.targets.split(",") if t]
    if set(probes) - set(PROBES) or set(targets) - {"aggnet", "bmv2"}:
        print("bench_server_limits: unknown --probes or --targets", file=sys.stderr)
        return 2
    if "bmv2" in targets and not (shutil.which("simple_switch_grpc") and shutil.which("p4c")):
        print("bench_server_limits: no simple_switch_grpc/p4c on PATH (source /opt/p4ref/env.sh): aggnet only",
              file=sys.stderr)
        targets.remove("bmv2")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-limits-") as work:
        try:
            config = compile_program(work)
            for name in probes:
                results[name] = {}
                for target in targets:
                    results[name][target] = run_probe(name, target, args, work, config)
                    print(name, target, json.dumps(results[name][target]), flush=True)
        except BenchError as exc:
            print(f"bench_server_limits: {exc}", file=sys.stderr)
            return 1
    report = {"benchmark": "issue 30's probes: what hostile clients cost a switch process, aggnet vs simple_switch_grpc",
              "python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count(),
              "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
              "aggnet_root": str(args.aggnet_root), "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
