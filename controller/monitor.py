"""Read what the switches counted: per-job aggregation counters, per-port packets/bytes, queues.

Counter names are aggnet.p4's (docs/protocol.md, "Counters"); reads go over P4Runtime, queue
statistics over the switch's side channel (P4Runtime has no message for them).
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from finsy import P4CounterEntry

from controller.p4rt import SwitchConnection
from controller.switch_cli import TcpSideChannel
from controller.topology import Topology

JOB_COUNTERS = {
    "received": "AggIngress.agg_received",
    "aggregated": "AggIngress.agg_aggregated",
    "completed": "AggIngress.agg_completed",
    "duplicates": "AggIngress.agg_duplicates",
    "retx_answered": "AggIngress.agg_retx_answered",
    "overflows": "AggIngress.agg_overflows",
    "spilled": "AggIngress.agg_spilled",
}
PORT_RX = "AggIngress.port_rx"
PORT_TX = "AggEgress.port_tx"
ECN_MARKED = "AggEgress.ecn_marked"


def job_counters(conn: SwitchConnection, job_id: int) -> dict[str, int]:
    """Packet counts of one job on one switch, by short name (received, aggregated, ...)."""
    return {short: conn.read_counter(name, job_id)[job_id][0] for short, name in JOB_COUNTERS.items()}


def port_counters(conn: SwitchConnection, ports: Iterable[int]) -> dict[int, dict[str, int]]:
    """rx/tx packets and bytes of the given ports.

    One Read for all of them: the adaptation loop samples every few seconds while the switches
    forward on the same CPUs, and one RPC per cell made its sampling cost show in step times."""
    ports = list(ports)
    cells = conn.read([P4CounterEntry(name, index=port) for name in (PORT_RX, PORT_TX) for port in ports])
    out: dict[int, dict[str, int]] = {port: {} for port in ports}
    for cell in cells:
        kind = "rx" if cell.counter_id == PORT_RX else "tx"
        out[cell.index].update({f"{kind}_packets": cell.packet_count, f"{kind}_bytes": cell.byte_count})
    return out


def engine(conn: SwitchConnection) -> str | None:
    """Which engine runs the embedded switch's program, "native" or "python" (side channel); None on
    BMv2 (its own engine, named in results' versions) or without a side channel."""
    if not isinstance(conn.side_channel, TcpSideChannel):
        return None
    return conn.side_command("engine")


def queue_stats(conn: SwitchConnection) -> dict[str, Any] | None:
    """The switch's queue settings, depths and drops (side channel JSON).

    None without the embedded traffic manager: with no side channel, or on BMv2, whose CLI has
    no queue statistics (the adaptation loop then goes by utilization alone)."""
    if not isinstance(conn.side_channel, TcpSideChannel):
        return None
    return json.loads(conn.side_command("queue_stats"))


def snapshot(topo: Topology, conns: Mapping[str, SwitchConnection], job_ids: Iterable[int]) -> dict[str, Any]:
    """Every switch's port counters (its topology ports), job counters and queue stats, for results JSON."""
    job_ids = list(job_ids)
    out: dict[str, Any] = {}
    for name in topo.switches:
        conn = conns[name]
        ports = sorted(link.port_on(name) for link in topo.links_of(name))
        out[name] = {"ports": port_counters(conn, ports),
                     "jobs": {job_id: job_counters(conn, job_id) for job_id in job_ids}}
        queues = queue_stats(conn)
        if queues is not None:
            out[name]["queues"] = queues
    return out
