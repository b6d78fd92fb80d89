"""Action profiles and selectors over P4Runtime, as BMv2's server runs them.

tests/data/runtime/profiles.p4 has an action selector (crc16 over the 5-tuple) for `ecmp`
and a plain action profile shared by `mac_a` and `mac_b`. Members, groups and entries that
point at them are written and read back over a real gRPC session; packets take the member an
entry names, or the one its group picks by hash. Where simple_switch_grpc is installed the
same writes and packets run on it too, and both must pick the same member for every packet.
Every test runs on both engines: the Python one and the native one (the C engine's members and groups).
"""
from __future__ import annotations

import shutil
import socket
import subprocess
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4i, p4r
from google.protobuf import text_format
from p4rt_raw import RawClient, write_codes
from procs import free_port
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target.backends.hashes import crc16, pack_fields
from p4target.native.pipeline import NativePipeline
from p4target.runtime import RuntimeServer

PROGRAM = Path(__file__).parent / "data" / "runtime" / "profiles.p4"
CPU_PORT = 255
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
Entity = p4r.Entity


@pytest.fixture(params=["python", "native"])
def switch(request):
    """The switch on either engine; the native one must run the program itself (no fallback to Python)."""
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", cpu_port=CPU_PORT, engine=request.param)
    port = srv.start()
    srv.load_source(PROGRAM.read_text(), str(PROGRAM))
    assert isinstance(srv.device.loaded().pipeline, NativePipeline) == (request.param == "native")
    client = RawClient(port)
    client.arbitrate(10)
    yield srv, client, Ids(srv.device.loaded().p4info)
    client.close()
    srv.stop()


class Ids:
    """P4Info ids by name, and the entities the tests write."""

    def __init__(self, info: p4i.P4Info):
        self.of = {e.preamble.name: e.preamble.id for kind in ("tables", "actions", "action_profiles")
                   for e in getattr(info, kind)}
        self.selector, self.profile = self.of["MyIngress.ecmp_selector"], self.of["MyIngress.nhop_profile"]

    def member(self, profile: int, member_id: int, action: str = "MyIngress.drop", *params: bytes) -> Entity:
        call = p4r.Action(action_id=self.of[action],
                          params=[p4r.Action.Param(param_id=i + 1, value=v) for i, v in enumerate(params)])
        return Entity(action_profile_member=p4r.ActionProfileMember(action_profile_id=profile, member_id=member_id,
                                                                     action=call))

    def nhop(self, member_id: int, dmac: int) -> Entity:
        """A selector member that sends to the CPU port, marking the packet with `dmac`."""
        return self.member(self.selector, member_id, "MyIngress.set_nhop", dmac.to_bytes(6, "big"), b"\xff")

    def group(self, group_id: int, weights: dict[int, int], max_size: int = 0) -> Entity:
        members = [p4r.ActionProfileGroup.Member(member_id=m, weight=w) for m, w in weights.items()]
        return Entity(action_profile_group=p4r.ActionProfileGroup(
            action_profile_id=self.selector, group_id=group_id, members=members, max_size=max_size))

    def route(self, net: int, **action) -> Entity:
        """An ecmp entry for NET.0.0.0/8; `action`: member_id=, group_id= or action= (a TableAction field)."""
        key = {"member_id": "action_profile_member_id", "group_id": "action_profile_group_id"}
        [(kind, value)] = action.items()
        ta = p4r.TableAction(**{key.get(kind, kind): value})
        return Entity(table_entry=p4r.TableEntry(
            table_id=self.of["MyIngress.ecmp"], action=ta,
            match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=bytes([net, 0, 0, 0]), prefix_len=8))]))


def updates(kind: int, *entities: Entity) -> list[p4r.Update]:
    return [p4r.Update(type=kind, entity=e) for e in entities]


def packet(net: int, i: int) -> bytes:
    return bytes(Ether(dst="00:00:00:00:00:aa", src="00:00:00:00:00:bb") /
                 IP(src=f"192.168.0.{i}", dst=f"{net}.0.0.{i * 7 % 5}") / UDP(sport=1000 + 13 * i, dport=2000 + i))


def selector_hash(frame: bytes) -> int:
    """crc16 over the selector keys (ipv4 src, dst, protocol, udp ports), as BMv2 computes it."""
    ip, udp = IP(frame[14:]), UDP(frame[34:])
    return crc16(pack_fields([(int.from_bytes(socket.inet_aton(ip.src), "big"), 32),
                              (int.from_bytes(socket.inet_aton(ip.dst), "big"), 32),
                              (ip.proto, 8), (udp.sport, 16), (udp.dport, 16)]))


