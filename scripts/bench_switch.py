#!/usr/bin/env python3
"""Forwarding rate of one embedded switch process between two Mininet hosts (packets/s).

h1 floods UDP at h2 through s1 (running tests/data/testbed/ipv4_counters.p4 by default,
routes added with the side channel's table_add); the rate is s1's transmitted packets
on h2's port over a steady window, sampled from its port_stats. Needs root.

    .venv/bin/python scripts/bench_switch.py --seconds 5 --size 100 --out bench.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

FLOOD = ("import socket, time\n"
         "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); d = ('{dst}', 5001)\n"
         "p = bytes({size}); end = time.monotonic() + {seconds}\n"
         "while time.monotonic() < end:\n"
         "    for _ in range(100):\n"
         "        s.sendto(p, d)\n")  # unconnected: h2's ICMP port-unreachable must not stop us


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--program", default=os.path.join(REPO, "tests", "data", "testbed", "ipv4_counters.p4"))
    parser.add_argument("--seconds", type=float, default=5.0, help="measurement window (default 5)")
    parser.add_argument("--size", type=int, default=100, help="UDP payload bytes (default 100)")
    parser.add_argument("--out", help="write the result as JSON here")
    args = parser.parse_args()

    from controller.topology import parse_topology
    from p4target.sidechannel import send_command
    from testbed.network import Testbed

    topo = parse_topology({"name": "bench", "hosts": [{"name": "h1"}, {"name": "h2"}], "switches": [{"name": "s1"}],
                           "links": [{"a": "h1", "b": "s1"}, {"a": "h2", "b": "s1"}]}, "bench")
    with tempfile.TemporaryDirectory() as run_dir, Testbed(topo, "embedded", run_dir, program=args.program) as tb:
        thrift = tb.side_channel_port("s1")
        for h in topo.hosts.values():
            send_command(thrift, f"table_add ipv4_lpm ipv4_forward {h.ip}/32 => {h.mac} {topo.port_of('s1', h.name)}")
        out_port = str(topo.port_of("s1", "h2"))
        in_port = str(topo.port_of("s1", "h1"))
        warmup = 1.0
        flood = FLOOD.format(dst=topo.hosts["h2"].ip, size=args.size, seconds=warmup + args.seconds + 1.0)
        script = os.path.join(run_dir, "flood.py")
        with open(script, "w") as f:
            f.write(flood)
        tb.host("h1").sendCmd(f"python3 {script}")
        time.sleep(warmup)
        first, t0 = json.loads(send_command(thrift, "port_stats")), time.monotonic()
        time.sleep(args.seconds)
        last, t1 = json.loads(send_command(thrift, "port_stats")), time.monotonic()
        flood_output = tb.host("h1").waitOutput()
        if flood_output.strip():
            print(f"bench_switch: sender: {flood_output.strip()}", file=sys.stderr)
        tb.check()
    forwarded = last[out_port]["tx_packets"] - first[out_port]["tx_packets"]
    offered = last[in_port]["rx_packets"] - first[in_port]["rx_packets"]
    result = {"benchmark": "switch_forwarding", "target": "embedded", "program": os.path.basename(args.program),
              "payload_bytes": args.size, "frame_bytes": args.size + 42, "window_s": round(t1 - t0, 3),
              "forwarded_pps": round(forwarded / (t1 - t0), 1), "received_pps": round(offered / (t1 - t0), 1)}
    print(json.dumps(result))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
