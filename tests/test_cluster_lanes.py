"""Across servers, aggregation packets must fit the VXLAN tunnels between them: lanes that fill a
1500-byte MTU on one machine (the default) drop to the most that fit, saying so (a full 364-lane
packet plus VXLAN's 50 bytes does not cross a 1500-byte network: the tunnel dropped every result
in the two-server test)."""
from protocol import wire
from testbed.cluster import UNDERLAY_MTU, VXLAN_OVERHEAD, tunnel_lanes
from testbed.config import NetworkConfig, RunConfig
from testbed.run import Reporter, Run


def test_the_tunnel_lanes_are_the_most_that_cross_a_1500_byte_network():
    fits = tunnel_lanes()
    ip_packet = 20 + 8 + wire.packet_bytes(fits)
    assert ip_packet + VXLAN_OVERHEAD <= UNDERLAY_MTU
    bigger = [n for n in wire.LANE_COUNTS if n > fits]
    assert bigger and all(20 + 8 + wire.packet_bytes(n) + VXLAN_OVERHEAD > UNDERLAY_MTU for n in bigger)


def test_default_lanes_drop_to_the_tunnels_across_servers_and_stay_on_one_machine():
    said: list[str] = []

    class Said(Reporter):
        def status(self, message: str) -> None:
            said.append(message)

    across = RunConfig(network=NetworkConfig(servers=("localhost", "srv2")))
    assert across.network.lanes == wire.DEFAULT_LANES
    assert Run.lanes_for_servers(across, Said()).network.lanes == tunnel_lanes()
    assert said and str(tunnel_lanes()) in said[0]
    alone = RunConfig()
    assert Run.lanes_for_servers(alone, Said()) is alone