def chosen_marks(client: RawClient, frames: list[bytes]) -> list[int]:
    """The dmac mark of the member each frame ran (sent as PacketOut, back as PacketIn)."""
    marks = []
    for frame in frames:
        client.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=frame)))
        marks.append(client.next_message().packet.payload[5])
    return marks


SELECTION_WRITES = [
    # members created 30, 10, 20, 40, then 10 deleted and 50 created: 50 reuses 10's handle
    *[(INSERT, ("nhop", m, mark)) for m, mark in ((30, 3), (10, 1), (20, 2), (40, 4))],
    (DELETE, ("nhop", 10, 1)), (INSERT, ("nhop", 50, 5)),
    (INSERT, ("group", 1, {40: 1, 20: 1, 50: 1, 30: 1})),
    (INSERT, ("group", 2, {20: 2, 30: 1})),  # weights: member 20 twice as likely
    (INSERT, ("route", 10, {"group_id": 1})), (INSERT, ("route", 11, {"group_id": 2})), (INSERT, ("route", 12, {"member_id": 40})),
]


def apply_selection_writes(client: RawClient, ids: Ids) -> None:
    for kind, (what, *args) in SELECTION_WRITES:
        if what == "route":
            entity = ids.route(args[0], **args[1])
        else:
            entity = getattr(ids, what)(*args)
        assert write_codes(client, *updates(kind, entity)) == ["OK"], (kind, what, args)


def apply_one_shot_writes(client: RawClient, ids: Ids) -> None:
    """The same routes programmed one-shot: weighted action sets straight in the entries."""
    for net, marks_and_weights in ((10, [(1, 1), (2, 2), (3, 1)]), (11, [(4, 3), (5, 1)]), (12, [(6, 1)])):
        entry = ids.route(net, action_profile_action_set=one_shot(ids, *marks_and_weights))
        assert write_codes(client, *updates(INSERT, entry)) == ["OK"], net


FRAMES = [packet(net, i) for net in (10, 11, 12) for i in range(12)]


# ---------------------------------------------------------------------------- writes and reads


def test_members_groups_and_entries_read_back_as_written(switch):
    _, client, ids = switch
    assert write_codes(client, *updates(INSERT, ids.nhop(1, 0xA1), ids.nhop(2, 0xA2),
                                        ids.member(ids.profile, 1, "MyIngress.set_port", b"\x07"))) == ["OK"] * 3
    group = ids.group(7, {1: 1, 2: 3}, max_size=8)
    group.action_profile_group.members[1].watch_port = b"\x05"  # kept and read back; ports never go down here
    assert write_codes(client, *updates(INSERT, group, ids.route(10, group_id=7), ids.route(11, member_id=2))) == ["OK"] * 3
    members = client.read(Entity(action_profile_member=p4r.ActionProfileMember()))  # every profile
    assert [(m.action_profile_member.action_profile_id, m.action_profile_member.member_id) for m in members] == \
        [(ids.selector, 1), (ids.selector, 2), (ids.profile, 1)]
    assert members[2] == ids.member(ids.profile, 1, "MyIngress.set_port", b"\x07")
    [one] = client.read(Entity(action_profile_member=p4r.ActionProfileMember(action_profile_id=ids.profile, member_id=1)))
    assert one == members[2]
    [read_group] = client.read(Entity(action_profile_group=p4r.ActionProfileGroup()))
    assert read_group == group
    entries = client.read(Entity(table_entry=p4r.TableEntry(table_id=ids.of["MyIngress.ecmp"])))
    assert [e.table_entry.action.WhichOneof("type") for e in entries] == \
        ["action_profile_group_id", "action_profile_member_id"]
    # what was read can be written back
    assert write_codes(client, *updates(MODIFY, read_group, members[0], *entries)) == ["OK"] * 4
    [default] = client.read(Entity(table_entry=p4r.TableEntry(table_id=ids.of["MyIngress.ecmp"], is_default_action=True)))
    assert not default.table_entry.HasField("action")  # BMv2: no default action with an action profile
    # a modified member changes what every entry and group naming it runs
    assert write_codes(client, *updates(MODIFY, ids.nhop(2, 0xB2))) == ["OK"]
    assert chosen_marks(client, [packet(11, 0)]) == [0xB2]


