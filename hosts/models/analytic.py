"""What a DDP iteration should take: compute, plus the communication it leaves exposed, bucket by
bucket, at link rate.

    iteration = forward + max(backward, the last bucket's all-reduce end)

where bucket i's all-reduce starts when its gradients are ready (hosts.models.ddp.Plan) and the
previous bucket's all-reduce is done (one at a time, in order, as DDP issues them), and lasts the
bytes the scheme puts on its busiest link over the link rate:

- innet: every worker sends its bucket once and receives the sum once (full duplex), in UDP frames
  of `lanes` int32 values: ceil(values / lanes) frames of Ethernet + IP + UDP + AggNet header + lanes;
- ring: reduce-scatter and all-gather, 2 (W-1)/W of the bucket each way, in TCP segments of
  1448 bytes in 1514-byte frames, beside the ACKs of the flow coming the other way (a 66-byte frame
  per two segments, Linux's delayed ACK; 2.2% more);
- ps: the server's link carries every worker's bucket in and every sum out, W buckets each way in
  TCP frames, both directions at once: the server sums hosts.ps.CHUNK_BYTES at a time as they
  arrive and sends each piece's sum on at once. The sums trail the contributions by one piece:
  the last piece's sums leave only once the last piece of every bucket is in, so a bucket takes
  W (bucket + its last piece) on the server's link (a bucket of one piece: in, then out, twice
  its W buckets). The pieces are of what is sent, grad_scale of the bucket (see below);
- hostagg: W buckets each way on the aggregator's link, in TCP frames.

Everything is in the emulated cluster's time: with `--grad-scale G` (a fraction of every bucket
sent) and a time scale F (link rates / F, compute x F), a real link of R bit/s emulates R * F / G,
and measured times divide by F (`emulated_link_bps`).
"""
from __future__ import annotations

import math

from protocol.wire import packet_bytes

from ..ps import CHUNK_BYTES
from .ddp import GRAD_BYTES, Plan

ETHERNET_BYTES = 14
IP_UDP_BYTES = 20 + 8
TCP_FRAME_BYTES = 1514
TCP_PAYLOAD_BYTES = 1448  # MSS on a 1500-byte MTU with TCP timestamps
TCP_ACK_BYTES = 66  # Ethernet, IP, TCP with timestamps: one for every two segments received


def emulated_link_bps(link_mbps: float, grad_scale: float = 1.0, time_scale: float = 1.0) -> float:
    """The link rate of the emulated cluster when real links run at `link_mbps`."""
    return link_mbps * 1e6 * time_scale / grad_scale


def link_bytes(scheme: str, nbytes: int, workers: int, lanes: int, grad_scale: float = 1.0) -> float:
    """Bytes one all-reduce of `nbytes` per worker puts on the scheme's busiest link, one way (ps: with
    the last piece its sums trail by, a piece of the `grad_scale` of the bucket that is sent)."""
    if scheme == "innet":
        frames = math.ceil(nbytes / GRAD_BYTES / lanes)
        return frames * (ETHERNET_BYTES + IP_UDP_BYTES + packet_bytes(lanes))
    tcp = (TCP_FRAME_BYTES + TCP_ACK_BYTES / 2) / TCP_PAYLOAD_BYTES  # a TCP scheme's links carry data one way
    # and as much the other way (every worker sends what it receives): each direction its data and the ACKs
    if scheme == "ring":
        return 2 * (workers - 1) / workers * nbytes * tcp
    if scheme == "ps":
        sent = max(1, round(nbytes / GRAD_BYTES * grad_scale)) * GRAD_BYTES  # as hosts.models.workload sends
        last_piece = sent - CHUNK_BYTES * (math.ceil(sent / CHUNK_BYTES) - 1)
        return workers * (nbytes + last_piece / grad_scale) * tcp
    return workers * nbytes * tcp  # hostagg: the aggregator's link


def iteration(plan: Plan, scheme: str, workers: int, link_bps: float, lanes: int,
              grad_scale: float = 1.0) -> dict[str, float]:
    """The analytic iteration: {"iteration_s", "compute_s", "exposed_comm_s", "comm_s"} (comm_s: the
    all-reduces' total transfer time, overlapped or not)."""
    comm_end = 0.0
    comm = 0.0
    for bucket in plan.buckets:
        transfer = link_bytes(scheme, bucket.nbytes, workers, lanes, grad_scale) * 8 / link_bps
        comm_end = max(plan.forward_s + bucket.ready_s, comm_end) + transfer
        comm += transfer
    total = max(plan.compute_s, comm_end)
    return {"iteration_s": total, "compute_s": plan.compute_s, "exposed_comm_s": total - plan.compute_s,
            "comm_s": comm}
