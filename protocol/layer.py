"""scapy layer for the `agg` header and its lanes (inspection, pcaps, tests; not the data path).

    >>> from protocol.layer import Agg
    >>> pkt = Ether() / IP(dst="10.0.0.254") / UDP(sport=AGG_PORT, dport=AGG_PORT) / Agg(job_id=1, values=[1] * 32)

The fields come from protocol.wire.HEADER_FIELDS; `lanes` is filled in from len(values).
Importing this module binds the layer to UDP port AGG_PORT (either direction), the scapy
convention for protocol layers.
"""
from __future__ import annotations

from scapy.fields import BitField, Field, FieldLenField, FieldListField, SignedIntField
from scapy.layers.inet import UDP
from scapy.packet import Packet, bind_layers

from .wire import AGG_PORT, HEADER_FIELDS

_FORMATS = {8: "B", 16: "H", 32: "I"}


def _fields_desc() -> list:
    out: list = []
    for f in HEADER_FIELDS:
        if f.flags:
            out += [BitField(name, 0, 1) for name in f.flags]
            out.append(BitField(f"{f.name}_reserved", 0, f.bits - len(f.flags)))
        elif f.name == "lanes":
            out.append(FieldLenField("lanes", None, count_of="values", fmt=_FORMATS[f.bits]))
        else:
            fmt = _FORMATS[f.bits].lower() if f.signed else _FORMATS[f.bits]
            out.append(Field(f.name, f.default, fmt="!" + fmt))
    out.append(FieldListField("values", [], SignedIntField("", 0), count_from=lambda pkt: pkt.lanes))
    return out


class Agg(Packet):
    """The agg header plus its int32 lanes."""

    name = "AggNet"
    fields_desc = _fields_desc()

    def mysummary(self) -> str:
        kind = "result" if self.result else "contribution"
        return self.sprintf(f"AggNet job %job_id% slot %slot% pool %pool% seq %seq% {kind}")


bind_layers(UDP, Agg, dport=AGG_PORT)
bind_layers(UDP, Agg, sport=AGG_PORT)
