"""Desired switch state computed from topology + placed jobs, without any network:
concrete aggnet.p4 entries on star4, tree2, leaf-spine and fat-tree k=4."""
import pytest

from controller.installer import (
    AGG_CHILD,
    AGG_HOST,
    AGG_JOB,
    ECN_MARK,
    IPV4_LPM,
    MAX_CHILDREN,
    MCAST_GROUP_BASE,
    Installer,
    InstallError,
    allocate_region,
    desired_state,
    job_spec,
    plan_job,
)
from controller.placement import Job, place_jobs
from controller.topology import load_topology, parse_topology

ALL_PORTS = (0, 0)  # srcAddr ternary don't-care


def plan(topo_name, workers, k=1, slots=8, job_id=1, **job_kw):
    topo = load_topology(f"topologies/{topo_name}.yaml")
    jp = place_jobs(topo, [Job("j", tuple(workers), k=k, slots=slots, **job_kw)])[0]
    return topo, plan_job(jp, job_id)


def job_entry(state, switch):
    (entry,) = state[switch].table(AGG_JOB)
    return dict(entry.params)


def children(state, switch):
    """(ingress port, srcAddr match) -> bitmap index on `switch`."""
    return {(dict(e.match)["standard_metadata.ingress_port"], dict(e.match)["hdr.ipv4.srcAddr"]): e.param("index")
            for e in state[switch].table(AGG_CHILD)}


def test_star4_single_switch_is_root_with_a_child_per_worker_port():
    topo, p = plan("star4", ["h1", "h2", "h3", "h4"], k=0)
    state = desired_state(topo, [p])
    assert job_entry(state, "s1") == {"slot_base": 0, "slot_count": 8, "children": 4, "aggregate": 1, "is_root": 1,
                                      "parent_port": 0, "mcast_grp": MCAST_GROUP_BASE + 1}
    assert children(state, "s1") == {(1, ALL_PORTS): 0, (2, ALL_PORTS): 1, (3, ALL_PORTS): 2, (4, ALL_PORTS): 3}
    assert state["s1"].groups == {MCAST_GROUP_BASE + 1: ((1, 0), (2, 0), (3, 0), (4, 0))}
    hosts = {dict(e.match)["standard_metadata.egress_port"]: dict(e.params) for e in state["s1"].table(AGG_HOST)}
    assert hosts[3] == {"mac": "00:00:00:00:00:03", "ip": "10.0.0.3", "udp_port": 48864}
    assert len(state["s1"].table(IPV4_LPM)) == 4
    route = next(e for e in state["s1"].table(IPV4_LPM) if dict(e.match)["hdr.ipv4.dstAddr"] == ("10.0.0.2", 32))
    assert route.action == "AggIngress.ipv4_forward" and dict(route.params) == {"dstAddr": "00:00:00:00:00:02",
                                                                               "port": 2}


def test_tree2_all_aggregate_leaves_send_partials_up_port_5():
    topo, p = plan("tree2", [f"h{i}" for i in range(1, 9)], k=2)
    assert p.aggregators == {"s1", "s2", "s3"} and p.promoted == ()
    state = desired_state(topo, [p])
    root, leaf = job_entry(state, "s1"), job_entry(state, "s2")
    assert (root["children"], root["is_root"], root["aggregate"]) == (2, 1, 1)
    assert (leaf["children"], leaf["is_root"], leaf["aggregate"], leaf["parent_port"]) == (4, 0, 1, 5)
    assert children(state, "s1") == {(1, ALL_PORTS): 0, (2, ALL_PORTS): 1}
    assert state["s1"].groups[MCAST_GROUP_BASE + 1] == ((1, 0), (2, 0))
    assert state["s3"].groups[MCAST_GROUP_BASE + 1] == ((1, 0), (2, 0), (3, 0), (4, 0))
    assert [dict(e.params)["ip"] for e in state["s3"].table(AGG_HOST)] == ["10.0.0.5", "10.0.0.6", "10.0.0.7",
                                                                           "10.0.0.8"]
    assert state["s1"].table(AGG_HOST) == []  # no worker hangs off the root


