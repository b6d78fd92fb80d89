#!/usr/bin/env python3
"""P4Runtime write and read rates of a real `aggnet switch` process, written as JSON.

Starts `aggnet switch` without interfaces, its P4Runtime server on 127.0.0.1 and the
program tests/data/runtime/route_scale.p4 (an lpm, an exact and a ternary table of 64k
entries), becomes primary over StreamChannel and, for each table:

- batched INSERT: --entries entries in Writes of --batch updates (entries/s);
- wildcard Read of the whole table (entries/s);
- one update per Write: --single more entries, one INSERT per Write RPC (entries/s);
- one entry per Read: the same entries read back one Read RPC each (reads/s);
- batched DELETE of everything (entries/s).

The batched phases also give the switch process's CPU seconds. `--aggnet-root DIR` runs another
checkout's `aggnet switch` (e.g. main, for a before/after).

The client is plain gRPC with prebuilt protobuf messages, so the numbers are the
server's (and the wire's), not a client library's. Needs no root.

    .venv/bin/python scripts/bench_runtime.py --out bench/runtime.json
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROGRAM = ROOT / "tests" / "data" / "runtime" / "route_scale.p4"
DEVICE_ID = 1
ELECTION_ID = 10
START_TIMEOUT_S = 60.0
TABLES = {"lpm": "MyIngress.routes", "exact": "MyIngress.hosts", "ternary": "MyIngress.acl"}


class BenchError(Exception):
    """The benchmark cannot run (one line; exit 1)."""

    exit_code = 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_switch(log_dir: str, aggnet_root: Path = ROOT) -> tuple[subprocess.Popen, str, str]:
    """An `aggnet switch` process (of the checkout `aggnet_root`) with no ports; returns (process, gRPC address,
    log path)."""
    address = f"127.0.0.1:{free_port()}"
    log = os.path.join(log_dir, "s1.log")
    env = dict(os.environ, PYTHONPATH=str(aggnet_root))
    command = [sys.executable, "-m", "testbed.cli", "switch", "--device-id", str(DEVICE_ID),
               "--grpc-server-addr", address, "--thrift-port", str(free_port()), "--log", log, str(PROGRAM)]
    process = subprocess.Popen(command, cwd=aggnet_root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                               text=True)
    return process, address, log


def cpu_s(process: subprocess.Popen) -> float:
    """The switch's CPU seconds so far (user + system): steadier than wall time on a shared machine."""
    with open(f"/proc/{process.pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def stop_switch(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


class Client:
    """The primary P4Runtime client of one device: arbitration stream, Write, Read."""

    def __init__(self, address: str, process: subprocess.Popen):
        import grpc
        from finsy.proto import p4r, p4r_grpc

        self.p4r = p4r
        self.process = process
        self.channel = grpc.insecure_channel(address)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise BenchError(f"bench_runtime: the switch exited with {process.returncode}: "
                                 f"{(process.stderr.read().strip().splitlines() or ['no output'])[-1]}")
            try:
                grpc.channel_ready_future(self.channel).result(timeout=0.5)
                break
            except grpc.FutureTimeoutError:
                if time.monotonic() > deadline:
                    raise BenchError(f"bench_runtime: no P4Runtime server on {address} after {START_TIMEOUT_S:.0f} s") from None
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._requests.get, None))
        arbitration = p4r.MasterArbitrationUpdate(device_id=DEVICE_ID, election_id=p4r.Uint128(low=ELECTION_ID))
        self._requests.put(p4r.StreamMessageRequest(arbitration=arbitration))
        reply = next(self._stream)
        if reply.arbitration.status.code != 0:
            raise BenchError(f"bench_runtime: not primary: {reply.arbitration.status.message}")

    def p4info(self):
        request = self.p4r.GetForwardingPipelineConfigRequest(
            device_id=DEVICE_ID, response_type=self.p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        return self.stub.GetForwardingPipelineConfig(request).config.p4info

    def write(self, updates: list) -> None:
        self.stub.Write(self.p4r.WriteRequest(device_id=DEVICE_ID, election_id=self.p4r.Uint128(low=ELECTION_ID),
                                              updates=updates))

    def read(self, entity) -> int:
        """Number of entities a Read of `entity` returns."""
        request = self.p4r.ReadRequest(device_id=DEVICE_ID, entities=[entity])
        return sum(len(response.entities) for response in self.stub.Read(request))

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()


class Entries:
    """Prebuilt TableEntry messages for one table of route_scale.p4."""

    def __init__(self, p4info, kind: str):
        from finsy.proto import p4r

        self.p4r = p4r
        self.kind = kind
        table = next(t for t in p4info.tables if t.preamble.name == TABLES[kind])
        action = next(a for a in p4info.actions if a.preamble.name == "MyIngress.forward")
        self.table_id = table.preamble.id
        self.field_id = table.match_fields[0].id
        self.action_id = action.preamble.id
        self.param_ids = [p.id for p in action.params]

    def entry(self, i: int, with_action: bool = True):
        p4r = self.p4r
        te = p4r.TableEntry(table_id=self.table_id)
        fm = te.match.add(field_id=self.field_id)
        if self.kind == "lpm":
            fm.lpm.value, fm.lpm.prefix_len = (i << 8).to_bytes(4, "big"), 24
        elif self.kind == "exact":
            fm.exact.value = (0x020000000000 | i).to_bytes(6, "big")
        else:
            fm.ternary.value, fm.ternary.mask = i.to_bytes(4, "big"), b"\xff\xff\xff\xff"
            te.priority = 1 + i % 16
        if with_action:
            te.action.action.action_id = self.action_id
            te.action.action.params.add(param_id=self.param_ids[0], value=(0x020000000000 | i).to_bytes(6, "big"))
            te.action.action.params.add(param_id=self.param_ids[1], value=(1 + i % 8).to_bytes(2, "big"))
        return te

    def updates(self, update_type: int, indexes: range) -> list:
        return [self.p4r.Update(type=update_type, entity=self.p4r.Entity(table_entry=self.entry(
            i, with_action=update_type != self.p4r.Update.DELETE))) for i in indexes]


def rate(count: int, seconds: float) -> float:
    return round(count / seconds, 1) if seconds > 0 else float("inf")


def bench_table(client: Client, entries: Entries, n: int, batch: int, single: int) -> dict:
    p4r = entries.p4r
    inserts = entries.updates(p4r.Update.INSERT, range(n))
    t0, cpu0 = time.perf_counter(), cpu_s(client.process)
    for start in range(0, n, batch):
        client.write(inserts[start:start + batch])
    batched_insert, insert_cpu = time.perf_counter() - t0, cpu_s(client.process) - cpu0

    wildcard = p4r.Entity(table_entry=p4r.TableEntry(table_id=entries.table_id))
    t0 = time.perf_counter()
    got = client.read(wildcard)
    wildcard_read = time.perf_counter() - t0
    if got != n:
        raise BenchError(f"bench_runtime: {entries.kind}: read back {got} entries, wrote {n}")

    singles = entries.updates(p4r.Update.INSERT, range(n, n + single))
    t0 = time.perf_counter()
    for update in singles:
        client.write([update])
    single_insert = time.perf_counter() - t0

    reads = [p4r.Entity(table_entry=entries.entry(i, with_action=False)) for i in range(n, n + single)]
    t0 = time.perf_counter()
    found = sum(client.read(entity) for entity in reads)
    single_read = time.perf_counter() - t0
    if found != single:
        raise BenchError(f"bench_runtime: {entries.kind}: {found} of {single} single reads found their entry")

    deletes = entries.updates(p4r.Update.DELETE, range(n + single))
    t0, cpu0 = time.perf_counter(), cpu_s(client.process)
    for start in range(0, len(deletes), batch):
        client.write(deletes[start:start + batch])
    batched_delete, delete_cpu = time.perf_counter() - t0, cpu_s(client.process) - cpu0
    if client.read(wildcard) != 0:
        raise BenchError(f"bench_runtime: {entries.kind}: entries left after the batched delete")
    return {
        "batched_insert_entries_per_s": rate(n, batched_insert),
        "batched_insert_switch_cpu_s": round(insert_cpu, 2),
        "wildcard_read_entries_per_s": rate(n, wildcard_read),
        "one_per_write_insert_entries_per_s": rate(single, single_insert),
        "one_per_read_reads_per_s": rate(single, single_read),
        "batched_delete_entries_per_s": rate(len(deletes), batched_delete),
        "batched_delete_switch_cpu_s": round(delete_cpu, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--entries", type=int, default=20000, help="entries per table in the batched phase")
    parser.add_argument("--batch", type=int, default=500, help="updates per Write in the batched phases")
    parser.add_argument("--single", type=int, default=1000, help="entries written (and read) one per RPC")
    parser.add_argument("--kinds", default="lpm,exact,ternary", help="tables to measure (lpm, exact, ternary)")
    parser.add_argument("--aggnet-root", type=Path, default=ROOT, help="the checkout whose `aggnet switch` runs")
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in TABLES]
    if unknown:
        print(f"bench_runtime: --kinds: unknown table kind {unknown[0]!r} (lpm, exact, ternary)", file=sys.stderr)
        return 2
    if args.entries + args.single > 65536 or min(args.entries, args.batch, args.single) < 1:
        print("bench_runtime: need 1 <= --entries + --single <= 65536 (the table size), --batch >= 1",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-runtime-") as log_dir:
        process, address, _log = start_switch(log_dir, args.aggnet_root)
        client = None
        try:
            client = Client(address, process)
            p4info = client.p4info()
            results = {kind: bench_table(client, Entries(p4info, kind), args.entries, args.batch, args.single)
                       for kind in kinds}
        except BenchError as exc:
            print(exc, file=sys.stderr)
            return exc.exit_code
        finally:
            if client is not None:
                client.close()
            stop_switch(process)
    report = {
        "benchmark": "P4Runtime write/read rate of an aggnet switch process over 127.0.0.1",
        "python": platform.python_version(),
        "machine": platform.machine(),
        "program": str(PROGRAM.relative_to(ROOT)),
        "entries": args.entries, "batch": args.batch, "single": args.single, "aggnet_root": str(args.aggnet_root),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "results": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
