"""Topology files: shipped files load with the documented derived values; bad files give one-line errors."""
from __future__ import annotations

import glob
import os

import pytest

from controller.topology import TopologyError, load_topology, parse_topology

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOPO_DIR = os.path.join(ROOT, "topologies")


def topo_path(name: str) -> str:
    return os.path.join(TOPO_DIR, name)


def minimal() -> dict:
    return {
        "hosts": [{"name": "h1"}, {"name": "h2"}],
        "switches": [{"name": "s1"}],
        "links": [{"a": "h1", "b": "s1", "bw_mbps": 100}, {"a": "h2", "b": "s1"}],
    }


def test_minimal_shape_from_the_issue_derives_addresses_ports_ids():
    topo = parse_topology(minimal(), "inline.yaml")
    assert topo.name == "inline"
    assert topo.hosts["h1"].ip == "10.0.0.1" and topo.hosts["h2"].ip == "10.0.0.2"
    assert topo.hosts["h2"].mac == "00:00:00:00:00:02"
    assert topo.hosts["h1"].ip_cidr == "10.0.0.1/16"
    s1 = topo.switches["s1"]
    assert (s1.device_id, s1.grpc_port, s1.slots) == (1, 9560, 1024)
    assert topo.port_of("s1", "h1") == 1 and topo.port_of("s1", "h2") == 2
    assert topo.neighbor_on("s1", 2) == "h2"
    assert topo.port_of("h1", "s1") == 0
    assert topo.intf_name("s1", 2) == "s1-eth2"
    assert topo.links[0].bw_mbps == 100 and topo.links[1].bw_mbps is None
    assert topo.switch_of("h2") == "s1"
    assert topo.hosts_of("s1") == ["h1", "h2"]


def test_explicit_extras_are_kept():
    data = minimal()
    data["name"] = "mine"
    data["hosts"][0].update(ip="192.168.1.7", mac="AA:BB:CC:DD:EE:FF")
    data["switches"][0].update(device_id=9, grpc_port=9559, slots=16)
    data["links"][0].update(delay_ms=2, loss=1.5, queue_pkts=64)
    topo = parse_topology(data, "x.yaml")
    assert topo.name == "mine"
    assert topo.hosts["h1"].ip == "192.168.1.7" and topo.hosts["h1"].mac == "aa:bb:cc:dd:ee:ff"
    assert topo.switches["s1"] == topo.switches["s1"].__class__("s1", 9, 9559, 16)
    link = topo.links[0]
    assert (link.delay_ms, link.loss, link.queue_pkts) == (2.0, 1.5, 64)


def test_host_ip_scheme_past_254_hosts():
    data = {"hosts": [{"name": f"h{i}"} for i in range(1, 301)], "switches": [{"name": "s1"}],
            "links": [{"a": f"h{i}", "b": "s1"} for i in range(1, 301)]}
    topo = parse_topology(data, "big.yaml")
    assert topo.hosts["h255"].ip == "10.0.0.255"
    assert topo.hosts["h256"].ip == "10.0.1.0"
    assert topo.hosts["h300"].mac == "00:00:00:00:01:2c"
    assert len({h.ip for h in topo.hosts.values()}) == 300


@pytest.mark.parametrize("name,hosts,switches,links", [
    ("star4.yaml", 4, 1, 4),
    ("star8.yaml", 8, 1, 8),
    ("star9.yaml", 9, 1, 9),
    ("star17.yaml", 17, 1, 17),
    ("tree2.yaml", 8, 3, 10),
    ("leafspine.yaml", 8, 6, 16),
    ("leafspine12.yaml", 12, 6, 20),
    ("fattree4.yaml", 16, 20, 48),
    ("fattree8.yaml", 128, 80, 384),
])
def test_shipped_topologies_load(name, hosts, switches, links):
    topo = load_topology(topo_path(name))
    assert (len(topo.hosts), len(topo.switches), len(topo.links)) == (hosts, switches, links)
    g = topo.graph()
    assert g.number_of_nodes() == hosts + switches and g.number_of_edges() == links
    for sw in topo.switches:  # ports are 1..n with no gaps, and port_of/neighbor_on agree
        ports = sorted(link.port_on(sw) for link in topo.links_of(sw))
        assert ports == list(range(1, len(ports) + 1))
        for port in ports:
            assert topo.port_of(sw, topo.neighbor_on(sw, port)) == port


