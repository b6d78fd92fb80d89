"""IPv4 lpm forwarding end to end: parser, checksum verify/update, table, deparser, stats."""
from pathlib import Path

import pytest
from scapy.all import ARP, IP, UDP, Ether

from p4target import state as st
from p4target.frontend import load_program
from p4target.native.pipeline import ENGINES, make_pipeline
from p4target.pipeline import Pipeline

DATA = Path(__file__).parent / "data" / "interp"
TABLE = "MyIngress.ipv4_lpm"


def route(prefix: int, plen: int, mac: int, port: int) -> st.TableEntry:
    return st.TableEntry({"hdr.ipv4.dstAddr": st.Lpm(prefix, plen)}, "MyIngress.ipv4_forward",
                         {"dstAddr": mac, "port": port})


def routed(engine: str):
    p = make_pipeline(load_program(str(DATA / "basic.p4")), engine)
    p.state.insert_entry(TABLE, route(0x0A000000, 8, 0x0A0A0A0A0A0A, 2))
    p.state.insert_entry(TABLE, route(0x0A000100, 24, 0x0B0B0B0B0B0B, 3))
    return p


@pytest.fixture(params=ENGINES)
def pipeline(request):
    return routed(request.param)


def packet(dst: str, ttl: int = 64, payload: bytes = b"payload") -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09") / IP(src="10.9.9.9", dst=dst, ttl=ttl)
                 / UDP(sport=1, dport=2) / payload)


def test_longest_prefix_forwarding_rewrites_and_fixes_checksum(pipeline):
    out = pipeline.process(1, packet("10.0.1.7"))
    assert [port for port, _ in out] == [3]
    got = Ether(out[0][1])
    assert got.dst == "0b:0b:0b:0b:0b:0b" and got.src == "00:00:00:00:00:01"
    assert got[IP].ttl == 63
    sent_chksum = got[IP].chksum
    del got[IP].chksum
    assert IP(bytes(got[IP])).chksum == sent_chksum  # scapy recomputes: the switch's checksum is right
    assert bytes(got[UDP].payload) == b"payload"
    out = pipeline.process(1, packet("10.200.0.1"))
    assert [port for port, _ in out] == [2]


def test_miss_bad_checksum_and_non_ipv4_are_dropped(pipeline):
    assert pipeline.process(1, packet("192.168.0.1")) == []  # default action drop()
    bad = bytearray(packet("10.0.1.7"))
    bad[24] ^= 0xFF  # corrupt the IPv4 checksum (bytes 24-25 of the frame)
    assert pipeline.process(1, bytes(bad)) == []
    assert pipeline.process(1, bytes(Ether() / ARP())) == []


def test_default_action_can_be_changed(pipeline):
    pipeline.state.set_default(TABLE, "MyIngress.ipv4_forward", {"dstAddr": 1, "port": 7})
    out = pipeline.process(1, packet("192.168.0.1"))
    assert [port for port, _ in out] == [7]


def test_port_stats_and_halves():
    """The Python engine's halves (the native engine runs both inside its own packet loop)."""
    pipeline = routed("python")
    assert isinstance(pipeline, Pipeline)
    data = packet("10.0.1.7")
    items = pipeline.ingress(4, data)
    assert [i.egress_port for i in items] == [3]
    out = pipeline.egress(items[0], enq_qdepth=5, deq_qdepth=2)
    assert out[0][0] == 3
    stats = pipeline.state.port_stats
    assert (stats[4].rx_packets, stats[4].rx_bytes) == (1, len(data))
    assert (stats[3].tx_packets, stats[3].tx_bytes) == (1, len(out[0][1]))


def test_truncated_packet_reaches_ingress_with_parser_error_and_is_dropped(pipeline):
    # 14 bytes of Ethernet + 10 of IPv4: extract(ipv4) fails with PacketTooShort, ipv4 stays
    # invalid, so the program's else branch drops it.
    assert pipeline.process(1, packet("10.0.1.7")[:24]) == []
