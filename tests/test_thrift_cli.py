"""The real `simple_switch_CLI` (BMv2's, from /opt/p4ref) against a real `aggnet switch`, unchanged:
the entries it adds forward packets on veths, the counters and registers it reads are the ones
packets changed, the multicast groups it makes replicate, action profiles, meters and errors read
as on BMv2; our line protocol answers on the same port meanwhile."""
from __future__ import annotations

import os
import select
import socket
import subprocess
from pathlib import Path

import pytest
from procs import running_switch, veth_pairs

from controller.p4c import compile_bmv2
from controller.switch_cli import split_outputs
from p4target.sidechannel import send_command

P4REF = Path("/opt/p4ref")
CLI = P4REF / "bin" / "simple_switch_CLI"
DATA = Path(__file__).resolve().parent / "data" / "runtime"
pytestmark = pytest.mark.skipif(not CLI.exists(), reason=f"needs BMv2's simple_switch_CLI ({CLI}, scripts/setup.sh)")


def cli(port: int, *lines: str, json: Path | None = None) -> list[str]:
    """Each line's output as simple_switch_CLI prints it (the text after its prompt)."""
    env = {**os.environ, "PYTHONPATH": str(P4REF / "lib" / "python-extra")}  # its thrift package, as env.sh sets
    program = ["--json", str(json)] if json else []
    done = subprocess.run([str(CLI), "--thrift-port", str(port), *program], input="\n".join(lines) + "\n", env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    return split_outputs(done.stdout)[:len(lines)]


def test_cli_tables_profiles_meters_and_errors(tmp_path):
    with running_switch(DATA / "profiles.p4", tmp_path / "switch.log") as (port, _):
        out = cli(port, "show_tables", "table_info mac_a",
                  "act_prof_create_member nhop_profile set_port 3", "act_prof_create_member nhop_profile set_port 4",
                  "table_indirect_add mac_a 00:00:00:00:00:01 => 1", "act_prof_delete_member nhop_profile 1",
                  "act_prof_create_member ecmp_selector set_nhop 00:00:00:00:00:09 2",
                  "act_prof_create_group ecmp_selector", "act_prof_add_member_to_group ecmp_selector 0 0",
                  "table_indirect_add_with_group ecmp 10.0.0.0/8 => 0", "table_dump ecmp",
                  "meter_array_set_rates port_meter 0.001:10 0.002:20", "meter_get_rates port_meter 3",
                  "table_add flows read_flow_meter 10.0.0.1 =>", "table_add flows read_flow_meter 10.0.0.1 =>",
                  "meter_set_rates flow_meter 0 0.5:1500 1:3000", "meter_get_rates flow_meter 0",
                  "table_num_entries flows", "table_clear flows", "table_num_entries flows",
                  "switch_info", "table_indirect_delete mac_a 7")
        assert "MyIngress.ecmp" in out[0] and "implementation=MyIngress.ecmp_selector" in out[0]
        assert "mk=hdr.ethernet.dstAddr(exact, 48)" in out[1] and "MyIngress.set_port" in out[1]
        assert out[2:5] == ["Member has been created with handle 0", "Member has been created with handle 1",
                            "Adding entry to indirect match table MyIngress.mac_a\nEntry has been added with handle 0"]
        assert out[5] == "Invalid table operation (MBR_STILL_USED)"
        assert "* hdr.ipv4.dstAddr    : LPM       0a000000/8\nIndex: group(0)" in out[10]
        assert "Dumping group 0\nMembers: [0]" in out[10] and "MyIngress.set_nhop - 000000000009, 0002" in out[10]
        assert out[12] == "0: info rate = 0.001, burst size = 10\n1: info rate = 0.002, burst size = 20"
        assert out[14].endswith("Invalid table operation (DUPLICATE_ENTRY)")
        assert out[16] == "0: info rate = 0.5, burst size = 1500\n1: info rate = 1.0, burst size = 3000"
        assert (out[17], out[19]) == ("1", "0")
        assert "device_id                : 1" in out[20] and f"thrift_port              : {port}" in out[20]
        assert out[21] == "Deleting entry 7 from mac_a\nInvalid table operation (INVALID_HANDLE)"
        assert send_command(port, "queue_stats 1")  # the line protocol, on the same port


def test_cli_registers_counters_entries_mirroring_queues(tmp_path):
    with running_switch(DATA / "ipv4_cpu.p4", tmp_path / "switch.log") as (port, _):
        out = cli(port, "register_write last_src 2 4660", "register_read last_src 2", "counter_reset port_counter",
                  "counter_read port_counter 600", "table_add l2_exact set_egress 00:00:00:00:00:05 => 3",
                  "table_modify l2_exact set_egress 0 => 4", "table_dump_entry l2_exact 0",
                  "table_add acl drop 0x0800&&&0xffff 6&&&0x0f 0->10 => 3",
                  "mirroring_add 5 3", "mirroring_get 5", "mirroring_add_mc 6 1", "set_queue_depth 20 2",
                  "set_queue_rate 300 2", "get_time_since_epoch")
        assert out[1] == "last_src[2]= 4660"
        assert out[3] == "Invalid counter operation (INVALID_INDEX)"
        assert out[6].endswith("Action entry: MyIngress.set_egress - 0004")
        assert out[7].endswith("Invalid table operation (BAD_MATCH_KEY)")  # an optional key takes no partial mask
        assert out[9] == "MirroringSessionConfig(port=3, mgid=None)"
        assert out[10] == "Invalid mirroring operation (SESSION_NOT_FOUND)"  # sessions to groups: not here
        assert int(out[13]) > 0
        assert send_command(port, "register_read last_src 2") == "4660"  # the line protocol sees the same State
        assert '"rate_pps": 300' in send_command(port, "queue_stats 2") and '"depth": 20' in send_command(port, "queue_stats 2")
        out = cli(port, "table_delete l2_exact 0", "table_num_entries l2_exact", "register_reset last_src",
                  "register_read last_src 2", "mirroring_delete 5", "mirroring_get 5")
        assert out[1:4] == ["0", "", "last_src[2]= 0"] and out[5] == "Invalid mirroring operation (SESSION_NOT_FOUND)"


def test_cli_with_the_p4c_json_as_p4_utils_runs_it(tmp_path):
    """p4-utils hands the CLI p4c's JSON of the program: its names and widths are the switch's too."""
    p4c = P4REF / "bin" / "p4c"
    if not p4c.exists():
        pytest.skip(f"needs p4c ({p4c})")
    compile_bmv2(str(DATA / "ipv4_cpu.p4"), str(tmp_path), str(p4c))
    with running_switch(DATA / "ipv4_cpu.p4", tmp_path / "switch.log") as (port, _):
        out = cli(port, "table_add acl drop 0x0800&&&0xffff 17&&&0xff 1->2 => 3", "table_dump acl",
                  "counter_read acl_counter 0", json=tmp_path / "ipv4_cpu.json")
        assert out[0].endswith("Entry has been added with handle 0"), out[0]
        assert "* ipv4.protocol                 : TERNARY   11 &&& ff" in out[1] and "Priority: 3" in out[1]
        assert out[2].endswith("acl_counter[0]= (0 bytes, 0 packets)")


def frame(dst_ip: str) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether

    return bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:09") /
                 IP(src="10.0.0.9", dst=dst_ip) / UDP(sport=1, dport=2) / b"hello-thrift")


