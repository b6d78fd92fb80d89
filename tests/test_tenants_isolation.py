"""Isolation between tenants: job B's hosts send deliberately bad aggregation packets (job A's
id from B's port, a spoofed source address, slots outside B's region, unknown job ids, forged
results) while job A aggregates. Real parts: the installer over real P4Runtime to in-process
embedded switches running aggnet.p4, packets carried through their pipelines."""
import numpy as np
import pytest
from test_installer_push import Fabric

from controller.installer import Installer, load_program
from controller.monitor import job_counters
from controller.placement import Job
from controller.tenants import IN_NETWORK, admit
from hosts import codec
from protocol import wire

AGG_IP = "10.0.255.254"


@pytest.fixture(scope="module")
def program():
    return load_program("p4src/aggnet.p4")


def forged(topo, host, job_id, slot, seq, values, flags=0, src_ip=None, workers=1):
    """An aggregation frame as `host` would put it on its wire, with any header it likes."""
    payload = codec.encode(job_id, slot, seq, flags, np.asarray([values], dtype=np.int32), workers=workers).tobytes()
    h = topo.hosts[host]
    return codec.frame(payload, h.mac, "ff:ff:ff:ff:ff:ff", src_ip or h.ip, AGG_IP, sport=wire.AGG_PORT)


def results(delivered):
    """host -> decoded agg packets it received."""
    out = {}
    for host, frame in delivered:
        out.setdefault(host, []).append(codec.decode(codec.parse_frame(frame).payload, 32)[0])
    return out


def test_job_b_cannot_change_job_a_sums_on_a_shared_switch(program):
    fabric = Fabric("topologies/star4.yaml")
    try:
        topo = fabric.topo
        # b first: its region [0, 4) sits right below a's [4, 8), so a slot past b's end would land in a's
        tenancy = admit(topo, [Job("b", ("h3", "h4"), k=0, slots=4), Job("a", ("h1", "h2"), k=0, slots=4)])
        assert [a.status for a in tenancy.admissions] == [IN_NETWORK, IN_NETWORK]
        specs, _ = Installer(topo, program, fabric.conns, agg_ip=AGG_IP).install(tenancy.in_network())
        a, b = specs["a"], specs["b"]
        assert (b.slot_base, b.slot_count, a.slot_base) == (0, 4, 4)
        rng = np.random.default_rng(7)
        for seq in range(3):
            slot = seq % a.slot_count
            va, vb = (rng.integers(-1000, 1000, (2, 32)).astype(np.int32) for _ in range(2))
            assert fabric.send("h1", forged(topo, "h1", a.job_id, slot, seq, va[0])) == []  # a's round is open
            attacks = [
                forged(topo, "h3", a.job_id, slot, seq, [10**6] * 32),  # a's id from b's port
                forged(topo, "h3", a.job_id, slot, seq, [10**6] * 32, src_ip=topo.hosts["h2"].ip),  # spoofed h2
                forged(topo, "h4", a.job_id, slot, seq, [10**6] * 32, flags=wire.FLAG_RESULT),  # forged result
                forged(topo, "h3", b.job_id, b.slot_count + slot, seq, [10**6] * 32),  # past b's region: a's slot
                forged(topo, "h3", b.job_id, 0xFFFF, seq, [10**6] * 32),
                forged(topo, "h4", 0, slot, seq, [10**6] * 32),  # unknown job ids: plain IPv4, no route
                forged(topo, "h4", 999, slot, seq, [10**6] * 32),
            ]
            for frame in attacks:
                assert fabric.send("h3", frame) == []
            # b aggregates in its own region meanwhile, unaffected by its own bad packets
            got_b = results(fabric.send("h3", forged(topo, "h3", b.job_id, slot, seq, vb[0]))
                            + fabric.send("h4", forged(topo, "h4", b.job_id, slot, seq, vb[1])))
            got_a = results(fabric.send("h2", forged(topo, "h2", a.job_id, slot, seq, va[1])))
            for got, spec, want in ((got_a, a, va), (got_b, b, vb)):
                assert sorted(got) == [w.name for w in spec.workers]
                for (pkt,) in got.values():
                    assert pkt["job_id"] == spec.job_id and pkt["workers"] == 2 and pkt["seq"] == seq
                    assert np.array_equal(pkt["values"], want.astype(np.int64).sum(axis=0))
        conn = fabric.conns["s1"]
        # a counted the 3 packets carrying its id from b's hosts, but added only its own 2 per round
        assert job_counters(conn, a.job_id) == {"received": 3 * 5, "aggregated": 3 * 2, "completed": 3,
                                                "duplicates": 3, "retx_answered": 0, "overflows": 0, "spilled": 0}
        assert job_counters(conn, b.job_id) == {"received": 3 * 4, "aggregated": 3 * 2, "completed": 3,
                                                "duplicates": 0, "retx_answered": 0, "overflows": 0, "spilled": 0}
        for unknown in (0, 999):
            assert job_counters(conn, unknown)["received"] == 0
    finally:
        fabric.close()


