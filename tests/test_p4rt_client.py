"""controller.p4rt against the embedded target's real P4Runtime gRPC server (in-process,
127.0.0.1, free port) running p4src/aggnet.p4."""
import pytest
from finsy.proto import p4r
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.installer import load_program
from controller.p4rt import (
    EntityError,
    P4RuntimeError,
    SwitchConnection,
    encode_value,
    entry_action,
    entry_key,
)
from p4target.runtime import RuntimeServer

LPM = "AggIngress.ipv4_lpm"
FORWARD = "AggIngress.ipv4_forward"
CPU_PORT = 255


@pytest.fixture(scope="module")
def program():
    return load_program("p4src/aggnet.p4")


@pytest.fixture
def server():
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", cpu_port=CPU_PORT)
    srv.port = srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def conn(server, program):
    c = SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, name="s1")
    c.set_pipeline(program.p4info, program.device_config, program.cookie)
    yield c
    c.close()


def route(c, prefix, plen, mac, port):
    return c.table_entry(LPM, {"hdr.ipv4.dstAddr": (prefix, plen)}, FORWARD, {"dstAddr": mac, "port": port})


def test_values_are_encoded_canonically():
    assert encode_value(0, 9, "x") == b"\x00"
    assert encode_value(300, 9, "x") == b"\x01\x2c"
    assert encode_value("10.0.0.1", 32, "x") == b"\x0a\x00\x00\x01"
    assert encode_value("00:00:00:00:00:01", 48, "x") == b"\x01"
    assert encode_value(b"\x00\x00\x05", 16, "x") == b"\x05"
    with pytest.raises(EntityError, match="port: value 512 does not fit in 9 bits"):
        encode_value(512, 9, "port")
    with pytest.raises(EntityError, match="cannot read 'ten'"):
        encode_value("ten", 32, "ip")


def test_pipeline_cookie_and_entry_round_trip(conn, program):
    assert conn.pipeline_cookie() == program.cookie
    sent = route(conn, "10.0.1.77", 24, "00:00:00:00:00:07", 3)  # host bits are masked off
    assert sent.match[0].lpm.value == b"\x0a\x00\x01\x00"
    conn.write([conn.insert(sent)])
    (back,) = conn.read([conn.table_entry(LPM)])
    assert entry_key(back.table_entry) == entry_key(sent)
    assert entry_action(back.table_entry) == entry_action(sent)
    assert back.table_entry.action.action.params[1].value == b"\x03"


def test_failed_updates_are_reported_one_line_each_and_the_rest_applies(conn):
    first = route(conn, "10.0.0.1", 32, "00:00:00:00:00:01", 1)
    conn.write([conn.insert(first)])
    batch = [conn.insert(route(conn, "10.0.0.2", 32, "00:00:00:00:00:02", 2)), conn.insert(first),
             conn.delete(route(conn, "10.0.0.9", 32, "00:00:00:00:00:09", 9))]
    with pytest.raises(P4RuntimeError) as exc:
        conn.write(batch)
    lines = str(exc.value).splitlines()
    assert lines[0].startswith("s1: Write failed: UNKNOWN")
    assert lines[1].startswith("  update 1 (INSERT table AggIngress.ipv4_lpm): ALREADY_EXISTS")
    assert lines[2].startswith("  update 2 (DELETE table AggIngress.ipv4_lpm): NOT_FOUND")
    assert len(lines) == 3
    assert len(conn.read([conn.table_entry(LPM)])) == 2  # update 0 went in


def test_bad_names_and_parameters_are_one_line_errors(conn):
    with pytest.raises(EntityError, match=r"^s1: P4Info has no table 'nope'$"):
        conn.table_entry("nope")
    with pytest.raises(EntityError, match="has no match field 'hdr.ipv4.srcAddr'"):
        conn.table_entry(LPM, {"hdr.ipv4.srcAddr": ("1.2.3.4", 32)})
    with pytest.raises(EntityError, match="parameters: missing port"):
        conn.table_entry(LPM, {"hdr.ipv4.dstAddr": ("1.2.3.4", 32)}, FORWARD, {"dstAddr": 1})
    with pytest.raises(EntityError, match="expected \\(value, prefix_len\\)"):
        conn.table_entry(LPM, {"hdr.ipv4.dstAddr": "1.2.3.4"})


