"""Idle timeouts over P4Runtime, as BMv2's server does them: a table with `support_timeout =
true` has `idle_timeout_behavior: NOTIFY_CONTROL` in its P4Info, takes entries with an
`idle_timeout_ns`, reads back `time_since_last_hit`, and sends IdleTimeoutNotifications on the
stream for entries no packet has hit for that long (again every other sweep while idle)."""
from __future__ import annotations

import queue
import time
from pathlib import Path

import pytest
from finsy.proto import p4i, p4r
from p4rt_raw import RawClient, write_codes
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target.runtime import RuntimeServer

PROGRAM = Path(__file__).parent / "data" / "runtime" / "profiles.p4"
SWEEP = 0.1  # seconds between ageing sweeps here (BMv2's default is 1 s)
TIMEOUT_NS = 300_000_000
INSERT, MODIFY = p4r.Update.INSERT, p4r.Update.MODIFY


@pytest.fixture
def switch():
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", idle_sweep_interval=SWEEP)
    port = srv.start()
    srv.load_source(PROGRAM.read_text(), str(PROGRAM))
    client = RawClient(port)
    client.arbitrate(10)
    info = srv.device.loaded().p4info
    ids = {e.preamble.name: e.preamble.id for kind in ("tables", "actions") for e in getattr(info, kind)}
    yield srv, client, info, ids
    client.close()
    srv.stop()


def flow(ids: dict, src: bytes, timeout_ns: int = 0, table: str = "MyIngress.flows") -> p4r.Entity:
    action = p4r.TableAction(action=p4r.Action(action_id=ids["NoAction"]))
    if table == "MyIngress.mac_a":
        action = p4r.TableAction(action_profile_member_id=1)
    return p4r.Entity(table_entry=p4r.TableEntry(
        table_id=ids[table], match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=src))],
        action=action, idle_timeout_ns=timeout_ns))


def notifications(client: RawClient, seconds: float) -> list[tuple[float, p4r.IdleTimeoutNotification]]:
    """(arrival time, notification) of every idle-timeout message in the next `seconds`."""
    out, end = [], time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        try:
            message = client.next_message(timeout=left)
        except queue.Empty:
            break
        if message.HasField("idle_timeout_notification"):
            out.append((time.monotonic(), message.idle_timeout_notification))
    return out


def next_notifications(client: RawClient, count: int) -> list[tuple[float, p4r.IdleTimeoutNotification]]:
    """(arrival time, notification) of the next `count` idle-timeout messages, however long they take
    (the 60 s only ends a test whose notifications never come)."""
    out = []
    while len(out) < count:
        message = client.next_message(timeout=60)
        if message.HasField("idle_timeout_notification"):
            out.append((time.monotonic(), message.idle_timeout_notification))
    return out


def test_p4info_says_which_tables_notify(switch):
    _, _, info, _ = switch
    behaviors = {t.preamble.name: t.idle_timeout_behavior for t in info.tables}
    assert behaviors["MyIngress.flows"] == p4i.Table.NOTIFY_CONTROL
    assert behaviors["MyIngress.ecmp"] == p4i.Table.NO_TIMEOUT