def test_forwarding_leaf_admits_a_job_only_from_its_own_ports(program):
    """k=0 on leaf-spine: the leaves only forward, and each carries one host of the other job."""
    fabric = Fabric("topologies/leafspine.yaml")
    try:
        topo = fabric.topo
        tenancy = admit(topo, [Job("a", ("h1", "h3"), k=0, slots=4), Job("b", ("h2", "h4"), k=0, slots=4)])
        installer = Installer(topo, program, fabric.conns, agg_ip=AGG_IP)
        specs, _ = installer.install(tenancy.in_network())
        a, b = specs["a"], specs["b"]
        root = installer.plans["a"].tree.root
        assert "s3" not in installer.plans["a"].aggregators and "s4" not in installer.plans["a"].aggregators
        # the forwarding leaf knows job a on h1's port only
        children = [e for e in fabric.entries("s3", "AggIngress.agg_child") if e.match["hdr.agg.job_id"] == a.job_id]
        assert [e.match["standard_metadata.ingress_port"] for e in children] == [topo.port_of("s3", "h1")]
        rng = np.random.default_rng(3)
        for seq in range(2):
            slot = seq % a.slot_count
            va, vb = (rng.integers(-1000, 1000, (2, 32)).astype(np.int32) for _ in range(2))
            attacks = [
                forged(topo, "h2", a.job_id, slot, seq, [123] * 32, flags=wire.FLAG_RESULT, workers=a.world_size),
                forged(topo, "h2", a.job_id, slot, seq, [10**6] * 32),  # a contribution for a from b's host
                forged(topo, "h2", a.job_id, slot, seq, [10**6] * 32, src_ip=topo.hosts["h1"].ip),  # spoofing h1
            ]
            for frame in attacks:
                assert fabric.send("h2", frame) == []  # dropped at the leaf, not just short of h1
            got_a = results(fabric.send("h1", forged(topo, "h1", a.job_id, slot, seq, va[0]))
                            + fabric.send("h3", forged(topo, "h3", a.job_id, slot, seq, va[1])))
            got_b = results(fabric.send("h2", forged(topo, "h2", b.job_id, slot, seq, vb[0]))
                            + fabric.send("h4", forged(topo, "h4", b.job_id, slot, seq, vb[1])))
            for got, spec, want in ((got_a, a, va), (got_b, b, vb)):
                assert sorted(got) == [w.name for w in spec.workers]
                for (pkt,) in got.values():
                    assert pkt["job_id"] == spec.job_id and pkt["workers"] == 2 and pkt["seq"] == seq
                    assert np.array_equal(pkt["values"], want.astype(np.int64).sum(axis=0))
        # a's aggregator saw exactly its two workers' packets per round: nothing forged got that far
        counters = job_counters(fabric.conns[root], a.job_id)
        assert (counters["received"], counters["aggregated"], counters["duplicates"]) == (2 * 2, 2 * 2, 0)
    finally:
        fabric.close()