def test_ternary_dont_care_is_omitted_and_exact_fields_kept(conn):
    te = conn.table_entry("AggIngress.agg_child", {"hdr.agg.job_id": 3, "standard_metadata.ingress_port": 2,
                                                   "hdr.ipv4.srcAddr": (0, 0)},
                          "AggIngress.set_child", {"index": 1}, priority=1)
    assert [fm.WhichOneof("field_match_type") for fm in te.match] == ["exact", "exact"]
    conn.write([conn.insert(te)])
    (back,) = conn.read([conn.table_entry("AggIngress.agg_child")])
    assert entry_key(back.table_entry) == entry_key(te)


def test_multicast_group_and_clone_session(conn):
    conn.write([conn.insert(conn.multicast_group(7, [(1, 0), (3, 0)])),
                conn.insert(conn.clone_session(5, [(4, 1)]))])
    (group,) = conn.read([conn.multicast_group(0)])
    entry = group.packet_replication_engine_entry.multicast_group_entry
    assert entry.multicast_group_id == 7
    assert [(int.from_bytes(r.port, "big"), r.instance) for r in entry.replicas] == [(1, 0), (3, 0)]
    (clone,) = conn.read([conn.clone_session(0)])
    assert clone.packet_replication_engine_entry.clone_session_entry.session_id == 5


def test_registers_write_and_read_by_name(conn):
    conn.register_write("AggIngress.agg_bitmap", {3: 7, 4: 0xFFFFFFFF})
    assert conn.register_read("AggIngress.agg_bitmap", 3) == {3: 7}
    cells = conn.register_read("AggIngress.agg_count")
    assert len(cells) == 2048 and set(cells.values()) == {0}
    with pytest.raises(EntityError, match=r"agg_count\[1\]: value 256 does not fit in 8 bits"):
        conn.register_write("AggIngress.agg_count", {1: 256})


def test_packet_out_is_forwarded_back_as_packet_in_and_counted(conn):
    conn.write([conn.insert(route(conn, "10.0.0.9", 32, "00:00:00:00:00:09", CPU_PORT))])
    frame = bytes(Ether(src="00:00:00:00:00:01", dst="ff:ff:ff:ff:ff:ff") /
                  IP(src="10.0.0.1", dst="10.0.0.9", ttl=9) / UDP(sport=1, dport=2) / b"payload")
    conn.packet_out(frame)
    packet_in = conn.packet_in(timeout=5)
    assert packet_in is not None
    back = Ether(packet_in.payload)
    assert (back.dst, back[IP].ttl, bytes(back[UDP].payload)) == ("00:00:00:00:00:09", 8, b"payload")
    assert conn.read_counter("AggIngress.port_rx", CPU_PORT)[CPU_PORT][0] == 1
    assert conn.read_counter("AggEgress.port_tx", CPU_PORT)[CPU_PORT] == (1, len(frame))


def test_only_the_highest_election_id_is_primary(server, conn):
    with pytest.raises(P4RuntimeError, match=r"^s1b: not primary \(our election id 0, primary's 1\)"):
        SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, election_id=(0, 0), name="s1b")
    with SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, election_id=(0, 2), name="s1c") as newer:
        newer.use_p4info(conn.index.p4info)
        newer.write([newer.insert(route(newer, "10.0.0.3", 32, "00:00:00:00:00:03", 3))])
        with pytest.raises(P4RuntimeError, match="PERMISSION_DENIED"):
            conn.write([conn.insert(route(conn, "10.0.0.4", 32, "00:00:00:00:00:04", 4))])


