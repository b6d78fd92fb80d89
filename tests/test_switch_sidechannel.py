"""Side channel verbs over real TCP against a real Switch (no interfaces) and State."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from procs import free_port

from p4target import state as st
from p4target.sidechannel import SideChannelError, SideChannelServer, send_command, send_commands
from p4target.switch import Switch


def schema() -> st.ProgramSchema:
    actions = {"NoAction": st.ActionSchema("NoAction"),
               "MyIngress.drop": st.ActionSchema("MyIngress.drop"),
               "MyIngress.ipv4_forward": st.ActionSchema("MyIngress.ipv4_forward", (("dstAddr", 48), ("port", 9)))}
    table = st.TableSchema("MyIngress.ipv4_lpm", (st.KeyField("hdr.ipv4.dstAddr", 32, "lpm"),),
                           ("MyIngress.ipv4_forward", "MyIngress.drop", "NoAction"))
    acl = st.TableSchema("MyIngress.acl", (st.KeyField("hdr.ethernet.etherType", 16, "ternary"),),
                         ("MyIngress.drop", "NoAction"))
    return st.ProgramSchema(actions=actions, tables={table.name: table, acl.name: acl},
                            registers={"MyIngress.slots": st.RegisterSchema("MyIngress.slots", 32, 4)},
                            counters={"MyIngress.port_pkts": st.CounterSchema("MyIngress.port_pkts", 8)})


@pytest.fixture
def served():
    sw = Switch({})
    port = free_port()
    server = SideChannelServer(sw, port).start()
    try:
        yield sw, port
    finally:
        server.stop()
        sw.close()


def test_queue_verbs_change_the_traffic_manager(served):
    sw, port = served
    assert send_command(port, "set_queue_rate 500 3") == ""
    assert send_command(port, "set_queue_rate_bps 8000000 3") == ""
    assert send_command(port, "set_queue_depth 16 3") == ""
    assert send_command(port, "set_queue_delay 2.5 3") == ""
    assert send_command(port, "set_queue_loss 0.1 42 3") == ""
    assert send_command(port, "set_ingress_delay 4 3") == ""
    stats = json.loads(send_command(port, "queue_stats 3"))["3"]
    assert stats["rate_pps"] == 500 and stats["rate_bps"] == 8e6 and stats["depth"] == 16
    assert stats["delay_ms"] == pytest.approx(2.5) and stats["loss"] == pytest.approx(0.1)
    assert stats["ingress_delay_ms"] == pytest.approx(4)
    send_command(port, "set_queue_rate 0 3")
    assert sw.tm.queue(3).rate_pps is None


def test_many_lines_share_one_connection_and_stop_at_the_first_error(served):
    sw, port = served
    assert send_commands(port, [f"set_queue_depth {n} {n}" for n in range(1, 2001)]) == [""] * 2000
    assert sw.tm.queue(2000).depth == 2000
    with pytest.raises(SideChannelError, match="at least 1"):
        send_commands(port, ["set_queue_depth 7 1", "set_queue_depth 0 2", "set_queue_depth 9 3"])
    assert sw.tm.queue(1).depth == 7 and sw.tm.queue(3).depth == 3


def test_errors_are_one_line_replies(served):
    _, port = served
    for line, message in [("frobnicate", "unknown command"), ("set_queue_depth 0 1", "at least 1"),
                          ("set_ingress_delay -1 1", "must not be negative"),
                          ("set_queue_rate", "expected 1 value"), ("register_read x", "no P4 program"),
                          ("engine", "no P4 program")]:
        with pytest.raises(SideChannelError, match=message):
            send_command(port, line)


def test_state_verbs(served):
    sw, port = served
    sw.set_pipeline(SimpleNamespace(state=st.State(schema()), engine_name="python"))  # control plane only: no packets
    assert send_command(port, "engine") == "python"
    send_command(port, "register_write slots 2 0x1234")
    assert send_command(port, "register_read MyIngress.slots 2") == str(0x1234)
    assert send_command(port, "register_read slots") == f"0 0 {0x1234} 0"
    sw.state.counter_write("MyIngress.port_pkts", 5, 7, 700)
    assert send_command(port, "counter_read port_pkts 5") == "packets=7 bytes=700"
    send_command(port, "table_add ipv4_lpm ipv4_forward 10.0.0.0/24 => 00:00:00:00:00:02 2")
    entry = sw.state.table("MyIngress.ipv4_lpm").entries()[0]
    assert entry.match["hdr.ipv4.dstAddr"] == st.Lpm(0x0A000000, 24)
    assert entry.params == {"dstAddr": 2, "port": 2}
    send_command(port, "table_add acl drop 0x0800&&&0xffff => 10")
    assert sw.state.table("MyIngress.acl").entries()[0].priority == 10
    with pytest.raises(SideChannelError, match="takes 2 parameter"):
        send_command(port, "table_add ipv4_lpm ipv4_forward 10.0.1.0/24 => 1")
    with pytest.raises(SideChannelError, match="already"):
        send_command(port, "table_add ipv4_lpm ipv4_forward 10.0.0.0/24 => 00:00:00:00:00:02 2")
    with pytest.raises(SideChannelError, match="unknown table"):
        send_command(port, "table_add nope drop 1 =>")


def test_unreachable_switch_is_a_clear_error():
    with pytest.raises(SideChannelError, match="side channel 127.0.0.1"):
        send_command(free_port(), "port_stats", timeout=1)


def test_a_verb_missing_its_values_is_an_error_line(served):
    """Found by scripts/fuzz_server.py: `set_queue_loss` alone raised IndexError in the connection's thread,
    which dropped the connection with no reply."""
    _, port = served
    with pytest.raises(SideChannelError, match="expected 1 value"):
        send_command(port, "set_queue_loss")
