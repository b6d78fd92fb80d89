"""Contention awareness: congestion detection from two samples, the move decision, and one round
of the loop against in-process P4Runtime switches (real installer, real aggnet.p4 pipelines)."""
import dataclasses

import numpy as np
import pytest
from test_installer_push import Fabric

from controller.adapt import Adapter, PortSample, congested_links, decide, tree_links
from controller.installer import AGG_JOB, Installer, load_program
from controller.placement import Job, place_jobs
from controller.topology import load_topology
from hosts import codec
from protocol import wire

AGG_IP = "10.0.255.254"


@pytest.fixture
def leafspine():
    return load_topology("topologies/leafspine.yaml")


def leaf_rooted(topo, *jobs):
    """Jobs rooted at a leaf switch: the spine between their leaves is only a path."""
    return place_jobs(topo, [Job(name, workers, root=root, k=0, slots=4) for name, workers, root in jobs])


def test_job_moves_to_the_other_spine_and_back(leafspine):
    (a,) = leaf_rooted(leafspine, ("a", ("h1", "h3"), "s3"))
    assert tree_links(a.tree) == ["s1-s3", "s4-s1"]
    new, moves = decide(leafspine, [a], ["s4-s1"])
    assert [m.job for m in moves] == ["a"] and moves[0].avoided == ("s4-s1",)
    assert tree_links(new[0].tree) == ["s2-s3", "s4-s2"]
    assert moves[0].describe() == "job a: moved off s4-s1: tree links s1-s3, s4-s1 -> s2-s3, s4-s2"
    # congestion switches to the other spine (either direction of a link counts): back to s1
    back, moves = decide(leafspine, new, ["s2-s4"])
    assert tree_links(back[0].tree) == ["s1-s3", "s4-s1"] and moves[0].avoided == ("s4-s2",)


def test_no_move_when_unaffected_or_nowhere_better(leafspine):
    jobs = leaf_rooted(leafspine, ("a", ("h1", "h3"), "s3"))
    assert decide(leafspine, jobs, ["s5-s1", "s6-s2"]) == (jobs, [])
    assert decide(leafspine, jobs, ["s4-s1", "s4-s2"]) == (jobs, [])  # both spines hot: no gain


def test_a_job_rooted_on_the_spine_keeps_its_root(leafspine):
    # root s1: the hot link s3-s1 is on every shortest path to the root, which must not move
    jobs = place_jobs(leafspine, [Job("a", ("h1", "h3"), k=0, slots=4)])
    assert jobs[0].tree.root == "s1"
    assert decide(leafspine, jobs, ["s3-s1"]) == (jobs, [])


def test_only_the_job_on_the_hot_link_moves(leafspine):
    jobs = leaf_rooted(leafspine, ("a", ("h1", "h3"), "s3"), ("b", ("h5", "h7"), "s5"))
    assert tree_links(jobs[1].tree) == ["s1-s5", "s6-s1"]  # no link in common with a
    new, moves = decide(leafspine, jobs, ["s6-s1"])
    assert [m.job for m in moves] == ["b"] and tree_links(new[1].tree) == ["s2-s5", "s6-s2"]
    assert new[0] is jobs[0]


def test_congestion_from_rate_or_queue_depth(leafspine):
    def s(t, tx, q=0, rate=None):
        return PortSample(t, tx, q, rate)
    p41, p42, p31 = leafspine.port_of("s4", "s1"), leafspine.port_of("s4", "s2"), leafspine.port_of("s3", "s1")
    before = {("s4", p41): s(0, 0), ("s4", p42): s(0, 0, rate=2e6), ("s3", p31): s(0, 0)}
    after = {("s4", p41): s(1, 11_250_000),  # 90 Mb/s on a 100 Mb/s link
             ("s4", p42): s(1, 150_000, rate=2e6),  # 1.2 Mb/s of a 2 Mb/s shaped queue: 60 %
             ("s3", p31): s(1, 1000, q=40)}  # a queue building up
    hot = congested_links(leafspine, before, after)
    assert [(c.link, c.utilization, c.qdepth) for c in hot] == [("s4-s1", 0.9, 0), ("s3-s1", 0.0, 40)]
    assert [c.link for c in congested_links(leafspine, before, after, util_threshold=0.5)] == \
        ["s4-s1", "s4-s2", "s3-s1"]


def test_adapter_round_moves_the_installed_tree_and_sums_stay_exact():
    program = load_program("p4src/aggnet.p4")
    fabric = Fabric("topologies/leafspine.yaml")
    try:
        # slow trunks (0.1 Mb/s) so a burst of frames from the test saturates one
        fabric.topo = dataclasses.replace(fabric.topo, links=tuple(
            dataclasses.replace(link, bw_mbps=0.1) for link in fabric.topo.links))
        topo = fabric.topo
        jobs = leaf_rooted(topo, ("a", ("h1", "h3"), "s3"))
        installer = Installer(topo, program, fabric.conns, agg_ip=AGG_IP)
        specs, _ = installer.install(jobs)
        adapter = Adapter(topo, installer, jobs, util_threshold=0.5)
        assert adapter.step() == []  # the first sample has nothing to compare with
        spec = specs["a"]
        h3 = topo.hosts["h3"]
        for _ in range(200):  # h3's contributions cross s4 -> s1 (duplicates after the first)
            payload = codec.encode(spec.job_id, 0, 0, 0, np.zeros((1, 32), dtype=np.int32)).tobytes()
            fabric.send("h3", codec.frame(payload, h3.mac, "ff:ff:ff:ff:ff:ff", h3.ip, AGG_IP, wire.AGG_PORT))
        moves = adapter.step()
        assert adapter.samples == 2
        assert [m.job for m in moves] == ["a"] and tree_links(installer.plans["a"].tree) == ["s2-s3", "s4-s2"]
        assert adapter.events[0]["avoided"] == ["s1-s3", "s4-s1"] and adapter.events[0]["job"] == "a"
        assert fabric.entries("s1", AGG_JOB) == [] and len(fabric.entries("s2", AGG_JOB)) == 1
        # chunk 0 was left half done at s3 by the burst (h3's copy only): h1 completes it through the new path
        rng = np.random.default_rng(3)
        for seq in range(1, 4):
            vals = {h: rng.integers(-999, 999, 32).astype(np.int32) for h in ("h1", "h3")}
            got = []
            for h in ("h1", "h3"):
                host = topo.hosts[h]
                payload = codec.encode(spec.job_id, seq % spec.slot_count, seq, 0, vals[h][None, :]).tobytes()
                got += fabric.send(h, codec.frame(payload, host.mac, "ff:ff:ff:ff:ff:ff", host.ip, AGG_IP,
                                               wire.AGG_PORT))
            assert sorted(h for h, _ in got) == ["h1", "h3"]
            for _, frame in got:
                pkt = codec.decode(codec.parse_frame(frame).payload, 32)[0]
                assert np.array_equal(pkt["values"], vals["h1"].astype(np.int64) + vals["h3"])
    finally:
        fabric.close()
