"""IPv4 routes: every host reaches every other host on every shipped topology, on a
shortest path, without loops; equal-cost choices spread destinations over spines/cores."""
from pathlib import Path

import networkx as nx
import pytest

from controller.routing import Route, compute_routes, trace
from controller.topology import load_topology

TOPOLOGIES = sorted((Path(__file__).parent.parent / "topologies").glob("*.yaml"))


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: p.stem)
def test_every_host_reaches_every_other_on_a_shortest_path(path):
    topo = load_topology(str(path))
    routes = compute_routes(topo)
    switch_graph = topo.graph().subgraph(topo.switches)
    pairs = 0
    for src in topo.hosts:
        for dst in topo.hosts:
            if src == dst:
                continue
            visited = trace(topo, routes, src, dst)
            hops = nx.shortest_path_length(switch_graph, topo.switch_of(src), topo.switch_of(dst))
            assert len(visited) == hops + 1, (src, dst, visited)
            pairs += 1
    assert pairs == len(topo.hosts) * (len(topo.hosts) - 1)
    for switch_routes in routes.values():  # one /32 per host on every switch
        assert sorted(r.dst_ip for r in switch_routes) == sorted(h.ip for h in topo.hosts.values())


def test_star_routes_are_the_host_ports_with_host_macs():
    topo = load_topology("topologies/star4.yaml")
    assert compute_routes(topo)["s1"] == [
        Route("10.0.0.1", 1, "00:00:00:00:00:01", "h1"), Route("10.0.0.2", 2, "00:00:00:00:00:02", "h2"),
        Route("10.0.0.3", 3, "00:00:00:00:00:03", "h3"), Route("10.0.0.4", 4, "00:00:00:00:00:04", "h4")]


def test_leafspine_destinations_alternate_spines():
    topo = load_topology("topologies/leafspine.yaml")  # leaf s3: ports 1,2 hosts, 3 -> s1, 4 -> s2
    by_host = {r.host: r.port for r in compute_routes(topo)["s3"]}
    assert by_host == {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 3, "h6": 4, "h7": 3, "h8": 4}
    # the spines deliver down the only link to the destination's leaf
    assert {r.host: r.port for r in compute_routes(topo)["s1"]}["h8"] == topo.port_of("s1", "s6")


def test_fattree_pod_is_reached_through_every_aggregation_switch_and_core():
    topo = load_topology("topologies/fattree4.yaml")
    routes = compute_routes(topo)
    paths = {dst: trace(topo, routes, "h1", dst) for dst in ("h13", "h14", "h15", "h16")}
    assert paths == {"h13": ["s13", "s5", "s1", "s11", "s19"], "h14": ["s13", "s6", "s3", "s12", "s19"],
                     "h15": ["s13", "s5", "s2", "s11", "s20"], "h16": ["s13", "s6", "s4", "s12", "s20"]}
    cores = {path[2] for path in paths.values()}
    assert cores == {"s1", "s2", "s3", "s4"}


def test_trace_reports_a_loop_and_a_missing_route():
    topo = load_topology("topologies/tree2.yaml")
    routes = compute_routes(topo)
    looped = {s: list(r) for s, r in routes.items()}
    looped["s1"] = [Route(r.dst_ip, topo.port_of("s1", "s2"), r.dst_mac, r.host) if r.host == "h5" else r
                    for r in routes["s1"]]
    with pytest.raises(ValueError, match="routing loop toward h5"):
        trace(topo, looped, "h1", "h5")
    missing = {s: [r for r in rs if r.host != "h6"] for s, rs in routes.items()}
    with pytest.raises(ValueError, match="s2 has no route to h6"):
        trace(topo, missing, "h1", "h6")