def test_tree2_forwarding_leaf_workers_are_told_apart_by_source_address():
    topo, p = plan("tree2", ["h1", "h2", "h5"], k=0, root="s1")  # only the root aggregates
    state = desired_state(topo, [p])
    assert job_entry(state, "s2")["aggregate"] == 0 and job_entry(state, "s2")["parent_port"] == 5
    assert job_entry(state, "s3")["children"] == 0
    assert children(state, "s1") == {(1, ("10.0.0.1", 0xFFFFFFFF)): 0, (1, ("10.0.0.2", 0xFFFFFFFF)): 1,
                                     (2, ALL_PORTS): 2}
    assert job_entry(state, "s1")["children"] == 3
    # a forwarding switch keeps no bitmap, but admits the job only from the ports below it
    assert children(state, "s2") == {(1, ALL_PORTS): 0, (2, ALL_PORTS): 0}


def test_leafspine_job_tree_uses_one_spine_and_forwarding_leaves():
    topo, p = plan("leafspine", ["h1", "h3", "h5", "h7"], k=0)
    state = desired_state(topo, [p])
    assert p.tree.root == "s1"
    assert job_entry(state, "s1")["children"] == 4
    for leaf in ("s3", "s4", "s5", "s6"):
        entry = job_entry(state, leaf)
        assert (entry["aggregate"], entry["parent_port"]) == (0, topo.port_of(leaf, "s1"))
        assert state[leaf].groups[MCAST_GROUP_BASE + 1] == ((1, 0),)
    assert state["s2"].table(AGG_JOB) == [] and state["s2"].groups == {}
    assert len(state["s2"].table(IPV4_LPM)) == 8


def test_fattree_forwarding_switch_above_partials_is_promoted():
    workers = [f"h{i}" for i in range(1, 9)]  # pods 0 and 1
    topo, p = plan("fattree4", workers, k=3)
    assert p.promoted == ("s5",)
    assert p.aggregators == {"s1", "s5", "s7", "s13", "s14"}
    state = desired_state(topo, [p])
    assert children(state, "s5") == {(topo.port_of("s5", "s13"), ALL_PORTS): 0,
                                     (topo.port_of("s5", "s14"), ALL_PORTS): 1}
    assert job_entry(state, "s1")["children"] == 2  # one partial per pod
    # s7 aggregates the four workers of pod 1 that arrive through forwarding edges s15, s16
    assert job_entry(state, "s15")["aggregate"] == 0
    assert children(state, "s7") == {(topo.port_of("s7", "s15"), ("10.0.0.5", 0xFFFFFFFF)): 0,
                                     (topo.port_of("s7", "s15"), ("10.0.0.6", 0xFFFFFFFF)): 1,
                                     (topo.port_of("s7", "s16"), ("10.0.0.7", 0xFFFFFFFF)): 2,
                                     (topo.port_of("s7", "s16"), ("10.0.0.8", 0xFFFFFFFF)): 3}
    switches_with_job = sorted((s for s in state if state[s].table(AGG_JOB)), key=lambda s: int(s[1:]))
    assert switches_with_job == ["s1", "s5", "s7", "s13", "s14", "s15", "s16"]


def test_two_jobs_share_a_switch_with_disjoint_regions_and_groups():
    topo = load_topology("topologies/star4.yaml")
    jobs = place_jobs(topo, [Job("a", ("h1", "h2"), k=0, slots=16), Job("b", ("h3", "h4"), k=0, slots=8)])
    a = plan_job(jobs[0], 1)
    b = plan_job(jobs[1], 2)
    b = b.__class__(**{**b.__dict__, "slot_base": allocate_region(b, {"s1": [(0, 16)]}, {"s1": 1024})})
    assert b.slot_base == 16
    state = desired_state(topo, [a, b])
    assert [dict(e.params)["slot_base"] for e in state["s1"].table(AGG_JOB)] == [0, 16]
    assert state["s1"].groups == {MCAST_GROUP_BASE + 1: ((1, 0), (2, 0)), MCAST_GROUP_BASE + 2: ((3, 0), (4, 0))}
    with pytest.raises(InstallError, match="no free region of 8 slots on s1"):
        allocate_region(b, {"s1": [(0, 1020)]}, {"s1": 1024})
    assert allocate_region(b, {"s1": [(4, 4)]}, {"s1": 1024}) == 8  # 8 slots do not fit before 4
    assert allocate_region(b, {"s1": [(30, 4)]}, {"s1": 1024}) == 0


