"""Bounds of a switch left running: the cap on its program's state, its log and capture sizes, and
what any one client may make it hold (docs/targets.md, "Limits").

The state cap is checked before any of the state exists.

A program declares its registers, counters, meters and table sizes; a typo such as
`register<bit<32>>(1 << 30)` would otherwise make the switch allocate gigabytes (or die
trying) when the pipeline loads. `check_state_cap` adds up what each object may hold at
most, in bytes per cell as the engines store them, and refuses the program with one line
naming the largest object and the cap (`aggnet switch --max-state-mb`).
"""
from __future__ import annotations

from p4target.state import ProgramSchema, ResourceExhausted

DEFAULT_STATE_CAP_MB = 1024
DEFAULT_LOG_MAX_MB = 64     # the switch log and its P4Runtime request log rotate there (one old file kept)
DEFAULT_PCAP_MAX_MB = 256   # per pcap file: a capture left on stays bounded
REGISTER_CELL_BYTES = 8    # a 64-bit slot per cell (wider registers take their width)
COUNTER_CELL_BYTES = 16    # packets and bytes
METER_CELL_BYTES = 64      # two token buckets and their configuration
TABLE_ENTRY_BYTES = 256    # an entry's key, action data, index slot and bookkeeping, at most its key/params more
PROFILE_MEMBER_BYTES = 128

# What clients may cost the switch. A request's cost grows with its size, up to these caps; past them
# the client gets a one-line error (or its surplus messages are dropped and counted), never an
# unbounded wait or allocation.
MAX_STREAMS = 200             # StreamChannels open at once; the next is refused: RESOURCE_EXHAUSTED (as BMv2)
MAX_CALLS = 64                # other P4Runtime calls in progress at once; gRPC refuses more (RESOURCE_EXHAUSTED)
GRPC_MESSAGE_BYTES = 4 << 20  # one P4Runtime request, as gRPC's default (a Write of ~100,000 table entries)
STREAM_QUEUE = 1024           # messages waiting for one stream's client; PacketIns and the like past it are dropped
STREAM_QUEUE_BYTES = 1 << 20  # ... and their bytes (whichever bound comes first)
PACKET_OUT_QUEUE = 1024       # PacketOuts waiting for the packet loop; more are dropped (counted, a StreamError)
PACKET_OUT_QUEUE_BYTES = 4 << 20  # ... and their bytes
READ_BATCH = 1000             # entities per ReadResponse: a Read holds one batch, however many it answers
WRITE_RUN = 256              # a Write's updates of one table handed to the state (one native call) at once
THRIFT_VALUES = 1 << 16       # values (fields, elements) in one Thrift call, the decoded form's size
THRIFT_BYTES = 16 << 20       # bytes of one Thrift call
LINE_BYTES = 64 << 10         # one side-channel command line
SIDE_CHANNEL_CONNECTIONS = 64  # Thrift and line-protocol connections open at once; more are closed at once


def state_footprint(schema: ProgramSchema) -> dict[str, int]:
    """Bytes each stateful object of the program may take at most, by "kind name"."""
    out: dict[str, int] = {}
    for r in schema.registers.values():
        out[f"register {r.name}"] = r.size * max(REGISTER_CELL_BYTES, (r.bitwidth + 7) // 8)
    for c in schema.counters.values():
        out[f"counter {c.name}"] = c.size * COUNTER_CELL_BYTES
    for m in schema.meters.values():
        out[f"meter {m.name}"] = m.size * METER_CELL_BYTES
    for t in schema.tables.values():
        key_bytes = sum((k.bitwidth + 7) // 8 for k in t.keys)
        params = max((sum((w + 7) // 8 for _, w in schema.actions[a].params) for a in t.actions
                      if a in schema.actions), default=0)
        direct = (COUNTER_CELL_BYTES if t.direct_counter else 0) + (METER_CELL_BYTES if t.direct_meter else 0)
        out[f"table {t.name}"] = t.size * (TABLE_ENTRY_BYTES + 2 * key_bytes + params + direct)
    for p in schema.action_profiles.values():
        out[f"action profile {p.name}"] = p.size * PROFILE_MEMBER_BYTES
    return out


def check_state_cap(schema: ProgramSchema, cap_mb: int) -> None:
    """ResourceExhausted (one line) when the program's state may exceed `cap_mb` MiB in all."""
    footprint = state_footprint(schema)
    total = sum(footprint.values())
    if total <= cap_mb << 20:
        return
    largest = max(footprint, key=footprint.__getitem__)
    raise ResourceExhausted(f"{largest} needs {_mib(footprint[largest])} MiB, the program's state "
                            f"{_mib(total)} MiB in all: over the switch's state cap of {cap_mb} MiB "
                            f"(aggnet switch --max-state-mb)")


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.0f}" if nbytes >= 1 << 20 else f"{nbytes / (1 << 20):.2f}"
