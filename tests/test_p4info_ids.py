"""P4Info ids and aliases follow p4c's scheme.

Expected ids come from P4Info files published with p4c's own output: the p4lang/tutorials
basic_tunnel exercise (MyIngress.*), p4c's testdata outputs for basic_routing-bmv2.p4 and
flowlet_switching-bmv2.p4 (ingress.* / egress.*), and controller headers from published
P4Infos (the id hashes the header *type* name, the preamble shows the annotation name).
"""
import pytest

from p4target.errors import P4Error
from p4target.p4info import (
    ACTION,
    CONTROLLER_HEADER,
    COUNTER,
    REGISTER,
    TABLE,
    Symbol,
    assign_ids,
    compute_aliases,
    jenkins_hash,
)

PUBLISHED = [
    (ACTION, "NoAction", 21257015),
    (TABLE, "MyIngress.ipv4_lpm", 37375156),
    (TABLE, "MyIngress.myTunnel_exact", 35862311),
    (ACTION, "MyIngress.ipv4_forward", 28792405),
    (ACTION, "MyIngress.drop", 25652968),
    (ACTION, "MyIngress.myTunnel_ingress", 24181246),
    (ACTION, "MyIngress.myTunnel_forward", 27454791),
    (ACTION, "MyIngress.myTunnel_egress", 33029817),
    (COUNTER, "MyIngress.ingressTunnelCounter", 315557958),
    (COUNTER, "MyIngress.egressTunnelCounter", 312374841),
    (TABLE, "ingress.bd", 48392551),
    (TABLE, "ingress.ipv4_fib", 41084491),
    (TABLE, "ingress.ipv4_fib_lpm", 42875950),
    (TABLE, "ingress.nexthop", 43581057),
    (TABLE, "ingress.port_mapping", 39645634),
    (TABLE, "egress.rewrite_mac", 40309161),
    (ACTION, "ingress.set_vrf", 33505590),
    (ACTION, "ingress.on_miss", 22594144),
    (ACTION, "egress.on_miss", 28864280),
    (ACTION, "egress.rewrite_src_dst_mac", 28966416),
    (REGISTER, "ingress.flowlet_id", 384519412),
    (REGISTER, "ingress.flowlet_lasttime", 375147533),
    (CONTROLLER_HEADER, "packet_in_header_t", 81826293),
    (CONTROLLER_HEADER, "packet_in_t", 80671331),
    (CONTROLLER_HEADER, "packet_out_t", 75327753),
]


def test_jenkins_one_at_a_time_known_values():
    assert jenkins_hash("") == 0
    assert (jenkins_hash("NoAction") & 0xFFFFFF) | (ACTION << 24) == 21257015


@pytest.mark.parametrize("prefix,name,expected", PUBLISHED)
def test_ids_match_published_p4c_output(prefix, name, expected):
    ids = assign_ids([Symbol(prefix, name)])
    assert ids[(prefix, name)] == expected


def test_whole_program_ids_do_not_depend_on_declaration_order():
    symbols = [Symbol(p, n) for p, n, _ in PUBLISHED]
    forward = assign_ids(symbols)
    backward = assign_ids(list(reversed(symbols)))
    assert forward == backward
    assert forward == {(p, n): i for p, n, i in PUBLISHED}


def test_explicit_id_gets_type_prefix_and_wins():
    ids = assign_ids([Symbol(TABLE, "t", explicit_id=5), Symbol(ACTION, "a", explicit_id=(ACTION << 24) | 9)])
    assert ids[(TABLE, "t")] == (TABLE << 24) | 5
    assert ids[(ACTION, "a")] == (ACTION << 24) | 9


def test_collision_probes_upward():
    taken = jenkins_hash("NoAction") & 0xFFFFFF
    ids = assign_ids([Symbol(ACTION, "NoAction"), Symbol(ACTION, "squatter", explicit_id=taken)])
    assert ids[(ACTION, "squatter")] == 21257015
    assert ids[(ACTION, "NoAction")] == 21257015 + 1


def test_wrong_prefix_and_duplicate_ids_are_errors():
    with pytest.raises(P4Error, match="wrong 8-bit prefix"):
        assign_ids([Symbol(TABLE, "t", explicit_id=(ACTION << 24) | 1, file="x.p4", line=3)])
    with pytest.raises(P4Error, match="x.p4:4: error: @id 7 is assigned to multiple"):
        assign_ids([Symbol(TABLE, "t", explicit_id=7), Symbol(TABLE, "u", explicit_id=7, file="x.p4", line=4)])


def test_aliases_are_shortest_unique_dotted_suffixes():
    names = ["ingress.on_miss", "egress.on_miss", "ingress.set_vrf", "NoAction", "ingress.bd",
             "a.b.c", "b.c", "x.d.c"]
    aliases = compute_aliases(names)
    assert aliases["ingress.on_miss"] == "ingress.on_miss"  # as p4c's basic_routing output shows
    assert aliases["egress.on_miss"] == "egress.on_miss"
    assert aliases["ingress.set_vrf"] == "set_vrf"
    assert aliases["NoAction"] == "NoAction"
    assert aliases["ingress.bd"] == "bd"
    assert aliases["a.b.c"] == "a.b.c"
    assert aliases["b.c"] == "b.c"  # itself a suffix of a.b.c: keeps every component
    assert aliases["x.d.c"] == "d.c"
