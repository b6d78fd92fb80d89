"""aggnet.p4 on the embedded target: sums, duplicates, retransmissions, pools, overflow, jobs, trees."""

import fabric as fb
import numpy as np
import pytest

from hosts import codec
from p4target import state as st
from protocol import wire

INT_MAX, INT_MIN = 2**31 - 1, -2**31


def rand_values(rng, n, lanes=32, bound=2**26):
    return rng.integers(-bound, bound, size=(n, lanes)).astype(np.int32)


@pytest.mark.parametrize("children", [2, 4, 8])
def test_children_sum_exactly(children):
    rng = np.random.default_rng(children)
    sw = fb.star(children)
    vals = rand_values(rng, children)
    outs = []
    for h in range(1, children + 1):
        outs = fb.send(sw, h, fb.packet(1, 3, 42, vals[h - 1], src=h))
        if h < children:
            assert outs == []  # held in the slot until the last child arrives
    assert sorted(o.port for o in outs) == list(range(1, children + 1))
    for o in outs:
        assert o.values == vals.astype(np.int64).sum(axis=0).tolist()
        assert o.flag(wire.FLAG_RESULT) and not o.flag(wire.FLAG_OVERFLOW)
        assert int(o.agg["workers"]) == children and int(o.agg["seq"]) == 42 and int(o.agg["slot"]) == 3
        # re-addressed to the host on that port, so its UDP socket accepts it, and sent from the
        # aggregation address, never from the worker whose contribution completed the chunk
        assert (o.frame.dst_ip, o.frame.dst_mac, o.frame.dport) == (fb.host_ip(o.port), fb.host_mac(o.port), 48864)
        assert (o.frame.src_ip, o.frame.src_mac) == (fb.AGG_IP, fb.SWITCH_MAC)
    assert fb.counter(sw, "received") == fb.counter(sw, "aggregated") == children
    assert fb.counter(sw, "completed") == 1 and fb.counter(sw, "duplicates") == 0
    assert sw.state.counter_read("AggIngress.port_rx", 1) == (1, 186)
    assert sw.state.counter_read("AggEgress.port_tx", 1) == (1, 186)


def test_duplicate_contribution_is_ignored():
    sw = fb.star(3)
    assert fb.send(sw, 1, fb.packet(1, 0, 0, [5], src=1)) == []
    assert fb.send(sw, 1, fb.packet(1, 0, 0, [5], src=1, retx=True)) == []
    assert fb.send(sw, 2, fb.packet(1, 0, 0, [7], src=2)) == []
    outs = fb.send(sw, 3, fb.packet(1, 0, 0, [11], src=3))
    assert {o.values[0] for o in outs} == {23}  # 5 counted once
    assert fb.counter(sw, "duplicates") == 1 and fb.counter(sw, "aggregated") == 3


def test_retransmission_after_completion_gets_stored_result():
    sw = fb.star(2)
    fb.send(sw, 1, fb.packet(1, 1, 9, [1, 2], src=1))
    first = fb.send(sw, 2, fb.packet(1, 1, 9, [10, 20], src=2))
    assert len(first) == 2
    again = fb.send(sw, 2, fb.packet(1, 1, 9, [10, 20], src=2, retx=True))
    assert [o.port for o in again] == [2]  # only to the asker
    o = again[0]
    assert o.values[:2] == [11, 22] and o.flag(wire.FLAG_RESULT) and o.flag(wire.FLAG_RETX)
    assert (o.frame.dst_ip, int(o.agg["workers"])) == (fb.host_ip(2), 2)
    assert (o.frame.src_ip, o.frame.src_mac) == (fb.AGG_IP, fb.SWITCH_MAC)  # not host 2 itself
    assert fb.counter(sw, "retx_answered") == 1 and fb.counter(sw, "completed") == 1


