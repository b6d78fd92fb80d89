"""controller.p4rt against the embedded target's real P4Runtime gRPC server (in-process,
127.0.0.1, free port) running p4src/aggnet.p4."""
import threading

import pytest
from finsy import (
    P4CloneSessionEntry,
    P4CounterData,
    P4CounterEntry,
    P4MulticastGroupEntry,
    P4RegisterEntry,
    P4TableAction,
    P4TableEntry,
    P4TableMatch,
)
from finsy.p4entity import P4Replica
from finsy.proto import p4i, p4r
from google.protobuf import text_format
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from controller.installer import load_program
from controller.p4rt import (
    EntityError,
    P4RuntimeError,
    SwitchConnection,
    diff_entities,
    entry_key,
    load_schema,
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


def route(prefix, plen, mac, port):
    return P4TableEntry(LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": (prefix, plen)}),
                        action=P4TableAction(FORWARD, dstAddr=mac, port=port))


def test_values_become_typed_canonical_values(conn):
    assert conn.canonical(route("10.0.0.1", 32, "00:00:00:00:00:01", 150)) == P4TableEntry(
        LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": (0x0A000001, 32)}),
        action=P4TableAction(FORWARD, dstAddr=1, port=150))
    with pytest.raises(EntityError, match=r"^s1: action AggIngress.ipv4_forward port: invalid value for bitwidth 9: 512$"):
        conn.encode(route("10.0.0.1", 32, 1, 512))
    with pytest.raises(EntityError, match=r"^s1: table AggIngress.ipv4_lpm hdr.ipv4.dstAddr: .*'ten'"):
        conn.encode(route("ten", 32, 1, 1))


def test_pipeline_cookie_and_entry_round_trip(conn, program):
    assert conn.pipeline_cookie() == program.cookie
    sent = route("10.0.1.77", 24, "00:00:00:00:00:07", 3)  # host bits are masked off
    assert conn.canonical(sent).match["hdr.ipv4.dstAddr"] == (0x0A000100, 24)
    conn.write([conn.insert(sent)])
    (back,) = conn.read([P4TableEntry(LPM)])
    assert entry_key(back) == entry_key(conn.canonical(sent))
    assert back == conn.canonical(sent)
    assert back.action.args["port"] == 3


def test_failed_updates_are_reported_one_line_each_and_the_rest_applies(conn):
    first = route("10.0.0.1", 32, "00:00:00:00:00:01", 1)
    conn.write([conn.insert(first)])
    batch = [conn.insert(route("10.0.0.2", 32, "00:00:00:00:00:02", 2)), conn.insert(first),
             conn.delete(route("10.0.0.9", 32, "00:00:00:00:00:09", 9))]
    with pytest.raises(P4RuntimeError) as exc:
        conn.write(batch)
    lines = str(exc.value).splitlines()
    assert lines[0].startswith("s1: Write failed: UNKNOWN")
    assert lines[1].startswith("  update 1 (INSERT table AggIngress.ipv4_lpm): ALREADY_EXISTS")
    assert lines[2].startswith("  update 2 (DELETE table AggIngress.ipv4_lpm): NOT_FOUND")
    assert len(lines) == 3
    assert len(conn.read([P4TableEntry(LPM)])) == 2  # update 0 went in


def test_bad_names_and_parameters_are_one_line_errors(conn):
    with pytest.raises(EntityError, match=r"^s1: P4Info has no table 'nope'$"):
        conn.encode(P4TableEntry("nope"))
    with pytest.raises(EntityError, match="has no match field 'hdr.ipv4.srcAddr'"):
        conn.encode(P4TableEntry(LPM, match=P4TableMatch({"hdr.ipv4.srcAddr": ("1.2.3.4", 32)})))
    with pytest.raises(EntityError, match="parameters: missing port"):
        conn.encode(P4TableEntry(LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": ("1.2.3.4", 32)}),
                                 action=P4TableAction(FORWARD, dstAddr=1)))
    with pytest.raises(EntityError, match=r"^s1: table AggIngress.ipv4_lpm hdr.ipv4.dstAddr: invalid LPM value"):
        conn.encode(P4TableEntry(LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": ("1.2.3.4", 33)})))
    with pytest.raises(EntityError, match=r"^s1: P4Info has no counter 'nope'$"):
        conn.read_counter("nope")


def test_ternary_dont_care_is_omitted_and_exact_fields_kept(conn):
    te = P4TableEntry("AggIngress.agg_child", match=P4TableMatch({"hdr.agg.job_id": 3, "standard_metadata.ingress_port": 2,
                                                                  "hdr.ipv4.srcAddr": (0, 0)}),
                      action=P4TableAction("AggIngress.set_child", index=1), priority=1)
    assert list(conn.canonical(te).match) == ["hdr.agg.job_id", "standard_metadata.ingress_port"]
    conn.write([conn.insert(te)])
    (back,) = conn.read([P4TableEntry("AggIngress.agg_child")])
    assert entry_key(back) == entry_key(conn.canonical(te))


def test_multicast_group_and_clone_session(conn):
    conn.write([conn.insert(P4MulticastGroupEntry(7, replicas=[(3, 0), (1, 0)])),
                conn.insert(P4CloneSessionEntry(5, replicas=[(4, 1)]))])
    (group,) = conn.read([P4MulticastGroupEntry()])
    assert group.multicast_group_id == 7
    assert group.replicas == (1, 3)  # sorted; instance 0 reads as the bare port
    (clone,) = conn.read([P4CloneSessionEntry()])
    assert clone.session_id == 5 and clone.replicas == (P4Replica(4, instance=1),)


def test_registers_write_and_read_by_name(conn):
    conn.register_write("AggIngress.agg_bitmap", {3: 7, 4: 0xFFFFFFFF})
    assert conn.register_read("AggIngress.agg_bitmap", 3) == {3: 7}
    cells = conn.register_read("AggIngress.agg_count")
    assert len(cells) == 2048 and set(cells.values()) == {0}
    with pytest.raises(EntityError, match=r"^s1: register AggIngress.agg_count\[1\]: invalid value for bitwidth 8: 256$"):
        conn.register_write("AggIngress.agg_count", {1: 256})


def test_packet_out_is_forwarded_back_as_packet_in_and_counted(conn):
    conn.write([conn.insert(route("10.0.0.9", 32, "00:00:00:00:00:09", CPU_PORT))])
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
        newer.use_p4info(conn.schema.p4info)
        newer.write([newer.insert(route("10.0.0.3", 32, "00:00:00:00:00:03", 3))])
        with pytest.raises(P4RuntimeError, match="PERMISSION_DENIED"):
            conn.write([conn.insert(route("10.0.0.4", 32, "00:00:00:00:00:04", 4))])


def test_a_restarted_controller_waits_for_the_switch_to_let_go_of_its_election_id(server, conn, program):
    """The switch may not yet have processed the close of the previous client's stream (a restarted
    controller with the same election id): the new client asks again until the id is free."""
    address = f"127.0.0.1:{server.port}"
    closing = threading.Timer(0.5, conn.close)  # the old controller's stream ends only now
    closing.start()
    try:
        again = SwitchConnection(address, device_id=1, name="s1", arbitration_timeout=10, p4info=program.p4info)
    finally:
        closing.join()
    try:
        assert again.alive and not conn.alive
        again.write([again.insert(route("10.0.9.0", 24, "00:00:00:00:00:09", 9))])  # it is primary
        with pytest.raises(P4RuntimeError, match=r"^s1: stream: .*already in use"):  # a live holder: refused
            SwitchConnection(address, device_id=1, name="s1", arbitration_timeout=1)
        assert again.alive
    finally:
        again.close()


def test_read_only_connection_reads_by_name_and_never_writes(server, conn):
    conn.write([conn.insert(route("10.0.0.5", 32, "00:00:00:00:00:05", 5))])
    conn.register_write("AggIngress.agg_bitmap", {2: 9})
    with SwitchConnection(f"127.0.0.1:{server.port}", device_id=1, name="obs", read_only=True) as observer:
        # the P4Info came from the switch: names resolve as on the primary
        assert observer.schema.p4info == conn.schema.p4info
        assert observer.register_read("AggIngress.agg_bitmap", 2) == {2: 9}
        (entry,) = observer.read([P4TableEntry(LPM)])
        assert entry_key(entry) == entry_key(conn.canonical(route("10.0.0.5", 32, "00:00:00:00:00:05", 5)))
        assert observer.read_counter("AggIngress.port_rx", 7) == conn.read_counter("AggIngress.port_rx", 7)
        refused = [lambda: observer.write([observer.insert(route("10.0.0.6", 32, 6, 6))]),
                   lambda: observer.register_write("AggIngress.agg_bitmap", {2: 1}),
                   lambda: observer.set_pipeline(conn.schema.p4info, b""),
                   lambda: observer.packet_out(b"frame"),
                   lambda: observer.set_queue_rate(100)]
        for call in refused:
            with pytest.raises(P4RuntimeError, match=r"^obs: \w+ needs a primary connection; this one is read-only$"):
                call()
        assert observer.register_read("AggIngress.agg_bitmap", 2) == {2: 9}
    conn.write([conn.insert(route("10.0.0.7", 32, "00:00:00:00:00:07", 7))])  # still primary
    assert len(conn.read([P4TableEntry(LPM)])) == 2


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
            c.encode(P4TableEntry(LPM))
        with pytest.raises(P4RuntimeError, match="SetForwardingPipelineConfig failed: INVALID_ARGUMENT"):
            c.set_pipeline(p4r.ForwardingPipelineConfig().p4info, b"this is not P4")


def test_a_big_failed_batch_lists_ten_failures_and_counts_the_rest(conn):
    batch = [conn.insert(route(i << 8, 24, i, 1)) for i in range(1, 1024 + 16)]  # the table holds 1024
    with pytest.raises(P4RuntimeError) as exc:
        conn.write(batch)
    lines = str(exc.value).splitlines()
    assert len(lines) == 1 + 10 + 1
    assert lines[1].startswith("  update 1024 (INSERT table AggIngress.ipv4_lpm): RESOURCE_EXHAUSTED")
    assert lines[-1] == "  ... and 5 more failed updates"
    assert len(conn.read([P4TableEntry(LPM)])) == 1024


def test_reads_decode_to_full_names_whatever_names_the_writer_used(conn):
    by_alias = P4TableEntry("ipv4_lpm", match=P4TableMatch(dstAddr="10.0.3.0/24"),
                            action=P4TableAction("ipv4_forward", dstAddr="00:00:00:00:00:03", port=3))
    conn.write([conn.insert(by_alias)])
    conn.register_write("AggIngress.agg_count", {5: 17})
    conn.write([conn.modify(P4CounterEntry("port_rx", index=4, data=P4CounterData(packet_count=2, byte_count=90)))])
    assert conn.read([P4TableEntry(LPM)]) == [P4TableEntry(LPM, match=P4TableMatch({"hdr.ipv4.dstAddr": (0x0A000300, 24)}),
                                                           action=P4TableAction(FORWARD, dstAddr=3, port=3))]
    assert conn.read([P4RegisterEntry("agg_count", index=5)]) == [P4RegisterEntry("AggIngress.agg_count", index=5,
                                                                                  data=17)]
    (cell,) = conn.read([P4CounterEntry("AggIngress.port_rx", index=4)])
    assert (cell.counter_id, cell.index, cell.packet_count, cell.byte_count) == ("AggIngress.port_rx", 4, 2, 90)


def test_entity_diff_inserts_what_is_new_modifies_what_changed_and_deletes_what_is_gone(conn):
    kept, changed, gone = (route(f"10.0.0.{i}", 32, i, i) for i in (1, 2, 3))
    conn.write([conn.insert(e) for e in (kept, changed, gone)])
    new = route("10.0.0.4", 32, 4, 4)
    want = [conn.canonical(e) for e in (kept, route("10.0.0.2", 32, 2, 7), new)]
    diff = diff_entities(want, conn.read([P4TableEntry(LPM)]), entry_key, lambda e: e.action)
    assert diff.insert == [conn.canonical(new)]
    assert diff.modify == [conn.canonical(route("10.0.0.2", 32, 2, 7))]
    assert diff.delete == [conn.canonical(gone)]
    conn.write([conn.insert(e) for e in diff.insert] + [conn.modify(e) for e in diff.modify] +
               [conn.delete(e) for e in diff.delete])
    assert sorted(conn.read([P4TableEntry(LPM)]), key=entry_key) == sorted(want, key=entry_key)


def test_a_p4info_finsy_cannot_model_is_named_in_one_line():
    info = text_format.Parse(
        'tables { preamble { id: 33554433 name: "I.acl" alias: "acl" } '
        'match_fields { id: 1 name: "hdr.ethernet.srcAddr" bitwidth: 48 match_type: EXACT } '
        'match_fields { id: 2 name: "hdr.arp.srcAddr" bitwidth: 48 match_type: EXACT } }', p4i.P4Info())
    with pytest.raises(ValueError, match=r"^table I.acl: match fields hdr.ethernet.srcAddr and hdr.arp.srcAddr "
                                         r"both end in 'srcAddr', which finsy's P4Schema cannot tell apart$"):
        load_schema(info)