@pytest.mark.root
def test_cli_entries_forward_count_and_replicate_packets(tmp_path):
    from scapy.layers.inet import IP
    from scapy.layers.l2 import Ether

    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs")
    pairs = [(f"thS-eth{i}", f"thP-eth{i}") for i in (1, 2, 3)]
    with veth_pairs(pairs), running_switch(DATA / "ipv4_cpu.p4", tmp_path / "switch.log",
                                           *(f"{i}@{sw}" for i, (sw, _) in enumerate(pairs, 1))) as (port, _):
        socks = []
        for _, peer in pairs:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
            s.bind((peer, 0))
            s.settimeout(5)
            socks.append(s)
        try:
            out = cli(port, "table_add ipv4_lpm ipv4_forward 10.0.2.0/24 => 00:00:00:00:00:02 2",
                      "table_add ipv4_lpm set_mcast 10.0.9.0/24 => 7", "mc_mgrp_create 7", "mc_node_create 0 2 3",
                      "mc_node_associate 7 0", "table_add acl NoAction 0x0800&&&0xffff 17&&&0xff 1->1 => 10")
            assert "Entry has been added with handle 0" in out[5], out
            socks[0].send(frame("10.0.2.5"))
            got = Ether(socks[1].recv(2048))
            assert got.dst == "00:00:00:00:00:02" and got[IP].ttl == 63 and got.load == b"hello-thrift"
            socks[0].send(frame("10.0.9.1"))
            for s in socks[1:]:  # one copy on each port of the group
                got = Ether(s.recv(2048))
                assert got[IP].dst == "10.0.9.1" and got.load == b"hello-thrift"
            out = cli(port, "counter_read port_counter 1", "register_read last_src 0", "counter_read acl_counter 0",
                      "mc_dump", "table_dump acl")
            assert out[0] == "port_counter[1]= (108 bytes, 2 packets)"  # two 54-byte frames in on port 1
            assert out[1] == f"last_src[0]= {0x0A000009}"  # 10.0.0.9, the packets' source
            assert out[2].endswith(", 2 packets)"), out[2]  # the acl entry's direct counter: both packets hit it
            assert "mgrp(7)\n  -> (L1h=0, rid=0) -> (ports=[2, 3], lags=[])" in out[3]
            assert "TERNARY   0800 &&& ffff" in out[4] and "RANGE     0001 -> 0001" in out[4]
            assert "Priority: 10" in out[4]
            assert send_command(port, "register_read last_src 0") == str(0x0A000009)
        finally:
            for s in socks:
                s.close()


