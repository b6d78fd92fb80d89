"""BMv2's Thrift runtime API of a real `aggnet switch` process, driven by a client of our own
(tests/bm_thrift.py; no /opt/p4ref needed): writes read back over P4Runtime and the line protocol,
BMv2's error codes, and a client sending garbage, on the one --thrift-port."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from bm_thrift import AppError, BmClient, BmError, action_data, exact, lpm, match_key, priority, range_, ternary
from finsy.proto import p4r
from p4rt_raw import RawClient
from procs import running_switch

from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.api import PRIORITY_TOP
from p4target.sidechannel import send_command

PROGRAM = Path(__file__).resolve().parent / "data" / "runtime" / "ipv4_cpu.p4"
S, I32, I64 = wire.STRING, wire.I32, wire.I64


@pytest.fixture
def switch(tmp_path):
    with running_switch(PROGRAM, tmp_path / "switch.log") as (thrift_port, grpc_port):
        client, p4rt = BmClient(thrift_port), RawClient(grpc_port, device_id=1)
        try:
            yield client, p4rt, thrift_port
        finally:
            client.close()
            p4rt.close()


def p4info_ids(p4rt: RawClient) -> dict[str, int]:
    info = p4rt.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE).p4info
    return {t.preamble.name: t.preamble.id for t in list(info.tables) + list(info.actions)}


def port_of(replica: p4r.Replica) -> int:
    """A replica's port (written by the switch itself, it comes back in the `port` bytes form)."""
    return int.from_bytes(replica.port, "big") if replica.WhichOneof("port_kind") == "port" else replica.egress_port


def test_config_names_the_program(switch):
    client, _, _ = switch
    config = json.loads(client.call("standard", "bm_get_config"))
    tables = {t["name"]: t for t in config["pipelines"][0]["tables"]}
    assert tables["MyIngress.acl"]["match_type"] == "range"
    assert [k["match_type"] for k in tables["MyIngress.acl"]["key"]] == ["ternary", "ternary", "range"]
    assert tables["MyIngress.acl"]["with_counters"] is True
    forward = next(a for a in config["actions"] if a["name"] == "MyIngress.ipv4_forward")
    assert forward["runtime_data"] == [{"name": "dstAddr", "bitwidth": 48}, {"name": "port", "bitwidth": 9}]
    assert {r["name"]: r["bitwidth"] for r in config["register_arrays"]} == {"MyIngress.last_src": 32}
    assert client.call("standard", "bm_get_config_md5") and client.call("standard", "bm_mgmt_get_info")[1] == 1