def test_every_shipped_file_is_covered():
    shipped = sorted(os.path.basename(p) for p in glob.glob(os.path.join(TOPO_DIR, "*.yaml")))
    assert shipped == ["fattree4.yaml", "fattree8.yaml", "leafspine.yaml", "leafspine12.yaml", "star17.yaml", "star4.yaml",
                       "star8.yaml", "star9.yaml", "tree2.yaml"]


def mutate(fn) -> dict:
    data = minimal()
    fn(data)
    return data


@pytest.mark.parametrize("data,message", [
    (mutate(lambda d: d["links"][1].update(b="s9")), "x.yaml: links[1].b: unknown node 's9'"),
    (mutate(lambda d: d["hosts"].append({"name": "s1"})), "x.yaml: switches[0].name: duplicate name 's1' (also hosts[2])"),
    (mutate(lambda d: d["hosts"][0].pop("name")), "x.yaml: hosts[0].name: missing"),
    (mutate(lambda d: d["links"][0].update(bw_mbps=-5)), "x.yaml: links[0].bw_mbps: must be positive, got -5"),
    (mutate(lambda d: d["links"][0].update(bw_mbps="fast")), "x.yaml: links[0].bw_mbps: expected a number"),
    (mutate(lambda d: d["links"].append({"a": "s1", "b": "s1"})), "x.yaml: links[2]: self-link on 's1'"),
    (mutate(lambda d: d["links"].append({"a": "h1", "b": "s1"})), "x.yaml: links[2]: duplicate link h1-s1"),
    (mutate(lambda d: (d["switches"].append({"name": "s2"}), d["links"].append({"a": "h1", "b": "s2"}))),
     "x.yaml: hosts[0]: host 'h1' has 2 links; hosts are single-homed"),
    (mutate(lambda d: d["links"].append({"a": "h1", "b": "h2"})), "x.yaml: links[2]: links two hosts"),
    (mutate(lambda d: d["links"][0].update(color="red")), "x.yaml: links[0].color: unknown key (allowed: a, b,"),
    (mutate(lambda d: d.update(extra=1)), "x.yaml: extra: unknown key"),
    (mutate(lambda d: d["switches"][0].update(device_id="1")), "x.yaml: switches[0].device_id: expected an integer"),
    (mutate(lambda d: d["hosts"][1].update(ip="10.0.0.1")), "x.yaml: hosts[1].ip: 10.0.0.1 already used by host 'h1'"),
    (mutate(lambda d: d["hosts"][1].update(mac="nope")), "x.yaml: hosts[1].mac: 'nope' is not a MAC address"),
    (mutate(lambda d: d["links"][0].update(loss=150)), "x.yaml: links[0].loss: must be <= 100.0"),
    (mutate(lambda d: d["hosts"].append({"name": "h3"})), "x.yaml: hosts[2]: host 'h3' has no link"),
    (mutate(lambda d: d.pop("links")), "x.yaml: links: missing"),
    (mutate(lambda d: d.update(hosts="h1")), "x.yaml: hosts: expected a non-empty list"),
    (mutate(lambda d: d["switches"].append({"name": "s2"})), "x.yaml: node 's2' is not connected to 's1'"),
    (mutate(lambda d: (d["switches"][0].update(name="averylongname1"),
                       d["links"][0].update(b="averylongname1"), d["links"][1].update(b="averylongname1"))),
     "x.yaml: links[0]: interface name 'averylongname1-eth1' is longer than 15 characters"),
    ([1, 2], "x.yaml: expected a mapping"),
])
def test_bad_topologies_give_one_line_errors(data, message):
    with pytest.raises(TopologyError) as info:
        parse_topology(data, "x.yaml")
    text = str(info.value)
    assert text.startswith(message), text
    assert "\n" not in text
    assert info.value.exit_code == 2


def test_load_reports_yaml_syntax_error_with_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("hosts:\n  - {name: h1\nswitches: []\n")
    with pytest.raises(TopologyError) as info:
        load_topology(str(bad))
    assert str(info.value).startswith(f"{bad}:") and "YAML error" in str(info.value)


def test_load_reports_missing_file(tmp_path):
    with pytest.raises(TopologyError, match="cannot read topology"):
        load_topology(str(tmp_path / "nope.yaml"))