def test_cli_parser_value_sets_steer_packets(tmp_path):
    """pvs_add/pvs_get/pvs_remove/pvs_clear on value_sets.p4: EtherType 0x1234 is a tunnel once the set
    holds it (out on port 2, not 1), and (proto 6, flags 1) marks it once the struct-typed set holds 0x0601.
The CLI pads a 16-bit value to three bytes under Python 3 (BMv2 itself then fails); the number counts."""
    from scapy.layers.l2 import Ether

    if os.geteuid() != 0:
        pytest.skip("needs root to create veth pairs")
    pairs = [(f"thV-eth{i}", f"thW-eth{i}") for i in (1, 2, 3)]
    with veth_pairs(pairs), running_switch(DATA / "value_sets.p4", tmp_path / "switch.log",
                                           *(f"{i}@{sw}" for i, (sw, _) in enumerate(pairs, 1))) as (port, _):
        socks = []
        for _, peer in pairs[:2]:
            s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x1234))
            s.bind((peer, 0))
            s.settimeout(5)
            socks.append(s)
        sender = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        sender.bind((pairs[2][1], 0))
        frame = bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:03", type=0x1234)) + bytes([6, 1, 0, 0]) + \
            b"vset-payload"

        def sent_to() -> tuple[int, bytes]:
            """The port (1 or 2) the frame leaves on, and its tunnel header's mark (both ports watched at once)."""
            sender.send(frame)
            ready = select.select(socks, [], [], 60)[0]  # ends when the frame arrives; 60 s only when it never does
            assert ready, "the frame left on neither port"
            return socks.index(ready[0]) + 1, ready[0].recv(2048)[16:18]

        try:
            assert sent_to() == (1, b"\0\0")
            tunnel = "VsParser.tunnel_types"  # BMv2 takes a set's full name (the CLI passes what it is given)
            out = cli(port, f"pvs_add {tunnel} 0x1234", f"pvs_add {tunnel} 0x0800", f"pvs_get {tunnel}")
            assert sorted(out[2].split()) == ["0800", "1234"]
            assert sent_to() == (2, b"\0\0")
            out = cli(port, "pvs_add VsParser.marking 0x0601", "pvs_get VsParser.marking", "pvs_add marking 1")
            assert out[1] == "0601" and out[2] == "Invalid parser value set operation (INVALID_PARSE_VSET_NAME)"
            assert sent_to() == (2, b"\xbe\xef")
            out = cli(port, "pvs_remove VsParser.marking 0x0601", "pvs_remove VsParser.marking 0x0601",
                      "pvs_get VsParser.marking")
            assert out == ["", "", ""]  # removing what is not there is no error, as on BMv2
            assert sent_to() == (2, b"\0\0")
            cli(port, f"pvs_clear {tunnel}")
            assert sent_to() == (1, b"\0\0")
        finally:
            sender.close()
            for s in socks:
                s.close()