def test_bad_writes_get_bmv2s_codes(switch):
    _, client, ids = switch
    assert write_codes(client, *updates(INSERT, ids.nhop(1, 1), ids.nhop(2, 2), ids.group(5, {}))) == ["OK"] * 3
    assert write_codes(client, *updates(
        INSERT,
        ids.nhop(1, 9),  # member id taken
        ids.member(ids.selector, 3, "MyIngress.set_port", b"\x01"),  # not an action of ecmp
        ids.group(6, {1: 0}),  # weights are positive
        ids.group(6, {9: 1}),  # no member 9
        ids.group(6, {1: 2, 2: 2}, max_size=3),  # weights add up past max_size
        Entity(action_profile_group=p4r.ActionProfileGroup(action_profile_id=ids.profile, group_id=1)),  # no selector
        ids.route(10, action=p4r.Action(action_id=ids.of["MyIngress.drop"])),  # indirect tables name members
        ids.route(10, member_id=9), ids.route(10, group_id=9),  # absent
        ids.route(10, group_id=5),  # an empty group
        ids.route(10, action_profile_action_set=p4r.ActionProfileActionSet()),  # one-shot: programmed directly
    )) == ["ALREADY_EXISTS", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "NOT_FOUND", "RESOURCE_EXHAUSTED",
           "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "FAILED_PRECONDITION",
           "INVALID_ARGUMENT"]
    duplicate = ids.group(6, {1: 1})
    duplicate.action_profile_group.members.add(member_id=1, weight=1)
    assert write_codes(client, *updates(INSERT, duplicate)) == ["INVALID_ARGUMENT"]  # use weights instead
    assert write_codes(client, *updates(INSERT, ids.group(6, {1: 1}), ids.route(10, group_id=6), ids.route(11, member_id=2))) \
        == ["OK"] * 3
    assert write_codes(client, *updates(DELETE, ids.nhop(1, 1), ids.nhop(2, 2), ids.group(6, {}))) == \
        ["FAILED_PRECONDITION"] * 3  # still used by a group or an entry
    default = Entity(table_entry=p4r.TableEntry(table_id=ids.of["MyIngress.ecmp"], is_default_action=True,
                                                action=p4r.TableAction(action=p4r.Action(action_id=ids.of["MyIngress.drop"]))))
    assert write_codes(client, *updates(MODIFY, default)) == ["INVALID_ARGUMENT"]
    assert write_codes(client, *updates(DELETE, ids.route(10, group_id=6), ids.route(11, member_id=2), ids.group(6, {}),
                                        ids.nhop(1, 1), ids.nhop(2, 2))) == ["OK"] * 5


def test_rollback_restores_members_and_groups(switch):
    _, client, ids = switch
    assert write_codes(client, *updates(INSERT, ids.nhop(1, 1), ids.group(3, {1: 1}))) == ["OK"] * 2
    before = client.read(Entity(action_profile_member=p4r.ActionProfileMember()),
                         Entity(action_profile_group=p4r.ActionProfileGroup()))
    batch = updates(INSERT, ids.nhop(2, 2)) + updates(MODIFY, ids.group(3, {1: 1, 2: 1})) + updates(INSERT, ids.nhop(1, 1))
    codes = write_codes(client, *batch, atomicity=p4r.WriteRequest.ROLLBACK_ON_ERROR)
    assert codes == ["ABORTED", "ABORTED", "ALREADY_EXISTS"]
    assert client.read(Entity(action_profile_member=p4r.ActionProfileMember()),
                       Entity(action_profile_group=p4r.ActionProfileGroup())) == before


def one_shot(ids: Ids, *marks_and_weights: tuple[int, int]) -> p4r.ActionProfileActionSet:
    """A one-shot action set of set_nhop actions to the CPU port, marked and weighted."""
    nhops = [(ids.nhop(0, mark).action_profile_member.action, weight) for mark, weight in marks_and_weights]
    return p4r.ActionProfileActionSet(action_profile_actions=[
        p4r.ActionProfileAction(action=action, weight=weight) for action, weight in nhops])


