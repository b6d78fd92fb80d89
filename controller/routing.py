"""IPv4 routes to every host, on any topology (star, tree, leaf-spine, fat-tree).

Rule (deterministic, loop-free): at switch s, the route to host h leaves on the port toward
a neighbor switch one hop closer to h's switch (hop counts over switches only; hosts never
forward), or on h's own port when s is h's switch. Every hop strictly decreases the
distance to h's switch, so no route can loop.

Equal-cost next hops (sorted by topology order) are shared out by destination: the host's
index i (its position in the topology) is written in mixed radix, one digit per distance d
with radix c_d = the most next-hop choices any switch at distance d has; the switches
farthest from h use the least significant digit. A switch at distance d takes choice
`(i // prod(c_e for e > d)) % n`. On a fat-tree, the hosts of a pod thus reach it through
every aggregation switch and every core, and each destination keeps a single path.

Every hop rewrites the destination MAC to the host's own MAC: switches do not check
destination MACs, and the last hop must deliver a frame the host accepts.
"""
from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from controller.topology import Topology


@dataclass(frozen=True)
class Route:
    dst_ip: str  # a host address; the entry matches it as /32
    port: int  # output port on this switch
    dst_mac: str  # destination MAC written into the frame
    host: str  # the destination host's name (for reading and debugging)

    prefix_len: int = 32


def compute_routes(topo: Topology) -> dict[str, list[Route]]:
    """switch -> its routes to every host, in host order (see the module docstring for the rule)."""
    switch_graph = topo.graph().subgraph(topo.switches)
    switch_order = {s: i for i, s in enumerate(topo.switches)}
    routes: dict[str, list[Route]] = {s: [] for s in topo.switches}
    for i, (name, host) in enumerate(topo.hosts.items()):
        edge = topo.switch_of(name)
        dist = nx.single_source_shortest_path_length(switch_graph, edge)
        closer = {s: sorted((n for n in switch_graph.neighbors(s) if dist[n] == dist[s] - 1),
                            key=switch_order.__getitem__) for s in topo.switches if s != edge}
        divisor = _digit_divisors(dist, closer)
        for s in topo.switches:
            if s == edge:
                port = topo.port_of(s, name)
            else:
                choices = closer[s]
                port = topo.port_of(s, choices[(i // divisor[dist[s]]) % len(choices)])
            routes[s].append(Route(dst_ip=host.ip, port=port, dst_mac=host.mac, host=name))
    return routes


def _digit_divisors(dist: dict[str, int], closer: dict[str, list[str]]) -> dict[int, int]:
    """distance d -> product of the radixes of all greater distances (see the module docstring)."""
    radix: dict[int, int] = {}
    for s, choices in closer.items():
        radix[dist[s]] = max(radix.get(dist[s], 1), len(choices))
    divisor, product = {}, 1
    for d in sorted(radix, reverse=True):
        divisor[d] = product
        product *= radix[d]
    return divisor


def trace(topo: Topology, routes: dict[str, list[Route]], src_host: str, dst_host: str) -> list[str]:
    """The switches a packet from `src_host` to `dst_host` visits by following `routes`.

    Raises ValueError on a missing route, a loop, or delivery to the wrong host.
    """
    dst_ip = topo.hosts[dst_host].ip
    node, path = topo.switch_of(src_host), list[str]()
    while True:
        if node in path:
            raise ValueError(f"routing loop toward {dst_host}: {' -> '.join(path + [node])}")
        path.append(node)
        route = next((r for r in routes[node] if r.dst_ip == dst_ip), None)
        if route is None:
            raise ValueError(f"switch {node} has no route to {dst_host} ({dst_ip})")
        nxt = topo.neighbor_on(node, route.port)
        if topo.is_host(nxt):
            if nxt != dst_host:
                raise ValueError(f"switch {node} delivers traffic for {dst_host} to {nxt}")
            return path
        node = nxt
