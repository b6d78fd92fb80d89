"""Switch memory shared ATP's way: the controller's side (who shares what, where a full switch's job
goes instead) and the protocol over real UDP sockets: two jobs all-reduce at once through one
aggnet.p4 switch whose pool is smaller than their windows together, chunks that find their
slot taken spill to each job's spill server (hosts.spill), and every sum is exact."""
import dataclasses
import threading
import time

import fabric as fb
import numpy as np
import pytest
from test_allreduce_loopback import sockets

from controller.installer import desired_state, plan_job
from controller.placement import Job, place_jobs
from controller.tenants import SHARED, share, with_slot_budgets
from controller.topology import load_topology
from hosts import codec
from hosts.allreduce import AllReduceClient, pool_slots
from hosts.spill import SpillServer
from protocol import wire
from protocol.job import JobSpec, WorkerSpec

POOL, WINDOW, LANES = 6, 4, 32


def leafspine():
    topo = load_topology("topologies/leafspine.yaml")
    return with_slot_budgets(topo, dict.fromkeys(topo.switches, 8))


def test_sharing_roots_every_job_in_its_roots_pool_and_the_switches_hold_it():
    topo = leafspine()
    jobs = [Job("a", ("h1", "h3"), slots=6, k=2), Job("b", ("h5", "h7"), root="s1", slots=16)]
    tenancy = share(topo, jobs)
    a, b = tenancy.placements
    assert [adm.status for adm in tenancy.admissions] == [SHARED, SHARED]
    assert (a.job.pool, a.job.slots, a.job.k, b.job.pool, b.job.slots) == (8, 6, 0, 8, 8)  # windows fit the pool
    state = desired_state(topo, [dataclasses.replace(plan_job(jp, i + 1), slot_base=0)
                                 for i, jp in enumerate(tenancy.placements)])
    root, = [e for e in state[a.tree.root].table("AggIngress.agg_job") if e.param("mcast_grp") == 0x1001]
    assert root.action == "AggIngress.set_shared_job" and (root.param("slot_count"), root.param("children")) == (8, 2)
    leaf, = [e for e in state["s3"].table("AggIngress.agg_job") if e.param("mcast_grp") == 0x1001]
    assert leaf.action == "AggIngress.set_job" and (leaf.param("aggregate"), leaf.param("slot_count")) == (0, 8)


def test_a_job_whose_switch_is_full_moves_where_memory_is_free():
    topo = leafspine()
    jobs = [Job("a", ("h1", "h3"), root="s1", slots=8, k=0), Job("b", ("h2", "h4"), root="s1", slots=8, k=0)]
    kept, full = place_jobs(topo, jobs)
    assert kept.tree.root == "s1" and full.fallback == "root switch 's1' has 0 free slots, the job needs 8"
    _, moved = place_jobs(topo, jobs, move=True)  # the cheapest tree with room: rooted at the other spine
    assert moved.fallback is None and moved.moved_from == "s1" and moved.tree.root == "s2"
    assert moved.placement.aggregators == ("s2",)


def two_jobs():
    """One switch whose pool jobs 1 (hosts 1, 2) and 2 (hosts 3, 4) share: the switch, its fabric, the hosts'
    sockets, the jobs' spill servers' sockets and the jobs."""
    sw = fb.switch()
    fb.install_shared_job(sw, 1, 0, POOL, [fb.Child(1, 0), fb.Child(2, 1)])
    fb.install_shared_job(sw, 2, 0, POOL, [fb.Child(3, 0), fb.Child(4, 1)])
    for p in (1, 2, 3, 4):
        fb.install_host(sw, p, fb.host_mac(p), fb.host_ip(p))
    fabric = fb.Fabric({"s1": sw})
    socks = sockets(4)
    for i, s in enumerate(socks):
        fabric.attach("s1", i + 1, i + 1, s.getsockname())
    servers = sockets(2)
    jobs = [JobSpec(job_id=j, workers=tuple(WorkerSpec(f"h{r}", "127.0.0.1", socks[r - 1].getsockname()[1])
                                            for r in ranks),
                    slot_base=0, slot_count=WINDOW, agg_ip=fabric.addr[0], agg_port=fabric.addr[1], lanes=LANES,
                    timeout_s=0.05, pool=POOL, spill_ip="127.0.0.1", spill_port=servers[j - 1].getsockname()[1])
            for j, ranks in ((1, (1, 2)), (2, (3, 4)))]
    return sw, fabric, socks, servers, jobs


