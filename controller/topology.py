"""Topology model: the YAML topology files, validated, with every derived detail fixed.

Both the testbed (which builds the Mininet network) and the controller (which installs
routes and trees) read the same `Topology`, so port numbers, interface names, addresses
and device ids are derived here once, deterministically:

- host i (1-based position in `hosts`) gets IP 10.0.(i >> 8).(i & 255) in 10.0.0.0/16 and
  MAC 00:00:00:00:(i >> 8):(i & 255), unless the file gives `ip` / `mac`;
- switch i gets device id i and gRPC port 9559 + device id (outside the kernel's ephemeral port range,
  so no client socket can hold it), unless the file gives them;
- each switch numbers its ports from 1 in the order its links appear in `links`
  (interface `s1-eth1`); a host has one link, on port 0 (interface `h1-eth0`).

The file format is documented in topologies/README.md.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any

import networkx as nx

from controller.yaml_file import read_yaml

HOST_PREFIX_LEN = 16
GRPC_PORT_BASE = 9559  # P4Runtime's IANA port; below the ephemeral range (32768-60999), so a client socket never takes it
DEFAULT_SLOTS = 1024
IFNAMSIZ = 15  # Linux interface names are at most 15 characters

_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")

_TOP_KEYS = {"name", "hosts", "switches", "links"}
_HOST_KEYS = {"name", "ip", "mac"}
_SWITCH_KEYS = {"name", "device_id", "grpc_port", "slots"}
_LINK_KEYS = {"a", "b", "bw_mbps", "delay_ms", "loss", "queue_pkts"}


class TopologyError(ValueError):
    """A topology file is malformed; the message is one line naming the file and field."""

    exit_code = 2


@dataclass(frozen=True)
class Host:
    name: str
    ip: str
    mac: str

    @property
    def ip_cidr(self) -> str:
        """The address with its prefix, as Mininet and `ip addr` want it."""
        return f"{self.ip}/{HOST_PREFIX_LEN}"


@dataclass(frozen=True)
class Switch:
    name: str
    device_id: int
    grpc_port: int
    slots: int  # aggregation slot budget shared by all jobs placed on this switch


@dataclass(frozen=True)
class Link:
    a: str
    b: str
    a_port: int
    b_port: int
    bw_mbps: float | None = None
    delay_ms: float | None = None
    loss: float | None = None  # percent, 0..100 (Mininet's TCLink convention)
    queue_pkts: int | None = None

    def port_on(self, node: str) -> int:
        """This link's port number on `node` (one of its two ends)."""
        return self.a_port if node == self.a else self.b_port

    def other(self, node: str) -> str:
        """The node at the other end from `node`."""
        return self.b if node == self.a else self.a


@dataclass(frozen=True)
class Topology:
    name: str
    source: str
    hosts: dict[str, Host]
    switches: dict[str, Switch]
    links: tuple[Link, ...]

    def is_host(self, name: str) -> bool:
        return name in self.hosts

    def is_switch(self, name: str) -> bool:
        return name in self.switches

    def links_of(self, node: str) -> list[Link]:
        """Links touching `node`, in file order (= port order on a switch)."""
        return [link for link in self.links if node in (link.a, link.b)]

    def port_of(self, switch: str, neighbor: str) -> int:
        """The port of `switch` that faces `neighbor`."""
        for link in self.links_of(switch):
            if link.other(switch) == neighbor:
                return link.port_on(switch)
        raise KeyError(f"{self.source}: no link between '{switch}' and '{neighbor}'")

    def neighbor_on(self, switch: str, port: int) -> str:
        """The node attached to `port` of `switch`."""
        for link in self.links_of(switch):
            if link.port_on(switch) == port:
                return link.other(switch)
        raise KeyError(f"{self.source}: switch '{switch}' has no port {port}")

    def link_between(self, a: str, b: str) -> Link:
        for link in self.links_of(a):
            if link.other(a) == b:
                return link
        raise KeyError(f"{self.source}: no link between '{a}' and '{b}'")

    def switch_of(self, host: str) -> str:
        """The switch a (single-homed) host hangs off."""
        return self.links_of(host)[0].other(host)

    def hosts_of(self, switch: str) -> list[str]:
        """Hosts attached directly to `switch`, in port order."""
        return [link.other(switch) for link in self.links_of(switch) if link.other(switch) in self.hosts]

    @staticmethod
    def intf_name(node: str, port: int) -> str:
        """Mininet's interface naming: `s1-eth2`, `h1-eth0`."""
        return f"{node}-eth{port}"

    def graph(self) -> nx.Graph:
        """Undirected graph: nodes carry `kind` (host/switch); edges carry the Link, ports and capacity."""
        g = nx.Graph()
        for name in self.hosts:
            g.add_node(name, kind="host")
        for name in self.switches:
            g.add_node(name, kind="switch")
        for link in self.links:
            g.add_edge(link.a, link.b, link=link, capacity=link.bw_mbps,
                       ports={link.a: link.a_port, link.b: link.b_port})
        return g


