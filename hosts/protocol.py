"""scapy layer for the AggNet `agg` header (inspection, pcaps and tests; not the data path).

    >>> from hosts.protocol import Agg
    >>> pkt = Ether() / IP(dst="10.0.0.254") / UDP(sport=AGG_PORT, dport=AGG_PORT) / Agg(job_id=1, values=[1] * 32)

Importing this module binds the layer to UDP port AGG_PORT (either direction), the
scapy convention for protocol layers. The field layout mirrors hosts.codec.HEADER_DTYPE
and docs/protocol.md; tests check that both produce the same bytes.
"""
from __future__ import annotations

from scapy.fields import (BitField, ByteField, FieldLenField, FieldListField, IntField, ShortField,
                          SignedIntField, SignedShortField)
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from .codec import AGG_PORT


class Agg(Packet):
    """The agg header plus its int32 lanes; `lanes` is filled in from len(values)."""

    name = "AggNet"
    fields_desc = [
        ShortField("job_id", 0),
        ShortField("slot", 0),
        IntField("seq", 0),
        BitField("pool", 0, 1),
        BitField("result", 0, 1),
        BitField("retx", 0, 1),
        BitField("overflow", 0, 1),
        BitField("flags_reserved", 0, 4),
        FieldLenField("lanes", None, count_of="values", fmt="B"),
        ShortField("workers", 1),
        SignedShortField("scale", 0),
        ShortField("reserved", 0),
        FieldListField("values", [], SignedIntField("", 0), count_from=lambda pkt: pkt.lanes),
    ]

    def mysummary(self) -> str:
        kind = "result" if self.result else "contribution"
        return self.sprintf(f"AggNet job %job_id% slot %slot% pool %pool% seq %seq% {kind}")


bind_layers(UDP, Agg, dport=AGG_PORT)
bind_layers(UDP, Agg, sport=AGG_PORT)