def test_a_job_whose_slots_another_holds_spills_them_and_sums_exactly():
    """Job 2's first worker holds its window's slots (its peer is not there yet) while job 1 all-reduces
    through the same pool: job 1's chunks on those slots spill, deterministically, and are summed by its
    spill server; then job 2's second worker comes and job 2 completes too. Every sum is exact."""
    sw, fabric, socks, servers, jobs = two_jobs()
    spill = [SpillServer(job, s) for job, s in zip(jobs, servers)]
    stop = [False]
    rng = np.random.default_rng(5)
    inputs = rng.integers(-2**20, 2**20, size=(4, 60 * LANES), dtype=np.int32)
    results, stats, errors = [None] * 4, [None] * 4, []

    def work(i):
        try:
            with AllReduceClient(jobs[i // 2], i % 2, socks[i], stall_timeout_s=120) as client:
                results[i] = client.allreduce_int(inputs[i])
                stats[i] = client.stats
        except Exception as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    held = [2 * int(slot) for slot in pool_slots(2, np.arange(WINDOW), WINDOW, POOL)]  # pool 0's cells
    fabric.start()
    for srv in spill:
        threading.Thread(target=srv.serve, args=(stop,), daemon=True).start()
    try:
        threads[2].start()  # job 2's first worker takes its window's slots and waits for its peer
        while not all(sw.state.register_read("AggIngress.agg_owner", cell) == 2 for cell in held):
            time.sleep(0.01)
        for t in threads[:2]:
            t.start()
        for t in threads[:2]:
            t.join(120)
        threads[3].start()
        for t in threads[2:]:
            t.join(120)
    finally:
        stop[0] = True
        fabric.close()
    assert errors == [] and fabric.errors == []
    for i in range(4):
        pair = inputs[2 * (i // 2):2 * (i // 2) + 2].astype(np.int64).sum(axis=0)
        np.testing.assert_array_equal(results[i], pair)  # exact, whichever way each chunk went
    overlap = set(pool_slots(1, np.arange(WINDOW), WINDOW, POOL)) & {cell // 2 for cell in held}
    assert overlap and stats[0].spilled == stats[1].spilled > 0  # both workers heard of every spilled chunk
    assert spill[0].stats.chunks == stats[0].spilled  # ... and each was summed at the server, once
    assert sw.state.counter_read("AggIngress.agg_spilled", 1)[0] >= stats[0].spilled


@pytest.mark.parametrize("field, value, message", [
    ("spill_ip", "", "field 'spill_ip': '' is not an IPv4 address"),
    ("slot_count", 9, "field 'slot_count': a window of 9 chunks does not fit the shared pool of 8 slots"),
])
def test_a_shared_pool_spec_needs_its_server_and_a_window_within_the_pool(field, value, message):
    data = {"job_id": 1, "workers": [{"name": "h1", "ip": "10.0.0.1"}], "slot_base": 0, "slot_count": 4,
            "agg_ip": "10.0.255.254", "pool": 8, "spill_ip": "10.0.0.9", field: value}
    with pytest.raises(ValueError, match=message):
        JobSpec.from_dict(data, "job.json")


def test_the_shipped_scenario_holds_more_windows_than_the_spines_have_room_for(tmp_path):
    from testbed.scenario import ModeRun, load_scenario

    scn = load_scenario("experiments/atp_multitenant.yaml")
    assert scn.modes == ("unaware", "relocate", "atp", "ps")

    def where(mode):
        return [(a.status, a.aggregators) for a in ModeRun(scn, mode, tmp_path / mode).tenancy.admissions]

    assert where("unaware") == [("in-network", ("s1",)), ("in-network", ("s2",)), ("host", ()), ("host", ())]
    assert where("relocate") == [("in-network", ("s1",)), ("in-network", ("s2",)), ("in-network", ("s4",)),
                                 ("in-network", ("s3",))]
    assert where("atp") == [("shared", ("s1",)), ("shared", ("s2",)), ("shared", ("s1",)), ("shared", ("s2",))]


def test_a_spill_notice_that_comes_during_the_previous_call_still_sends_the_chunk_to_the_server():
    """Job 2's rank 1 is slow: the result of its one-chunk call (seq 0) and the switch's spill notice for seq 2,
    which its faster peer sent already in the next call, reach it in one batch. Had it dropped the notice
    (seq 2 is not a chunk of the call it is in), it would send seq 2 to the switch once the slot is free
    again, while the peer's copy waits at the server: both would stall. The notice must outlive the call."""
    _, fabric, socks, servers, jobs = two_jobs()
    job, server_sock = jobs[1], servers[1]
    server, stop = SpillServer(job, server_sock), [False]
    assert pool_slots(2, 2, WINDOW, POOL) == pool_slots(1, 1, WINDOW, POOL)  # job 2's seq 2 and job 1's seq 1 meet
    mine, peer = np.arange(WINDOW * LANES, dtype=np.int32), np.full(WINDOW * LANES, 7, dtype=np.int32)
    slow = AllReduceClient(job, 1, socks[3])
    sent, notified, out, errors = threading.Event(), threading.Event(), [], []
    recv = slow.io.recv

    def held_recv(timeout_s):  # the slow worker reads nothing until the notice is in its socket too
        sent.set()
        notified.wait()
        return recv(timeout_s)

    def work():
        try:
            slow.allreduce_int(np.zeros(LANES, dtype=np.int32))
            out.append(slow.allreduce_int(mine))
        except Exception as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    def raw(sock, job_id, seq, values, flags=0, to=fabric.addr):
        rows = np.zeros((1, LANES), dtype=np.int32)
        rows[0, :len(values)] = values
        sock.sendto(codec.encode(job_id, int(pool_slots(job_id, seq, WINDOW, POOL)), seq,
                                 flags | (seq // WINDOW % 2) * wire.FLAG_POOL, rows).tobytes(), to)

    def take(sock, seq):
        sock.settimeout(30)
        pkt = codec.decode(sock.recv(4096), LANES)[0]
        assert int(pkt["seq"]) == seq
        return int(pkt["flags"])

    slow.io.recv = held_recv
    fabric.start()
    threading.Thread(target=server.serve, args=(stop,), daemon=True).start()
    thread = threading.Thread(target=work)
    try:
        raw(socks[0], 1, 1, [1])  # job 1 holds the slot, collecting
        raw(socks[2], 2, 0, [0])  # the fast peer's one-chunk call
        thread.start()
        assert sent.wait(30)
        assert take(socks[2], 0) & wire.FLAG_RESULT  # the peer's call is done: it sends seqs 1..4
        for g in range(1, WINDOW + 1):
            raw(socks[2], 2, g, peer[(g - 1) * LANES:g * LANES])
        assert take(socks[2], 2) & wire.FLAG_SPILL  # seq 2 spilled: the peer sends it to the server
        raw(socks[2], 2, 2, peer[LANES:2 * LANES], wire.FLAG_PS, server_sock.getsockname())
        raw(socks[1], 1, 1, [2])  # job 1's round completes: the slot is free again
        while fabric.delivered < 6:  # both results of seq 0, both notices of seq 2, job 1's two results
            time.sleep(0.01)
        notified.set()
        thread.join(60)
    finally:
        notified.set()
        stop[0] = True
        fabric.close()
    assert errors == [] and fabric.errors == []
    np.testing.assert_array_equal(out[0], mine + peer)
    assert slow.stats.spilled == 1 and server.stats.chunks == 1