def test_slot_reuse_alternates_pools():
    window = 2
    sw = fb.star(2, slot_count=window)
    slow_retx = None
    for g in range(6):  # chunks 0..5 -> slots 0,1,0,1,0,1 and pools 0,0,1,1,0,0
        slot, pool = g % window, (g // window) % 2
        assert fb.send(sw, 1, fb.packet(1, slot, g, [g, 100 * g], pool=pool, src=1)) == []
        outs = fb.send(sw, 2, fb.packet(1, slot, g, [1, 1], pool=pool, src=2))
        assert {tuple(o.values[:2]) for o in outs} == {(g + 1, 100 * g + 1)}
        assert {int(o.agg["seq"]) for o in outs} == {g} and all(o.agg["flags"] & 0x80 == pool << 7 for o in outs)
        if g == 3:
            # host 2 asks again for chunk 2 (slot 0, pool 1) after chunk 3 went through: the
            # stored result is still there (chunk 4 cannot reuse that pool before host 2 has it).
            slot, pool = 0, 1
            slow_retx = fb.send(sw, 2, fb.packet(1, slot, 2, [1, 1], pool=pool, src=2, retx=True))
    assert [tuple(o.values[:2]) for o in slow_retx] == [(3, 201)]
    assert fb.counter(sw, "completed") == 6


def test_retransmitted_old_result_survives_other_pool_traffic():
    sw = fb.star(2, slot_count=1)
    fb.send(sw, 1, fb.packet(1, 0, 0, [3], pool=0, src=1))
    fb.send(sw, 2, fb.packet(1, 0, 0, [4], pool=0, src=2))  # chunk 0 done; suppose host 2's result is lost
    fb.send(sw, 1, fb.packet(1, 0, 1, [50], pool=1, src=1))  # host 1 already on chunk 1 (pool 1)
    ans = fb.send(sw, 2, fb.packet(1, 0, 0, [4], pool=0, src=2, retx=True))
    assert [(o.port, o.values[0]) for o in ans] == [(2, 7)]
    outs = fb.send(sw, 2, fb.packet(1, 0, 1, [60], pool=1, src=2))
    assert {o.values[0] for o in outs} == {110}
    # chunk 2 reuses pool 0: a new round, not a duplicate of chunk 0
    fb.send(sw, 2, fb.packet(1, 0, 2, [1000], pool=0, src=2))
    outs = fb.send(sw, 1, fb.packet(1, 0, 2, [1], pool=0, src=1))
    assert {o.values[0] for o in outs} == {1001} and {int(o.agg["seq"]) for o in outs} == {2}


def test_overflow_is_flagged_and_saturates():
    sw = fb.star(2)
    fb.send(sw, 1, fb.packet(1, 0, 0, [INT_MAX, INT_MIN, INT_MAX - 5, -7], src=1))
    outs = fb.send(sw, 2, fb.packet(1, 0, 0, [1, -1, 5, 7], src=2))
    assert outs[0].values[:4] == [INT_MAX, INT_MIN, INT_MAX, 0]
    assert all(o.flag(wire.FLAG_OVERFLOW) for o in outs)
    assert fb.counter(sw, "overflows") == 1
    # the next round of the same slot starts clean
    fb.send(sw, 1, fb.packet(1, 0, 1, [INT_MAX - 1], pool=1, src=1))
    outs = fb.send(sw, 2, fb.packet(1, 0, 1, [1], pool=1, src=2))
    assert outs[0].values[0] == INT_MAX and not outs[0].flag(wire.FLAG_OVERFLOW)


def _mark_from(sw, port: int, depth: int) -> None:
    sw.state.insert_entry("AggEgress.ecn_mark", st.TableEntry(
        {"standard_metadata.egress_port": st.Exact(port)}, "AggEgress.mark_from", {"depth": depth}))


def _through(sw, port: int, data: bytes, enq_qdepth: int) -> list[fb.Out]:
    """Ingress, then egress as if `enq_qdepth` packets were queued ahead on the egress port."""
    out = []
    for item in sw.ingress(port, data):
        for p, frame in sw.egress(item, enq_qdepth):
            fr = codec.parse_frame(frame)
            out.append(fb.Out(p, frame, fr, codec.decode(fr.payload, 32)[0]))
    return out


@pytest.mark.parametrize("engine", ["python", "native"])
def test_a_marked_contribution_marks_the_result_for_every_child(engine):
    sw = fb.star(3, engine=engine)
    fb.send(sw, 1, fb.packet(1, 0, 0, [1], src=1))
    fb.send(sw, 2, fb.packet(1, 0, 0, [2], src=2, flags=wire.FLAG_ECN))  # met a deep queue below
    outs = fb.send(sw, 3, fb.packet(1, 0, 0, [3], src=3))
    assert sorted(o.port for o in outs) == [1, 2, 3] and all(o.values[0] == 6 for o in outs)
    assert all(o.flag(wire.FLAG_ECN) for o in outs)  # the mark of any contribution reaches every worker
    retx = fb.send(sw, 1, fb.packet(1, 0, 0, [1], src=1, retx=True))  # the stored result keeps it
    assert retx[0].flag(wire.FLAG_ECN) and retx[0].values[0] == 6
    for h in (1, 2, 3):  # the slot's next round starts unmarked
        outs = fb.send(sw, h, fb.packet(1, 0, 1, [h], pool=1, src=h))
    assert outs and not any(o.flag(wire.FLAG_ECN) for o in outs)


def test_ports_mark_from_their_depth_and_count_it():
    sw = fb.star(2)
    _mark_from(sw, 1, 4)
    _through(sw, 1, fb.packet(1, 0, 0, [5], src=1), 0)
    deep = _through(sw, 2, fb.packet(1, 0, 0, [7], src=2), 4)  # 4 queued ahead on both ports
    assert {o.port: (o.values[0], o.flag(wire.FLAG_ECN)) for o in deep} == {1: (12, True), 2: (12, False)}
    shallow = _through(sw, 1, fb.packet(1, 0, 1, [5], pool=1, src=1), 3)  # no entry for port 2: it never marks
    shallow += _through(sw, 2, fb.packet(1, 0, 1, [7], pool=1, src=2), 3)
    assert {o.port: o.flag(wire.FLAG_ECN) for o in shallow} == {1: False, 2: False}
    assert sw.state.counter_read("AggEgress.ecn_marked", 1)[0] == 1
    assert sw.state.counter_read("AggEgress.ecn_marked", 2)[0] == 0


def _ecn_frame(codepoint: int) -> bytes:
    """A plain IPv4/UDP frame from host 1 to 10.0.255.1 with `codepoint` in the IPv4 ECN field."""
    raw = bytearray(codec.frame(b"data", fb.host_mac(1), fb.SWITCH_MAC, fb.host_ip(1), "10.0.255.1", 1000, 5201))
    raw[15] = codepoint
    raw[24:26] = b"\0\0"
    raw[24:26] = codec.ipv4_checksum(bytes(raw[14:34])).to_bytes(2, "big")
    return bytes(raw)


def test_ecn_capable_ipv4_is_marked_ce_from_the_ports_depth():
    sw = fb.switch()  # the reference engine: it runs egress at a given queue depth
    sw.state.insert_entry("AggIngress.ipv4_lpm", st.TableEntry(
        {"hdr.ipv4.dstAddr": st.Lpm(0x0A00FF00, 24)}, "AggIngress.ipv4_forward",
        {"dstAddr": 0x0200000000AA, "port": 2}))
    _mark_from(sw, 2, 4)

    def through(codepoint: int, enq_qdepth: int) -> bytes:
        (item,) = sw.ingress(1, _ecn_frame(codepoint))
        ((port, frame),) = sw.egress(item, enq_qdepth)
        assert port == 2 and codec.ipv4_checksum(frame[14:34]) == 0  # the header checksum still holds
        return frame

    # Not-ECT, ECT(1), ECT(0), CE: (codepoint leaving below the depth, at it)
    assert [(through(c, 3)[15], through(c, 4)[15]) for c in (0, 1, 2, 3)] == [(0, 0), (1, 3), (2, 3), (3, 3)]
    assert sw.state.counter_read("AggEgress.ecn_marked", 2)[0] == 2  # the two ECT packets it marked


def test_two_jobs_with_disjoint_regions_do_not_interfere():
    sw = fb.switch()
    for job, base in ((1, 0), (2, 16)):
        fb.install_job(sw, job, base, 16, [fb.Child(1, 0), fb.Child(2, 1)])
    for p in (1, 2):
        fb.install_host(sw, p, fb.host_mac(p), fb.host_ip(p))
    fb.send(sw, 1, fb.packet(1, 5, 5, [1], src=1))
    fb.send(sw, 1, fb.packet(2, 5, 5, [100], src=1))
    o2 = fb.send(sw, 2, fb.packet(2, 5, 5, [200], src=2))
    o1 = fb.send(sw, 2, fb.packet(1, 5, 5, [2], src=2))
    assert {(int(o.agg["job_id"]), o.values[0]) for o in o1 + o2} == {(1, 3), (2, 300)}
    assert sw.state.register_read("AggIngress.agg_bitmap", (16 + 5) * 2) == 0b11
    assert fb.counter(sw, "completed", 1) == fb.counter(sw, "completed", 2) == 1
    # a slot outside the job's region is dropped
    assert fb.send(sw, 1, fb.packet(1, 16, 0, [1], src=1)) == []
    assert fb.counter(sw, "aggregated", 1) == 2


def test_unknown_job_and_plain_ipv4_are_routed():
    sw = fb.star(2)
    sw.state.insert_entry("AggIngress.ipv4_lpm", st.TableEntry(
        {"hdr.ipv4.dstAddr": st.Lpm(0x0A00FF00, 24)}, "AggIngress.ipv4_forward",
        {"dstAddr": 0x0200000000AA, "port": 7}))
    outs = fb.send(sw, 1, fb.packet(9, 0, 0, [1], src=1))  # job 9 is not installed
    assert [o.port for o in outs] == [7] and outs[0].values[0] == 1 and outs[0].frame.dst_mac == "02:00:00:00:00:aa"
    ping = codec.frame(b"hello", fb.host_mac(1), fb.SWITCH_MAC, fb.host_ip(1), "10.0.255.1", 1000, 2000)
    outs = fb.send(sw, 1, ping)
    assert [o.port for o in outs] == [7] and outs[0].frame.payload == b"hello" and outs[0].agg is None
    assert fb.send(sw, 1, codec.frame(b"x", fb.host_mac(1), fb.SWITCH_MAC, fb.host_ip(1), "192.168.0.1", 1, 2)) == []


def test_lane_count_mismatch_is_dropped():
    sw = fb.star(2)
    assert fb.send(sw, 1, fb.packet(1, 0, 0, [1], src=1, lanes=64), lanes=64) == []
    assert fb.counter(sw, "received") == 1 and fb.counter(sw, "aggregated") == 0


def test_64_lanes():
    rng = np.random.default_rng(64)
    sw = fb.star(3, lanes=64)
    vals = rand_values(rng, 3, lanes=64)
    outs = []
    for h in (1, 2, 3):
        outs = fb.send(sw, h, fb.packet(1, 0, 0, vals[h - 1], src=h, lanes=64), lanes=64)
    assert len(outs) == 3 and outs[0].values == vals.astype(np.int64).sum(axis=0).tolist()


def tree():
    """s1 (hosts 1,2 on ports 1,2) and s2 (hosts 3,4 on ports 1,2) under root s3 (ports 1,2)."""
    s1, s2, s3 = fb.switch(), fb.switch(), fb.switch()
    for leaf, hosts in ((s1, (1, 2)), (s2, (3, 4))):
        fb.install_job(leaf, 1, 0, 8, [fb.Child(1, 0), fb.Child(2, 1)], is_root=False, parent_port=3)
        for port, h in zip((1, 2), hosts):
            fb.install_host(leaf, port, fb.host_mac(h), fb.host_ip(h))
    fb.install_job(s3, 1, 100, 8, [fb.Child(1, 0), fb.Child(2, 1)])
    return s1, s2, s3


def test_two_level_tree():
    s1, s2, s3 = tree()
    vals = {h: [h, -10 * h, 2**28] for h in (1, 2, 3, 4)}
    assert fb.send(s1, 1, fb.packet(1, 2, 7, vals[1], src=1)) == []
    up1 = fb.send(s1, 2, fb.packet(1, 2, 7, vals[2], src=2))
    assert [o.port for o in up1] == [3] and up1[0].values[:3] == [3, -30, 2**29]
    assert not up1[0].flag(wire.FLAG_RESULT) and int(up1[0].agg["workers"]) == 2
    fb.send(s2, 1, fb.packet(1, 2, 7, vals[3], src=3))
    up2 = fb.send(s2, 2, fb.packet(1, 2, 7, vals[4], src=4))
    assert fb.send(s3, 1, up1[0].raw) == []
    down = fb.send(s3, 2, up2[0].raw)
    assert sorted(o.port for o in down) == [1, 2]
    assert down[0].values[:3] == [10, -100, 2**30] and int(down[0].agg["workers"]) == 4
    at_hosts = fb.send(s1, 3, [o for o in down if o.port == 1][0].raw)
    assert sorted((o.port, o.frame.dst_ip) for o in at_hosts) == [(1, "10.0.0.1"), (2, "10.0.0.2")]
    assert {(o.frame.src_ip, o.frame.src_mac) for o in at_hosts} == {(fb.AGG_IP, fb.SWITCH_MAC)}
    assert all(o.values[:3] == [10, -100, 2**30] for o in at_hosts)
    # the leaf kept the final result: a late retransmission is answered there, not at the root
    ans = fb.send(s1, 1, fb.packet(1, 2, 7, vals[1], src=1, retx=True))
    assert [(o.port, o.values[0], o.flag(wire.FLAG_RESULT)) for o in ans] == [(1, 10, True)]
    assert fb.counter(s1, "retx_answered") == 1 and fb.counter(s3, "received") == 2


def test_lost_partial_is_resent_by_the_leaf():
    s1, s2, s3 = tree()
    fb.send(s1, 1, fb.packet(1, 0, 0, [1], src=1))
    fb.send(s1, 2, fb.packet(1, 0, 0, [2], src=2))  # partial to s3 ... lost on the link
    fb.send(s2, 1, fb.packet(1, 0, 0, [3], src=3))
    up2 = fb.send(s2, 2, fb.packet(1, 0, 0, [4], src=4))
    assert fb.send(s3, 2, up2[0].raw) == []
    resend = fb.send(s1, 1, fb.packet(1, 0, 0, [1], src=1, retx=True))  # host 1 times out
    assert [(o.port, o.values[0], o.flag(wire.FLAG_RETX), o.flag(wire.FLAG_RESULT)) for o in resend] == \
        [(3, 3, True, False)]
    down = fb.send(s3, 1, resend[0].raw)
    assert sorted((o.port, o.values[0]) for o in down) == [(1, 10), (2, 10)]


def test_forwarding_only_switch_children_told_apart_by_source():
    # s1 only forwards for hosts 1 and 2 (ports 1, 2) up port 3 to root s2, where host 3 is on port 2.
    s1, s2 = fb.switch(), fb.switch()
    fb.install_job(s1, 1, 0, 4, [fb.Child(1, 0), fb.Child(2, 1)], is_root=False, parent_port=3, aggregate=False)
    for p in (1, 2):
        fb.install_host(s1, p, fb.host_mac(p), fb.host_ip(p))
    fb.install_job(s2, 1, 0, 4, [fb.Child(1, 0, fb.host_ip(1)), fb.Child(1, 1, fb.host_ip(2)), fb.Child(2, 2)])
    fb.install_host(s2, 2, fb.host_mac(3), fb.host_ip(3))
    for h, v in ((1, 1), (2, 20)):
        up = fb.send(s1, h, fb.packet(1, 0, 0, [v], src=h))
        assert [o.port for o in up] == [3]
        assert fb.send(s2, 1, up[0].raw) == []
    down = fb.send(s2, 2, fb.packet(1, 0, 0, [300], src=3))
    assert sorted((o.port, o.values[0]) for o in down) == [(1, 321), (2, 321)]
    to_s1 = [o for o in down if o.port == 1][0]
    assert to_s1.frame.dport == 48864  # no host entry on the switch link: not re-addressed
    assert to_s1.frame.src_ip == fb.host_ip(3)
    hosts = fb.send(s1, 3, to_s1.raw)
    assert sorted((o.port, o.values[0], o.frame.dst_ip) for o in hosts) == [(1, 321, "10.0.0.1"),
                                                                          (2, 321, "10.0.0.2")]


def shared_pool(engine: str):
    """Jobs 1 (hosts 1, 2) and 2 (hosts 3, 4) rooted here, sharing the pool of slots 8..11 (ATP's way)."""
    sw = fb.switch(engine=engine)
    for job, ports in ((1, (1, 2)), (2, (3, 4))):
        fb.install_shared_job(sw, job, 8, 4, [fb.Child(p, i) for i, p in enumerate(ports)])
    for p in (1, 2, 3, 4):
        fb.install_host(sw, p, fb.host_mac(p), fb.host_ip(p))
    return sw


@pytest.mark.parametrize("engine", ["python", "native"])
def test_shared_pool_chunks_hold_a_slot_until_complete_and_others_spill(engine):
    sw = shared_pool(engine)
    assert fb.send(sw, 1, fb.packet(1, 2, 10, [5], src=1)) == []  # job 1's chunk 10 takes slot 2
    spilled = fb.send(sw, 3, fb.packet(2, 2, 77, [900], src=3))  # job 2's chunk 77 finds it taken
    assert sorted(o.port for o in spilled) == [3, 4]  # every worker of job 2 hears: chunk 77 goes to the server
    assert all(o.flag(wire.FLAG_RESULT) and o.flag(wire.FLAG_SPILL) and int(o.agg["seq"]) == 77 for o in spilled)
    assert fb.counter(sw, "spilled", 2) == 1 and fb.counter(sw, "aggregated", 2) == 0
    done = fb.send(sw, 2, fb.packet(1, 2, 10, [6], src=2))
    assert sorted((o.port, o.values[0], o.flag(wire.FLAG_SPILL)) for o in done) == [(1, 11, False), (2, 11, False)]
    # the round is complete (its result went to every worker): the slot is free for any chunk
    assert fb.send(sw, 4, fb.packet(2, 2, 78, [1], src=4)) == []
    assert (sw.state.register_read("AggIngress.agg_owner", (8 + 2) * 2),
            sw.state.register_read("AggIngress.agg_seq", (8 + 2) * 2)) == (2, 78)
    # a retransmission never takes a slot: job 1's chunk 10 asked again finds its round gone
    again = fb.send(sw, 1, fb.packet(1, 2, 10, [5], src=1, retx=True))
    assert sorted(o.port for o in again) == [1, 2] and all(o.flag(wire.FLAG_SPILL) for o in again)


@pytest.mark.parametrize("engine", ["python", "native"])
def test_a_spilled_chunk_frees_its_round_and_travels_to_the_server_as_plain_ipv4(engine):
    sw = shared_pool(engine)
    for host, port in ((9, 9), (3, 3)):
        sw.state.insert_entry("AggIngress.ipv4_lpm", st.TableEntry(
            {"hdr.ipv4.dstAddr": st.Lpm(0x0A000000 + host, 32)}, "AggIngress.ipv4_forward",
            {"dstAddr": int(fb.host_mac(host).replace(":", ""), 16), "port": port}))
    fb.send(sw, 3, fb.packet(2, 1, 40, [7], src=3))  # a late worker of a chunk that spilled took the slot
    assert sw.state.register_read("AggIngress.agg_bitmap", (8 + 1) * 2) == 0b01
    assert fb.send(sw, 3, fb.packet(2, 1, 40, [0], src=3, flags=wire.FLAG_SPILL)) == []  # ... and frees it
    assert sw.state.register_read("AggIngress.agg_bitmap", (8 + 1) * 2) == 0
    assert fb.send(sw, 1, fb.packet(1, 1, 3, [1], src=1)) == []  # free for job 1
    # a release for a chunk that does not hold the slot changes nothing
    fb.send(sw, 4, fb.packet(2, 1, 40, [0], src=4, flags=wire.FLAG_SPILL))
    assert sw.state.register_read("AggIngress.agg_bitmap", (8 + 1) * 2) == 0b01
    # the chunk on its way to the job's server (10.0.0.9) is routed, never summed, also through its root
    to_ps = fb.send(sw, 3, fb.packet(2, 1, 40, [7], src=3, flags=wire.FLAG_PS, dst="10.0.0.9"))
    assert [(o.port, o.frame.dst_ip, o.values[0]) for o in to_ps] == [(9, "10.0.0.9", 7)]
    back = fb.send(sw, 9, fb.packet(2, 1, 40, [14], src=9, flags=wire.FLAG_PS | wire.FLAG_RESULT, dst="10.0.0.3"))
    assert [(o.port, o.frame.src_ip, o.values[0]) for o in back] == [(3, "10.0.0.9", 14)]  # routed, not re-addressed
    assert fb.counter(sw, "received", 2) == 3 and fb.counter(sw, "spilled", 2) == 0


def test_a_shared_slots_other_pool_keeps_another_jobs_round():
    sw = shared_pool("python")
    fb.send(sw, 2, fb.packet(1, 0, 5, [1], pool=1, src=2))  # job 1's round in slot 0, pool 1, from child bit 1
    fb.send(sw, 3, fb.packet(2, 0, 9, [1], pool=0, src=3))  # job 2 (child bit 0) takes slot 0, pool 0
    fb.send(sw, 4, fb.packet(2, 0, 9, [1], pool=0, src=4))  # ... and completes it (child bit 1)
    assert sw.state.register_read("AggIngress.agg_bitmap", 8 * 2 + 1) == 0b10  # job 1's bit is still in
    outs = fb.send(sw, 1, fb.packet(1, 0, 5, [2], pool=1, src=1))
    assert sorted((o.port, o.values[0]) for o in outs) == [(1, 3), (2, 3)]
