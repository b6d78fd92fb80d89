#!/usr/bin/env python3
"""In-process packets/s of the embedded target (one thread, GIL-bound), written as JSON.

(a) basic IPv4 forwarding: lpm table, TTL decrement, checksum verify + update;
(b) 32-lane aggregation: per packet, 32 register read-add-write of int32 lanes;
(c) p4src/aggnet.p4 with 32, 64 and 128 lanes: 4 children per slot, as the switch sees a step
    (first contribution writes the lanes, the others add with saturation, the last one's
    result is multicast to the 4 ports); pps counts contributions in. At 64 lanes the same
    run also times the code generator with its vector pass off (`scalar_pps`), the speed-up
    that pass (p4target/backends/vectorize.py) brings.
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

FLOORS = {"ipv4_forwarding": 30000, "aggregation_32_lanes": 8000, "aggnet_32_lanes": 4000, "aggnet_64_lanes": 2000,
          "aggnet_128_lanes": 1000}
CHILDREN = 4
SLOTS = 8


def _rate(pipeline, packets: list[tuple[int, bytes]], count: int, rounds: int) -> float:
    """Packets/s of `pipeline.process` over `count` packets cycling through `packets`."""
    process = pipeline.process
    n = len(packets)
    for i in range(min(count, 1000)):  # warm up
        process(*packets[i % n])
    rates = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(count):
            process(*packets[i % n])
        rates.append(count / (time.perf_counter() - t0))
    return statistics.median(rates)


def bench_forwarding(count: int, rounds: int) -> dict:
    from scapy.all import IP, UDP, Ether

    from p4target import load
    from p4target import state as st
    from p4target.frontend import load_program

    pipeline = load.pipeline(load_program(str(ROOT / "tests/data/interp/basic.p4")), "python")
    for i in range(64):  # a realistic table: several prefixes
        pipeline.state.insert_entry("MyIngress.ipv4_lpm", st.TableEntry(
            {"hdr.ipv4.dstAddr": st.Lpm(0x0A000000 | (i << 8), 24)}, "MyIngress.ipv4_forward",
            {"dstAddr": 0x020000000000 | i, "port": 1 + i % 4}))
    packet = bytes(Ether() / IP(src="10.0.0.1", dst="10.0.5.9") / UDP() / (b"x" * 64))
    assert pipeline.process(1, packet), "forwarding benchmark packet was dropped"
    return {"pps": round(_rate(pipeline, [(1, packet)], count, rounds)), "packet_bytes": len(packet)}


def bench_aggregation(count: int, rounds: int) -> dict:
    from scapy.all import IP, UDP, Ether

    from p4target import load
    from p4target.frontend import load_program

    pipeline = load.pipeline(load_program(str(ROOT / "tests/data/interp/agg32.p4")), "python")
    agg = struct.pack("!HH", 1, 7) + struct.pack("!32i", *range(-16, 16))
    packet = bytes(Ether() / IP() / UDP(dport=9000) / agg)
    assert pipeline.process(1, packet), "aggregation benchmark packet was dropped"
    return {"pps": round(_rate(pipeline, [(1, packet)], count, rounds)), "packet_bytes": len(packet), "lanes": 32}


def _aggnet_pipeline(lanes: int, vectorize: bool = True):
    """aggnet.p4 as the only switch of a star: job 1, children on ports 1..CHILDREN, root."""
    from p4target import load
    from p4target import state as st
    from p4target.frontend import load_program
    from protocol import wire

    pipeline = load.pipeline(load_program(str(ROOT / "p4src" / wire.program_name(lanes))), "python", vectorize=vectorize)
    s = pipeline.state
    s.insert_entry("AggIngress.agg_job", st.TableEntry(
        {"hdr.agg.job_id": st.Exact(1)}, "AggIngress.set_job",
        {"slot_base": 0, "slot_count": SLOTS, "children": CHILDREN, "aggregate": 1, "is_root": 1,
         "parent_port": 0, "mcast_grp": 2}))
    for port in range(1, CHILDREN + 1):
        s.insert_entry("AggIngress.agg_child", st.TableEntry(
            {"hdr.agg.job_id": st.Exact(1), "standard_metadata.ingress_port": st.Exact(port),
             "hdr.ipv4.srcAddr": st.Ternary(0, 0)}, "AggIngress.set_child", {"index": port - 1}, priority=1))
        s.insert_entry("AggEgress.agg_host", st.TableEntry(
            {"standard_metadata.egress_port": st.Exact(port)}, "AggEgress.set_host",
            {"mac": 0x020000000000 | port, "ip": 0x0A000000 | port, "udp_port": wire.AGG_PORT}))
    s.mc_group_insert(2, [(port, 0) for port in range(1, CHILDREN + 1)])
    return pipeline


def bench_aggnet(lanes: int, count: int, rounds: int, vectorize: bool = True) -> dict:
    """Contributions/s through aggnet.p4: a window of SLOTS slots, both pools, CHILDREN children."""
    from scapy.all import IP, UDP, Ether

    from protocol import wire

    pipeline = _aggnet_pipeline(lanes, vectorize)
    packets = []
    for chunk in range(2 * SLOTS):  # slots 0..SLOTS-1 in pool 0, then in pool 1
        slot, pool = chunk % SLOTS, chunk // SLOTS
        for child in range(1, CHILDREN + 1):
            agg = wire.HEADER_STRUCT.pack(1, slot, chunk, pool * wire.FLAG_POOL, 0, lanes, 1, 0)
            values = struct.pack(f"!{lanes}i", *(child * (k - lanes // 2) for k in range(lanes)))
            ip = IP(src=f"10.0.0.{child}", dst="10.0.255.254")
            packets.append((child, bytes(Ether() / ip / UDP(sport=wire.AGG_PORT, dport=wire.AGG_PORT) / (agg + values))))
    results = [pipeline.process(*p) for p in packets[:CHILDREN]]
    assert [len(r) for r in results] == [0] * (CHILDREN - 1) + [CHILDREN], "aggnet did not complete a slot"
    return {"pps": round(_rate(pipeline, packets, count, rounds)), "packet_bytes": len(packets[0][1]),
            "lanes": lanes, "children": CHILDREN}


def main(argv: list[str] | None = None) -> int:
    from p4target import externs

    externs.load()  # this script is a composition root of the target
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--packets", type=int, default=20000, help="packets per timed round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    results = {
        "ipv4_forwarding": bench_forwarding(args.packets, args.rounds),
        "aggregation_32_lanes": bench_aggregation(args.packets, args.rounds),
        "aggnet_32_lanes": bench_aggnet(32, args.packets, args.rounds),
        "aggnet_64_lanes": bench_aggnet(64, args.packets, args.rounds),
        "aggnet_128_lanes": bench_aggnet(128, args.packets, args.rounds),
    }
    scalar = bench_aggnet(64, args.packets, args.rounds, vectorize=False)["pps"]
    results["aggnet_64_lanes"].update(scalar_pps=scalar, vector_speedup=round(results["aggnet_64_lanes"]["pps"] / scalar, 2))
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