def test_job_spec_lists_workers_in_rank_order_with_addresses():
    topo, p = plan("tree2", ["h5", "h1"], k=0, slots=32, job_id=7)
    spec = job_spec(topo, p, lanes=32, agg_ip="10.0.255.254", timeout_s=0.1)
    assert (spec.job_id, spec.slot_base, spec.slot_count, spec.lanes, spec.agg_ip) == (7, 0, 32, 32, "10.0.255.254")
    assert [(w.name, w.ip, w.mac, w.port) for w in spec.workers] == [
        ("h5", "10.0.0.5", "00:00:00:00:00:05", 48864), ("h1", "10.0.0.1", "00:00:00:00:00:01", 48864)]


def test_host_aggregated_job_is_refused_with_one_line():
    topo = load_topology("topologies/tree2.yaml")
    jp = place_jobs(topo, [Job("ps", ("h1", "h2"), root="h8", k=1)])[0]
    with pytest.raises(InstallError, match=r"^job ps: host aggregation is not installable in-network .*h8") as exc:
        plan_job(jp, 1)
    assert "\n" not in str(exc.value) and exc.value.exit_code == 2
    with pytest.raises(InstallError, match="job id 0 is outside"):
        plan_job(place_jobs(topo, [Job("x", ("h1", "h2"))])[0], 0)


def test_installer_needs_a_connection_per_switch():
    topo = load_topology("topologies/tree2.yaml")
    with pytest.raises(InstallError, match="no connection for switch s2, s3"):
        Installer(topo, program=None, connections={"s1": object()})


def test_fattree8_root_over_its_bitmap_gets_forwarders_promoted():
    # 64 workers (pods 0-3) with one aggregator besides the root: 49 messages would reach root s1
    workers = [f"h{i}" for i in range(1, 65)]
    topo, p = plan("fattree8", workers, k=1)
    assert p.promoted == ("s21", "s25")  # the pods' forwarders carrying the most, until s1 holds them
    state = desired_state(topo, [p])
    fan_in = {s: job_entry(state, s)["children"] for s in p.aggregators}
    assert fan_in == {"s1": 19, "s17": 16, "s21": 16, "s25": 16}  # s1: 3 partials + 16 workers of pod 3
    assert max(fan_in.values()) <= MAX_CHILDREN


def test_more_workers_on_one_switch_than_its_bitmap_is_one_line():
    topo = parse_topology({"hosts": [{"name": f"h{i}"} for i in range(1, 35)], "switches": [{"name": "s1"}],
                           "links": [{"a": f"h{i}", "b": "s1"} for i in range(1, 35)]}, "star34.yaml")
    jp = place_jobs(topo, [Job("j", tuple(f"h{i}" for i in range(1, 34)), k=1, slots=8)])[0]
    with pytest.raises(InstallError, match=r"^job j: switch s1 would aggregate 33 messages per chunk; "
                                           r"the bitmap holds 32$"):
        desired_state(topo, [plan_job(jp, 1)])


def marks(state) -> dict[str, dict[int, int]]:
    """switch -> egress port -> the queue depth it marks from."""
    return {s: {dict(e.match)["standard_metadata.egress_port"]: e.param("depth") for e in st.table(ECN_MARK)}
            for s, st in state.items()}


def test_every_switch_port_marks_from_its_fraction_of_the_queue_and_zero_installs_none():
    topo, p = plan("tree2", [f"h{i}" for i in range(1, 9)], k=2)
    by_default = marks(desired_state(topo, [p]))  # a quarter of the traffic manager's 64 packets
    assert by_default == {s: {link.port_on(s): 16 for link in topo.links_of(s)} for s in topo.switches}
    assert by_default["s1"] == {1: 16, 2: 16} and len(by_default["s2"]) == 5  # the root's leaves; 4 hosts + uplink
    assert marks(desired_state(topo, [p], ecn_fraction=0.5))["s3"][1] == 32
    assert all(not st.table(ECN_MARK) for st in desired_state(topo, [p], ecn_fraction=0).values())


def test_a_links_own_queue_sets_its_ports_marking_depth():
    topo = load_topology("tests/data/pacing/tree_thin.yaml")  # 8-packet queues on the uplinks
    thin = {(s, link.port_on(s)) for s in topo.switches for link in topo.links_of(s) if link.queue_pkts == 8}
    assert thin
    state = marks(desired_state(topo, [], ecn_fraction=0.25))
    assert {(s, port) for s, ports in state.items() for port, depth in ports.items() if depth == 2} == thin
    assert marks(desired_state(topo, [], ecn_fraction=0.01)) == {  # never below one packet
        s: {link.port_on(s): 1 for link in topo.links_of(s)} for s in topo.switches}