def test_read_only_connection_reads_by_name_and_never_writes(server, conn):
    conn.write([conn.insert(route(conn, "10.0.0.5", 32, "00:00:00:00:00:05", 5))])
    conn.register_write("AggIngress.agg_bitmap", {2: 9})
    with SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, name="obs", read_only=True) as observer:
        # the P4Info came from the switch: names resolve as on the primary
        assert observer.index.p4info == conn.index.p4info
        assert observer.register_read("AggIngress.agg_bitmap", 2) == {2: 9}
        (entry,) = observer.read([observer.table_entry(LPM)])
        assert entry_key(entry.table_entry) == entry_key(route(conn, "10.0.0.5", 32, "00:00:00:00:00:05", 5))
        assert observer.read_counter("AggIngress.port_rx", 7) == conn.read_counter("AggIngress.port_rx", 7)
        refused = [lambda: observer.write([observer.insert(route(observer, "10.0.0.6", 32, 6, 6))]),
                   lambda: observer.register_write("AggIngress.agg_bitmap", {2: 1}),
                   lambda: observer.set_pipeline(conn.index.p4info, b""),
                   lambda: observer.packet_out(b"frame"),
                   lambda: observer.set_queue_rate(100)]
        for call in refused:
            with pytest.raises(P4RuntimeError, match=r"^obs: \w+ needs a primary connection; this one is read-only$"):
                call()
        assert observer.register_read("AggIngress.agg_bitmap", 2) == {2: 9}
    conn.write([conn.insert(route(conn, "10.0.0.7", 32, "00:00:00:00:00:07", 7))])  # still primary
    assert len(conn.read([conn.table_entry(LPM)])) == 2


def test_read_only_connection_needs_a_pipeline_unless_given_a_p4info(server, program):
    with pytest.raises(P4RuntimeError, match=r"^obs: GetForwardingPipelineConfig failed: FAILED_PRECONDITION"):
        SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, name="obs", read_only=True)
    with SwitchConnection(f"127.0.0.1:{server.port}", 1, name="obs", p4info=program.p4info, read_only=True) as obs:
        with pytest.raises(P4RuntimeError, match=r"^obs: Read failed: FAILED_PRECONDITION"):
            obs.read_counter("AggIngress.port_rx")


def test_wrong_device_id_and_no_server_fail_clearly(server):
    with pytest.raises(P4RuntimeError, match="s9: stream: "):
        SwitchConnection(f"127.0.0.1:{server.port}", device_id=9, name="s9")
    with pytest.raises(P4RuntimeError, match="s0: (stream: UNAVAILABLE|no arbitration answer)"):
        SwitchConnection("127.0.0.1:1", device_id=1, name="s0", arbitration_timeout=3)


def test_pipeline_is_required_before_entities(server):
    with SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, name="s1") as c:
        assert c.pipeline_cookie() is None
        with pytest.raises(EntityError, match="no P4Info yet"):
            c.table_entry(LPM)
        with pytest.raises(P4RuntimeError, match="SetForwardingPipelineConfig failed: INVALID_ARGUMENT"):
            c.set_pipeline(p4r.ForwardingPipelineConfig().p4info, b"this is not P4")


def test_a_big_failed_batch_lists_ten_failures_and_counts_the_rest(conn):
    batch = [conn.insert(route(conn, i << 8, 24, i, 1)) for i in range(1, 1024 + 16)]  # the table holds 1024
    with pytest.raises(P4RuntimeError) as exc:
        conn.write(batch)
    lines = str(exc.value).splitlines()
    assert len(lines) == 1 + 10 + 1
    assert lines[1].startswith("  update 1024 (INSERT table AggIngress.ipv4_lpm): RESOURCE_EXHAUSTED")
    assert lines[-1] == "  ... and 5 more failed updates"
    assert len(conn.read([conn.table_entry(LPM)])) == 1024
