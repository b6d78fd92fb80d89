"""controller.p4rt with every match kind, a direct counter and controller packet metadata,
against the embedded target's P4Runtime server (tests/data/p4rt/matches.p4)."""
from pathlib import Path

import pytest
from finsy import P4TableAction, P4TableEntry, P4TableMatch
from scapy.layers.l2 import Ether

from controller.p4rt import EntityError, SwitchConnection, entry_key
from p4target.frontend import load_program
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer

PROGRAM = Path(__file__).parent / "data" / "p4rt" / "matches.p4"
CLASSIFY = "MyIngress.classify"


@pytest.fixture
def conn():
    server = RuntimeServer(device_id=3, address="127.0.0.1:0", cpu_port=255)
    port = server.start()
    c = SwitchConnection(f"127.0.0.1:{port}", device_id=3, name="s3")
    c.set_pipeline(build_p4info(load_program(str(PROGRAM))), PROGRAM.read_bytes())
    c.server = server
    yield c
    c.close()
    server.stop()


def classify(match: dict, port: int, priority: int = 1) -> P4TableEntry:
    return P4TableEntry(CLASSIFY, match=P4TableMatch(match), action=P4TableAction("MyIngress.to_port", port=port),
                        priority=priority)


def frame(dst: str = "00:00:00:00:00:0a", ethertype: int = 0x88B5) -> bytes:
    return bytes(Ether(dst=dst, src="00:00:00:00:00:01", type=ethertype) / (b"x" * 50))


def test_ternary_optional_range_entries_round_trip_and_count_hits(conn):
    specific = classify({"hdr.ethernet.dstAddr": ("00:00:00:00:00:0a", "ff:ff:ff:ff:ff:ff"),
                         "hdr.ethernet.etherType": 0x88B5, "standard_metadata.ingress_port": (1, 4)}, 7, priority=10)
    catch_all = classify({"hdr.ethernet.dstAddr": (0, 0), "hdr.ethernet.etherType": None,
                          "standard_metadata.ingress_port": (0, 511)}, 8, priority=1)
    assert conn.canonical(specific).match == {"hdr.ethernet.dstAddr": (0x0A, 0xFFFFFFFFFFFF),
                                              "hdr.ethernet.etherType": 0x88B5, "standard_metadata.ingress_port": (1, 4)}
    assert conn.canonical(catch_all).match is None  # every field a don't-care: all omitted
    conn.write([conn.insert(specific), conn.insert(catch_all)])
    back = sorted(conn.read([P4TableEntry(CLASSIFY)]), key=lambda te: te.priority)
    assert [entry_key(te) for te in back] == [entry_key(conn.canonical(catch_all)), entry_key(conn.canonical(specific))]
    assert back == [conn.canonical(catch_all), conn.canonical(specific)]

    pipeline = conn.server.pipeline
    assert [port for port, _ in pipeline.process(2, frame())] == [7]
    assert [port for port, _ in pipeline.process(5, frame())] == [8]  # outside the range
    assert [port for port, _ in pipeline.process(2, frame(ethertype=0x0800))] == [8]
    assert conn.read_direct_counter(specific) == (1, len(frame()))
    assert conn.read_direct_counter(catch_all)[0] == 2


def test_bad_match_shapes_are_rejected_before_sending(conn):
    with pytest.raises(EntityError, match=r"range low 9 is above high 4"):
        conn.encode(classify({"standard_metadata.ingress_port": (9, 4)}, 1))
    with pytest.raises(EntityError, match=r"^s3: table MyIngress.classify hdr.ethernet.dstAddr: invalid TERNARY value"):
        conn.encode(classify({"hdr.ethernet.dstAddr": (1, 2, 3)}, 1))
    with pytest.raises(EntityError, match=r"^s3: table MyIngress.classify has no action 'NoAction' "
                                          r"\(actions: MyIngress.to_port, MyIngress.drop\)$"):
        conn.encode(P4TableEntry(CLASSIFY, action=P4TableAction("NoAction")))


def test_ternary_values_are_masked_and_a_bare_value_is_an_exact_ternary(conn):
    assert conn.canonical(classify({"hdr.ethernet.dstAddr": (0x0A0B, 0xFF00)}, 1)).match == {
        "hdr.ethernet.dstAddr": (0x0A00, 0xFF00)}
    assert conn.canonical(classify({"hdr.ethernet.dstAddr": "00:00:00:00:00:0a"}, 1)).match == {
        "hdr.ethernet.dstAddr": (0x0A, 0xFFFFFFFFFFFF)}


def test_packet_out_metadata_and_packet_in_metadata(conn):
    conn.packet_out(frame(), {"egress_port": 255})
    packet_in = conn.packet_in(timeout=5)
    assert packet_in is not None and packet_in.payload == frame()
    assert packet_in.metadata == {"ingress_port": 255, "_pad": 0}  # it entered on the CPU port
    with pytest.raises(EntityError, match="packet_out has no field 'port'"):
        conn.packet_out(frame(), {"port": 1})
    with pytest.raises(EntityError, match="packet_out needs egress_port"):
        conn.packet_out(frame(), {})
