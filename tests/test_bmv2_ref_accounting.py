"""The BMv2 reference harness knows when a batch is done: it counts packet copies alive from
simple_switch's debug log (tests/bmv2_ref.py). These lines are as simple_switch 1.15 prints them;
no BMv2 is needed here, the differential tests run the real thing."""
from __future__ import annotations

from bmv2_ref import Accounting


def feed(acct: Accounting, *messages: str, thread: int = 7) -> None:
    for m in messages:
        tagged = m if m.startswith(("number of", "Replication requested", "Priority")) else f"[3.0] [cxt 0] {m}"
        acct.log_line(f"[13:44:39.979] [bmv2] [D] [thread {thread}] {tagged}\n")


def sent(count: int) -> Accounting:
    acct = Accounting()
    acct.alive = count
    return acct


def test_a_unicast_packet_is_done_once_its_output_arrived():
    acct = sent(1)
    feed(acct, "Processing packet received on port 1", "Egress port is 2", "Pipeline 'egress': start")
    assert acct.alive == 1 and not acct.done()
    feed(acct, "Transmitting packet of size 47 out of port 2")
    assert acct.alive == 0 and not acct.done()  # transmitted, not yet received
    acct.output(2, b"x")
    assert acct.done()


def test_a_multicast_never_looks_done_between_the_request_and_its_replicas():
    acct = sent(1)
    feed(acct, "Multicast requested for packet")
    assert acct.alive == 1
    feed(acct, "number of packets replicated : 3 for MGID: 1", "Replicating packet on port 3")
    assert acct.alive == 3
    feed(acct, *["Transmitting packet of size 17 out of port 3"] * 2, "Dropping packet at the end of egress")
    for port in (3, 4):
        acct.output(port, b"x")
    assert acct.alive == 0 and acct.done()


def test_a_multicast_to_an_unknown_group_ends_the_packet():
    acct = sent(1)
    feed(acct, "Multicast requested for packet", "Replication requested for mgid 50, which is not known to the PRE")
    assert acct.done()


def test_clones_are_born_and_resubmits_replace_the_packet():
    acct = sent(2)
    feed(acct, "Cloning packet at ingress", "Cloning packet to MGID 4", "number of packets replicated : 2 for MGID: 4",
         "Cloning packet to egress port 6", "Resubmitting packet", "Dropping packet at the end of ingress")
    assert acct.alive == 2 + 2 + 1 - 1
    feed(acct, "Recirculating packet", "Dropping packet at the end of ingress")
    assert acct.alive == 3


def test_replications_of_two_threads_are_told_apart():
    acct = sent(2)
    feed(acct, "Multicast requested for packet", thread=1)
    feed(acct, "Cloning packet to MGID 2", thread=2)
    feed(acct, "number of packets replicated : 2 for MGID: 2", thread=2)
    feed(acct, "number of packets replicated : 0 for MGID: 1", thread=1)
    assert acct.alive == 2 + 2 - 1