def test_one_shot_entries_hide_their_members_and_exclude_direct_programming(switch):
    _, client, ids = switch
    first = ids.route(10, action_profile_action_set=one_shot(ids, (1, 1), (2, 2)))
    second = ids.route(11, action_profile_action_set=one_shot(ids, (3, 1)))
    assert write_codes(client, *updates(INSERT, first, second)) == ["OK", "OK"]
    assert client.read(Entity(table_entry=p4r.TableEntry(table_id=ids.of["MyIngress.ecmp"]))) == [first, second]
    assert client.read(Entity(action_profile_member=p4r.ActionProfileMember()),
                       Entity(action_profile_group=p4r.ActionProfileGroup())) == []  # hidden, as on BMv2
    assert write_codes(client, *updates(INSERT, ids.nhop(7, 7), ids.group(7, {}))) == ["INVALID_ARGUMENT"] * 2  # no mixing
    assert {*chosen_marks(client, [packet(10, i) for i in range(12)])} == {1, 2}
    changed = ids.route(10, action_profile_action_set=one_shot(ids, (4, 1)))
    assert write_codes(client, *updates(MODIFY, changed)) == ["OK"]
    assert chosen_marks(client, [packet(10, 0), packet(11, 0)]) == [4, 3]
    assert write_codes(client, *updates(DELETE, changed, second)) == ["OK", "OK"]
    assert write_codes(client, *updates(INSERT, ids.nhop(7, 7), ids.route(12, member_id=7))) == ["OK", "OK"]  # freed
    assert write_codes(client, *updates(INSERT, first)) == ["INVALID_ARGUMENT"]  # now programmed directly


# ---------------------------------------------------------------------------- packets


def test_packets_run_the_named_member_or_the_one_the_hash_picks(switch):
    _, client, ids = switch
    apply_selection_writes(client, ids)
    marks = chosen_marks(client, FRAMES)
    # BMv2: a group's members in handle order (30:0, 50:1, 20:2, 40:3), each weight times, hash % count
    by_handle = {1: [3, 5, 2, 4], 2: [3, 2, 2]}  # group 2: 20's second copy takes the next free handle (4)
    expected = []
    for frame in FRAMES:
        net = frame[30]
        choices = by_handle.get({10: 1, 11: 2}.get(net))
        expected.append(choices[selector_hash(frame) % len(choices)] if choices else 4)  # net 12: member 40
    assert marks == expected
    assert len(set(marks[:12])) > 1 and len(set(marks[12:24])) > 1  # the hash spreads packets over members


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("simple_switch_grpc") is None or shutil.which("p4c") is None,
                    reason="p4c and simple_switch_grpc are not on PATH (source /opt/p4ref/env.sh)")
@pytest.mark.parametrize("apply_writes", [apply_selection_writes, apply_one_shot_writes], ids=["members", "one-shot"])
def test_bmv2_picks_the_same_member_for_every_packet(switch, tmp_path, apply_writes):
    _, client, ids = switch
    apply_writes(client, ids)
    ours = chosen_marks(client, FRAMES)
    p4info_path = tmp_path / "profiles.p4info.txtpb"
    subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(tmp_path),
                    "--p4runtime-files", str(p4info_path), str(PROGRAM)], check=True, capture_output=True, timeout=300)
    with bmv2_switch(tmp_path) as port:
        bmv2 = RawClient(port)
        try:
            bmv2.arbitrate(10)
            bmv2.set_pipeline(p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, p4r.ForwardingPipelineConfig(
                p4info=text_format.Parse(p4info_path.read_text(), p4i.P4Info()),
                p4_device_config=(tmp_path / "profiles.json").read_bytes()))
            apply_writes(bmv2, ids)
            assert chosen_marks(bmv2, FRAMES) == ours
        finally:
            bmv2.close()


class bmv2_switch:
    """simple_switch_grpc with no ports on free local TCP ports; yields its P4Runtime port."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir

    def __enter__(self) -> int:
        grpc_port, thrift_port = free_port(), free_port()
        self.log = open(self.log_dir / "simple_switch_grpc.log", "wb")
        self.proc = subprocess.Popen(["simple_switch_grpc", "--no-p4", "--device-id", "1", "--thrift-port",
                                      str(thrift_port), "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}",
                                      "--cpu-port", str(CPU_PORT)], stdout=self.log, stderr=subprocess.STDOUT)
        channel = grpc.insecure_channel(f"127.0.0.1:{grpc_port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=30)
        finally:
            channel.close()
        return grpc_port

    def __exit__(self, *exc) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()