def load_topology(path: str) -> Topology:
    """Read and validate a topology YAML file."""
    return parse_topology(read_yaml(path, "topology", TopologyError), path)


def parse_topology(data: Any, source: str) -> Topology:
    """Validate an already-parsed topology document; errors name `source` and the field."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: expected a mapping with hosts, switches and links")
    _reject_unknown(data, _TOP_KEYS, source, "")
    name = data.get("name", _stem(source))
    if not isinstance(name, str) or not name:
        raise TopologyError(f"{source}: name: expected a non-empty string")
    hosts_raw = _list_of_maps(data, "hosts", source)
    switches_raw = _list_of_maps(data, "switches", source)
    links_raw = _list_of_maps(data, "links", source)

    seen: dict[str, str] = {}
    hosts = _parse_hosts(hosts_raw, source, seen)
    switches = _parse_switches(switches_raw, source, seen)
    links = _parse_links(links_raw, source, hosts, switches)
    topo = Topology(name=name, source=source, hosts=hosts, switches=switches, links=links)
    _check_hosts_single_homed(topo, source)
    _check_connected(topo, source)
    return topo


def _stem(source: str) -> str:
    base = source.rsplit("/", 1)[-1]
    return base.rsplit(".", 1)[0] if "." in base else base


def _reject_unknown(entry: dict, allowed: set[str], source: str, field: str) -> None:
    unknown = sorted(str(k) for k in entry if k not in allowed)
    if unknown:
        where = f"{field}." if field else ""
        raise TopologyError(f"{source}: {where}{unknown[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")


def _list_of_maps(data: dict, key: str, source: str) -> list[dict]:
    if key not in data:
        raise TopologyError(f"{source}: {key}: missing")
    items = data[key]
    if not isinstance(items, list) or not items:
        raise TopologyError(f"{source}: {key}: expected a non-empty list")
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise TopologyError(f"{source}: {key}[{i}]: expected a mapping, got {type(item).__name__}")
    return items


def _node_name(entry: dict, field: str, source: str, seen: dict[str, str]) -> str:
    if "name" not in entry:
        raise TopologyError(f"{source}: {field}.name: missing")
    name = entry["name"]
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise TopologyError(f"{source}: {field}.name: {name!r} is not a valid name (letter, then letters/digits/_)")
    if name in seen:
        raise TopologyError(f"{source}: {field}.name: duplicate name '{name}' (also {seen[name]})")
    seen[name] = field
    return name


def _int_field(entry: dict, key: str, field: str, source: str, minimum: int) -> int | None:
    if key not in entry:
        return None
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise TopologyError(f"{source}: {field}.{key}: expected an integer, got {value!r}")
    if value < minimum:
        raise TopologyError(f"{source}: {field}.{key}: must be >= {minimum}, got {value}")
    return value


def _num_field(entry: dict, key: str, field: str, source: str, maximum: float | None = None,
               positive: bool = False) -> float | None:
    if key not in entry:
        return None
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TopologyError(f"{source}: {field}.{key}: expected a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise TopologyError(f"{source}: {field}.{key}: must be {'positive' if positive else '>= 0'}, got {value}")
    if maximum is not None and value > maximum:
        raise TopologyError(f"{source}: {field}.{key}: must be <= {maximum}, got {value}")
    return float(value)


def _parse_hosts(items: list[dict], source: str, seen: dict[str, str]) -> dict[str, Host]:
    hosts: dict[str, Host] = {}
    ips: dict[str, str] = {}
    macs: dict[str, str] = {}
    for i, entry in enumerate(items, start=1):
        field = f"hosts[{i - 1}]"
        _reject_unknown(entry, _HOST_KEYS, source, field)
        name = _node_name(entry, field, source, seen)
        ip = entry.get("ip", f"10.0.{i >> 8}.{i & 255}")
        try:
            ip = str(ipaddress.IPv4Address(ip))
        except (ValueError, TypeError):
            raise TopologyError(f"{source}: {field}.ip: {ip!r} is not an IPv4 address") from None
        mac = entry.get("mac", f"00:00:00:00:{i >> 8:02x}:{i & 255:02x}")
        if not isinstance(mac, str) or not _MAC_RE.match(mac):
            raise TopologyError(f"{source}: {field}.mac: {mac!r} is not a MAC address like 00:00:00:00:00:01")
        mac = mac.lower()
        for key, value, used in (("ip", ip, ips), ("mac", mac, macs)):
            if value in used:
                raise TopologyError(f"{source}: {field}.{key}: {value} already used by host '{used[value]}'")
            used[value] = name
        hosts[name] = Host(name=name, ip=ip, mac=mac)
    return hosts


def _parse_switches(items: list[dict], source: str, seen: dict[str, str]) -> dict[str, Switch]:
    switches: dict[str, Switch] = {}
    ids: dict[int, str] = {}
    grpc_ports: dict[int, str] = {}
    for i, entry in enumerate(items, start=1):
        field = f"switches[{i - 1}]"
        _reject_unknown(entry, _SWITCH_KEYS, source, field)
        name = _node_name(entry, field, source, seen)
        device_id = _int_field(entry, "device_id", field, source, 0)
        device_id = i if device_id is None else device_id
        grpc_port = _int_field(entry, "grpc_port", field, source, 1)
        grpc_port = GRPC_PORT_BASE + device_id if grpc_port is None else grpc_port
        if grpc_port > 65535:
            raise TopologyError(f"{source}: {field}.grpc_port: {grpc_port} is not a TCP port")
        slots = _int_field(entry, "slots", field, source, 0)
        for key, value, used in (("device_id", device_id, ids), ("grpc_port", grpc_port, grpc_ports)):
            if value in used:
                raise TopologyError(f"{source}: {field}.{key}: {value} already used by switch '{used[value]}'")
            used[value] = name
        switches[name] = Switch(name=name, device_id=device_id, grpc_port=grpc_port,
                                slots=DEFAULT_SLOTS if slots is None else slots)
    return switches


def _parse_links(items: list[dict], source: str, hosts: dict[str, Host],
                 switches: dict[str, Switch]) -> tuple[Link, ...]:
    next_port = {name: 1 for name in switches}
    pairs: dict[frozenset[str], int] = {}
    links = []
    for i, entry in enumerate(items):
        field = f"links[{i}]"
        _reject_unknown(entry, _LINK_KEYS, source, field)
        ends = []
        for key in ("a", "b"):
            if key not in entry:
                raise TopologyError(f"{source}: {field}.{key}: missing")
            node = entry[key]
            if not isinstance(node, str) or (node not in hosts and node not in switches):
                raise TopologyError(f"{source}: {field}.{key}: unknown node {node!r}")
            ends.append(node)
        a, b = ends
        if a == b:
            raise TopologyError(f"{source}: {field}: self-link on '{a}'")
        if a in hosts and b in hosts:
            raise TopologyError(f"{source}: {field}: links two hosts ('{a}', '{b}'); hosts attach to switches")
        pair = frozenset(ends)
        if pair in pairs:
            raise TopologyError(f"{source}: {field}: duplicate link {a}-{b} (also links[{pairs[pair]}])")
        pairs[pair] = i
        ports = []
        for node in ends:
            port = 0 if node in hosts else next_port[node]
            if node in switches:
                next_port[node] += 1
            intf = Topology.intf_name(node, port)
            if len(intf) > IFNAMSIZ:
                raise TopologyError(f"{source}: {field}: interface name '{intf}' is longer than {IFNAMSIZ} characters")
            ports.append(port)
        links.append(Link(
            a=a, b=b, a_port=ports[0], b_port=ports[1],
            bw_mbps=_num_field(entry, "bw_mbps", field, source, positive=True),
            delay_ms=_num_field(entry, "delay_ms", field, source),
            loss=_num_field(entry, "loss", field, source, maximum=100.0),
            queue_pkts=_int_field(entry, "queue_pkts", field, source, 1),
        ))
    return tuple(links)


def _check_hosts_single_homed(topo: Topology, source: str) -> None:
    for i, name in enumerate(topo.hosts):
        count = len(topo.links_of(name))
        if count != 1:
            problem = "has no link" if count == 0 else f"has {count} links; hosts are single-homed"
            raise TopologyError(f"{source}: hosts[{i}]: host '{name}' {problem}")


def _check_connected(topo: Topology, source: str) -> None:
    g = topo.graph()
    first = next(iter(topo.switches or topo.hosts))
    reached = nx.node_connected_component(g, first)
    for name in list(topo.hosts) + list(topo.switches):
        if name not in reached:
            raise TopologyError(f"{source}: node '{name}' is not connected to '{first}'")