def test_idle_entries_are_notified_and_a_hit_restarts_the_clock(switch):
    srv, client, _, ids = switch
    aging, forever = flow(ids, b"\x0a\x00\x00\x01", TIMEOUT_NS), flow(ids, b"\x0a\x00\x00\x02")
    start = time.monotonic()
    assert write_codes(client, p4r.Update(type=INSERT, entity=aging), p4r.Update(type=INSERT, entity=forever)) == ["OK", "OK"]
    [(arrived, first)] = next_notifications(client, 1)
    assert arrived - start >= TIMEOUT_NS / 1e9
    [reported] = first.table_entry  # only the entry with a timeout, without its action
    assert reported.match == aging.table_entry.match and reported.idle_timeout_ns == TIMEOUT_NS
    assert not reported.HasField("action") and first.timestamp > 0
    later = next_notifications(client, 2)  # still idle: reported again (every other sweep: see below)
    assert all([e.match for e in n.table_entry] == [aging.table_entry.match] for _, n in later)

    read = p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.flows"],
                                                 time_since_last_hit=p4r.TableEntry.IdleTimeout()))
    elapsed = {e.table_entry.match[0].exact.value: e.table_entry.time_since_last_hit.elapsed_ns
               for e in client.read(read)}
    assert elapsed[b"\x0a\x00\x00\x01"] >= TIMEOUT_NS and elapsed[b"\x0a\x00\x00\x02"] == 0
    packet = bytes(Ether() / IP(src="10.0.0.1", dst="10.9.9.9") / UDP(sport=1, dport=2))
    before_hit = time.monotonic()
    srv.pipeline.process(1, packet)  # a hit: idle from now on
    hit_at = time.monotonic()
    [after_hit] = [e for e in client.read(read) if e.table_entry.match[0].exact.value == b"\x0a\x00\x00\x01"]
    read_at = time.monotonic()
    assert after_hit.table_entry.time_since_last_hit.elapsed_ns <= (read_at - before_hit) * 1e9  # counted from the hit
    assert after_hit.table_entry.idle_timeout_ns == TIMEOUT_NS  # read back as written
    while (renewed := next_notifications(client, 1))[0][0] < hit_at:
        pass  # one sent before the hit and not yet read
    assert renewed[0][0] - hit_at >= TIMEOUT_NS / 1e9


def test_an_idle_entry_is_reported_every_other_sweep():
    """BMv2's ageing monitor, on an injected clock: sweeps at chosen times report an entry idle for
    its timeout, skip it the next sweep, report it again, and so on."""
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", idle_sweep_interval=3600)  # no sweeps of its own
    srv.load_source(PROGRAM.read_text(), str(PROGRAM))
    translator = srv.device.loaded().translator
    info = srv.device.loaded().p4info
    ids = {e.preamble.name: e.preamble.id for kind in ("tables", "actions") for e in getattr(info, kind)}
    translator.apply(INSERT, flow(ids, b"\x0a\x00\x00\x01", TIMEOUT_NS))
    inserted = time.monotonic()
    timeout = TIMEOUT_NS / 1e9
    sweeps = [inserted + timeout + k * SWEEP for k in range(5)]
    assert translator.idle_timeout_notifications(inserted) == []  # hit (inserted) just now
    assert [len(translator.idle_timeout_notifications(t)) for t in sweeps] == [1, 0, 1, 0, 1]


def test_modify_changes_the_timeout_and_tables_without_support_refuse_one(switch):
    _, client, _, ids = switch
    entry = flow(ids, b"\x0a\x00\x00\x03")
    assert write_codes(client, p4r.Update(type=INSERT, entity=entry)) == ["OK"]
    assert notifications(client, 3 * SWEEP) == []  # no timeout: never ages
    entry.table_entry.idle_timeout_ns = 100_000_000
    assert write_codes(client, p4r.Update(type=MODIFY, entity=entry)) == ["OK"]
    assert next_notifications(client, 1)
    ids_of = {p.preamble.name: p.preamble.id for p in switch[2].action_profiles}
    member = p4r.Entity(action_profile_member=p4r.ActionProfileMember(
        action_profile_id=ids_of["MyIngress.nhop_profile"], member_id=1,
        action=p4r.Action(action_id=ids["MyIngress.drop"])))
    assert write_codes(client, p4r.Update(type=INSERT, entity=member)) == ["OK"]
    timed = flow(ids, b"\x01", TIMEOUT_NS, table="MyIngress.mac_a")  # mac_a has no support_timeout
    assert write_codes(client, p4r.Update(type=INSERT, entity=timed)) == ["INVALID_ARGUMENT"]
    timed.table_entry.idle_timeout_ns = 0
    assert write_codes(client, p4r.Update(type=INSERT, entity=timed)) == ["OK"]
