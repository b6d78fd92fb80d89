"""PTF tests of basic.p4, as the p4lang tutorials write them for an exercise.

Every test's setUp connects to the switch (test parameter `grpcaddr`), becomes primary and
pushes the pipeline (`p4info`: p4c's P4Info text file, `config`: p4c's BMv2 JSON), so each
test starts from an empty table; tearDown ends the stream. Run with the `ptf` command:

    ptf --pypath DIR_OF_p4runtime_lib -i 0@IF0 -i 1@IF1 -i 2@IF2 -i 3@IF3 \\
        --test-params="grpcaddr='127.0.0.1:9559';p4info='basic.p4info.txtpb';config='basic.json'" \\
        --test-dir ptf
"""
import ptf
import ptf.testutils as tu
from p4runtime_lib import P4InfoHelper, SwitchConnection, mac_value, shutdown_all_switch_connections
from ptf.base_tests import BaseTest

ROUTER_MAC = "00:aa:00:00:00:01"  # the destination MAC hosts send to
HOST_MAC = "00:bb:00:00:00:09"


class BasicTest(BaseTest):
    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        self.p4info = P4InfoHelper(tu.test_param_get("p4info"))
        self.switch = SwitchConnection(tu.test_param_get("grpcaddr") or "localhost:9559", device_id=0)
        self.switch.master_arbitration_update()
        self.switch.set_forwarding_pipeline_config(self.p4info.p4info, tu.test_param_get("config"))

    def tearDown(self):
        shutdown_all_switch_connections()
        BaseTest.tearDown(self)

    def route(self, prefix, next_hop_mac, port):
        self.switch.write_table_entry(self.p4info.lpm_entry(
            "MyIngress.ipv4_lpm", "hdr.ipv4.dstAddr", prefix, "MyIngress.ipv4_forward",
            {"dstAddr": mac_value(next_hop_mac), "port": port}))

    def check_forwarded(self, in_port, dst_ip, ttl, next_hop_mac, out_port):
        sent = tu.simple_udp_packet(eth_dst=ROUTER_MAC, eth_src=HOST_MAC, ip_dst=dst_ip, ip_ttl=ttl)
        expected = tu.simple_udp_packet(eth_dst=next_hop_mac, eth_src=ROUTER_MAC, ip_dst=dst_ip, ip_ttl=ttl - 1)
        tu.send_packet(self, in_port, sent)
        tu.verify_packets(self, expected, [out_port])


class MissIsDropped(BasicTest):
    """An empty table drops IPv4 packets."""

    def runTest(self):
        tu.send_packet(self, 1, tu.simple_tcp_packet(eth_dst=ROUTER_MAC, ip_dst="10.0.1.1"))
        tu.verify_no_other_packets(self)


class HostRoute(BasicTest):
    """A /32 route: new MACs, TTL - 1, checksum recomputed (simple_udp_packet computes the expected one)."""

    def runTest(self):
        self.route("10.0.1.1/32", "00:cc:00:00:01:01", 2)
        self.check_forwarded(1, "10.0.1.1", 64, "00:cc:00:00:01:01", 2)


class SeveralRoutes(BasicTest):
    """Three routes to three ports, each packet leaves where its route says."""

    def runTest(self):
        routes = [("10.0.1.1/32", "10.0.1.1", "00:cc:00:00:01:01", 1),
                  ("10.0.2.0/24", "10.0.2.77", "00:cc:00:00:02:02", 2),
                  ("10.0.3.0/24", "10.0.3.5", "00:cc:00:00:03:03", 3)]
        for prefix, _, mac, port in routes:
            self.route(prefix, mac, port)
        for ttl, (_, dst, mac, port) in zip((64, 30, 2), routes):
            self.check_forwarded(0, dst, ttl, mac, port)


class LongestPrefixWins(BasicTest):
    """Overlapping /16 and /24: the /24 decides, outside it the /16 does."""

    def runTest(self):
        self.route("10.1.0.0/16", "00:cc:00:00:00:16", 1)
        self.route("10.1.7.0/24", "00:cc:00:00:00:24", 3)
        self.check_forwarded(0, "10.1.7.200", 64, "00:cc:00:00:00:24", 3)
        self.check_forwarded(0, "10.1.8.200", 64, "00:cc:00:00:00:16", 1)


class TtlOneBecomesZero(BasicTest):
    """basic.p4 does not check the TTL: 1 leaves as 0."""

    def runTest(self):
        self.route("10.0.9.9/32", "00:cc:00:00:09:09", 3)
        self.check_forwarded(2, "10.0.9.9", 1, "00:cc:00:00:09:09", 3)


class NonIpv4LeavesOnPortZero(BasicTest):
    """An ARP request skips the table: egress_spec stays 0, the frame leaves unchanged on port 0."""

    def runTest(self):
        arp = tu.simple_arp_packet(eth_src=HOST_MAC, hw_snd=HOST_MAC, ip_snd="10.0.1.9", ip_tgt="10.0.1.1")
        tu.send_packet(self, 1, arp)
        tu.verify_packets(self, arp, [0])