def test_entries_written_over_thrift_are_what_p4runtime_reads(switch):
    client, p4rt, _ = switch
    ids = p4info_ids(p4rt)
    handle = client.std("bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), match_key(lpm(bytes([10, 0, 2, 0]), 24)),
                        (S, "MyIngress.ipv4_forward"), action_data(bytes(5) + b"\x02", b"\x00\x03"), priority(0))
    acl = client.std("bm_mt_add_entry", (S, "MyIngress.acl"),
                     match_key(ternary(b"\x08\x00", b"\xff\xff"), ternary(b"\x11", b"\xff"), range_(b"\x00\x01", b"\x00\x02")),
                     (S, "MyIngress.drop"), action_data(), priority(10))
    assert client.std("bm_mt_get_num_entries", (S, "MyIngress.ipv4_lpm")) == 1
    entries = p4rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"])))
    [entry] = [e.table_entry for e in entries]
    assert entry.match[0].lpm.value == bytes([10, 0, 2, 0]) and entry.match[0].lpm.prefix_len == 24
    assert entry.action.action.action_id == ids["MyIngress.ipv4_forward"]
    assert [p.value for p in entry.action.action.params] == [b"\x02", b"\x03"]
    [acl_entry] = [e.table_entry for e in p4rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.acl"])))]
    assert acl_entry.priority == PRIORITY_TOP - 10  # the CLI's lower-wins number, turned around
    assert acl_entry.match[1].optional.value == b"\x11"
    [dumped] = client.std("bm_mt_get_entries", (S, "MyIngress.acl"))
    assert dumped[3] == acl and dumped[2][1] == 10 and dumped[4][2] == b"MyIngress.drop"

    client.std("bm_mt_modify_entry", (S, "MyIngress.ipv4_lpm"), (I32, handle), (S, "MyIngress.drop"), action_data())
    [entry] = [e.table_entry for e in p4rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"])))]
    assert entry.action.action.action_id == ids["MyIngress.drop"]
    client.std("bm_mt_delete_entry", (S, "MyIngress.ipv4_lpm"), (I32, handle))
    assert p4rt.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"]))) == []
    client.std("bm_mt_set_default_action", (S, "MyIngress.ipv4_lpm"), (S, "NoAction"), action_data())
    assert client.std("bm_mt_get_default_entry", (S, "MyIngress.ipv4_lpm"))[2] == b"NoAction"


def test_errors_are_bmv2_codes(switch):
    client, _, _ = switch
    add_args = [match_key(lpm(bytes(4), 8)), (S, "MyIngress.drop"), action_data(), priority(0)]
    cases = [
        (7, "bm_mt_add_entry", (S, "nope"), *add_args),  # INVALID_TABLE_NAME
        (8, "bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), add_args[0], (S, "MyIngress.learn"), action_data(),
         priority(0)),  # INVALID_ACTION_NAME: not an action of this table
        (18, "bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), match_key(exact(bytes(4))), *add_args[1:]),  # BAD_MATCH_KEY
        (18, "bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), match_key(lpm(b"\x01" * 5, 8)), *add_args[1:]),
        (18, "bm_mt_add_entry", (S, "MyIngress.acl"), match_key(ternary(b"\x08\x00", b"\xff\xff"), ternary(b"\x11", b"\xff"),
                                                         range_(b"\x00\x05", b"\x00\x02")), *add_args[1:]),
        (26, "bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), add_args[0], (S, "MyIngress.ipv4_forward"),
         action_data(b"\x01"), priority(0)),  # BAD_ACTION_DATA
        (2, "bm_mt_delete_entry", (S, "MyIngress.ipv4_lpm"), (I32, 99)),  # INVALID_HANDLE
        (1, "bm_register_read", (S, "nope"), (I32, 0)),  # INVALID_REGISTER_NAME
        (2, "bm_register_read", (S, "MyIngress.last_src"), (I32, 16)),  # INVALID_INDEX
        (2, "bm_counter_read", (S, "MyIngress.port_counter"), (I32, 512)),
        (4, "bm_mt_read_counter", (S, "MyIngress.ipv4_lpm"), (I32, 0)),  # COUNTERS_DISABLED
    ]
    for code, method, *args in cases:
        with pytest.raises(BmError) as err:
            client.std(method, *args)
        assert err.value.code == code, (method, args)
    client.std("bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), *add_args)
    with pytest.raises(BmError, match="code 17"):  # DUPLICATE_ENTRY
        client.std("bm_mt_add_entry", (S, "MyIngress.ipv4_lpm"), *add_args)
    with pytest.raises(AppError) as app:
        client.call("standard", "bm_no_such_method")
    assert app.value.kind == 1
    # A field of another wire type than the method declares is skipped, as BMv2's generated code skips it: the
    # argument keeps its default (here the value 0), and no handler sees a type it does not take.
    client.std("bm_register_write", (S, "MyIngress.last_src"), (I32, 0), (I64, 5))
    client.std("bm_register_write", (S, "MyIngress.last_src"), (I32, 0), (S, "seven"))
    assert client.std("bm_register_read", (S, "MyIngress.last_src"), (I32, 0)) == 0
    with pytest.raises(BmError, match="code 1"):  # a name of another type: no name, INVALID_REGISTER_NAME
        client.std("bm_register_read", (I32, 7), (I32, 0))
    assert client.std("bm_mt_get_num_entries", (S, "MyIngress.ipv4_lpm")) == 1  # the connection still serves


def test_garbage_drops_one_connection_only(switch):
    client, _, port = switch
    for junk in [b"\x80\x01\x00\x01\xff\xff\xff\xff", b"\x80\x01\x00\x01\x00\x00\x00\x01x\x00\x00\x00\x01\x0f\x00\x01"
                 b"\x07\x7f\xff\xff\xff", b"\x80\x02junk"]:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(junk)
            raw.shutdown(socket.SHUT_WR)
            assert raw.recv(100) == b""  # closed, no reply to garbage
    assert client.std("bm_mt_get_num_entries", (S, "MyIngress.ipv4_lpm")) == 0
    assert json.loads(send_command(port, "port_stats")) == {}  # the line protocol too


def test_externs_pre_mirroring_queues_beside_the_line_protocol(switch):
    client, p4rt, port = switch
    client.std("bm_register_write", (S, "MyIngress.last_src"), (I32, 3), (I64, 0x0A000009))
    assert send_command(port, "register_read last_src 3") == str(0x0A000009)
    send_command(port, "register_write last_src 4 77")
    assert client.std("bm_register_read_all", (S, "MyIngress.last_src"))[3:5] == [0x0A000009, 77]
    client.std("bm_register_reset", (S, "MyIngress.last_src"))
    assert send_command(port, "register_read last_src 4") == "0"

    client.std("bm_counter_write", (S, "MyIngress.port_counter"), (I32, 2), (wire.STRUCT, {1: (I64, 640), 2: (I64, 5)}))
    assert send_command(port, "counter_read port_counter 2") == "packets=5 bytes=640"
    assert client.std("bm_counter_read", (S, "MyIngress.port_counter"), (I32, 2)) == {1: 640, 2: 5}

    assert client.call("simple_pre_lag", "bm_mc_mgrp_create", (I32, 0), (I32, 7)) == 7
    node = client.call("simple_pre_lag", "bm_mc_node_create", (I32, 0), (I32, 3), (S, "1100"), (S, ""))
    client.call("simple_pre_lag", "bm_mc_node_associate", (I32, 0), (I32, 7), (I32, node))
    [group] = p4rt.read(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=7))))
    replicas = group.packet_replication_engine_entry.multicast_group_entry.replicas
    assert sorted((port_of(r), r.instance) for r in replicas) == [(2, 3), (3, 3)]
    dump = json.loads(client.call("simple_pre_lag", "bm_mc_get_entries", (I32, 0)))
    assert dump["mgrps"] == [{"id": 7, "l1_handles": [node]}] and dump["l2_handles"][0]["ports"] == [2, 3]
    with pytest.raises(BmError, match="code 5"):  # LAGs: refused with McOperationErrorCode ERROR
        client.call("simple_pre_lag", "bm_mc_node_create", (I32, 0), (I32, 1), (S, "1"), (S, "1"))

    client.call("simple_switch", "mirroring_session_add", (I32, 5), (wire.STRUCT, {1: (I32, 4)}))
    [session] = p4rt.read(p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
        clone_session_entry=p4r.CloneSessionEntry(session_id=5))))
    assert [port_of(r) for r in session.packet_replication_engine_entry.clone_session_entry.replicas] == [4]
    assert client.call("simple_switch", "mirroring_session_get", (I32, 5)) == {1: 4}

    assert client.call("simple_switch", "set_egress_queue_rate", (I32, 2), (I64, 500)) == 0
    assert client.call("simple_switch", "set_egress_queue_depth", (I32, 2), (I32, 9)) == 0
    stats = json.loads(send_command(port, "queue_stats 2"))["2"]
    assert stats["rate_pps"] == 500 and stats["depth"] == 9
    assert client.call("simple_switch", "set_egress_queue_depth", (I32, 2), (I32, 0)) == 1  # refused: < 1 packet
    assert client.call("simple_switch", "get_time_elapsed_us") > 0
