#!/usr/bin/env python3
"""In-process packets/s of the embedded target (one thread, GIL-bound), written as JSON.

(a) basic IPv4 forwarding: lpm table, TTL decrement, checksum verify + update;
(b) 32-lane aggregation: per packet, 32 register read-add-write of int32 lanes.
Each case reports the median of a few timed rounds and the floor it must beat.
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import struct
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FLOORS = {"ipv4_forwarding": 30000, "aggregation_32_lanes": 8000}


def _rate(pipeline, port: int, packet: bytes, count: int, rounds: int) -> float:
    process = pipeline.process
    for _ in range(min(count, 1000)):  # warm up
        process(port, packet)
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(count):
            process(port, packet)
        rates.append(count / (time.perf_counter() - t0))
    return statistics.median(rates)


def bench_forwarding(count: int, rounds: int) -> dict:
    from scapy.all import IP, UDP, Ether

    from p4target import state as st
    from p4target.frontend import load_program
    from p4target.pipeline import Pipeline

    pipeline = Pipeline(load_program(str(ROOT / "tests/data/interp/basic.p4")))
    for i in range(64):  # a realistic table: several prefixes
        pipeline.state.insert_entry("MyIngress.ipv4_lpm", st.TableEntry(
            {"hdr.ipv4.dstAddr": st.Lpm(0x0A000000 | (i << 8), 24)}, "MyIngress.ipv4_forward",
            {"dstAddr": 0x020000000000 | i, "port": 1 + i % 4}))
    packet = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.5.9") / UDP() / (b"x" * 64))
    assert pipeline.process(1, packet), "forwarding benchmark packet was dropped"
    return {"pps": round(_rate(pipeline, 1, packet, count, rounds)), "packet_bytes": len(packet)}


def bench_aggregation(count: int, rounds: int) -> dict:
    from scapy.all import IP, UDP, Ether

    from p4target.frontend import load_program
    from p4target.pipeline import Pipeline

    pipeline = Pipeline(load_program(str(ROOT / "tests/data/interp/agg32.p4")))
    agg = struct.pack("!HH", 1, 7) + struct.pack("!32i", *range(-16, 16))
    packet = bytes(Ether() / IP() / UDP(dport=9000) / agg)
    assert pipeline.process(1, packet), "aggregation benchmark packet was dropped"
    return {"pps": round(_rate(pipeline, 1, packet, count, rounds)), "packet_bytes": len(packet), "lanes": 32}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--packets", type=int, default=20000, help="packets per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    results = {
        "ipv4_forwarding": bench_forwarding(args.packets, args.rounds),
        "aggregation_32_lanes": bench_aggregation(args.packets, args.rounds),
    }
    for name, floor in FLOORS.items():
        results[name]["floor_pps"] = floor
        results[name]["meets_floor"] = results[name]["pps"] >= floor
    report = {"benchmark": "embedded target, in-process", "python": platform.python_version(),
              "machine": platform.machine(), "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    for name, r in results.items():
        print(f"{name}: {r['pps']} packets/s (floor {r['floor_pps']})")
    return 0 if all(r["meets_floor"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
