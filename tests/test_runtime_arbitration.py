"""Arbitration bookkeeping, role scopes and the byte-string codec of the P4Runtime server (no gRPC)."""
import grpc
import pytest
from finsy.proto import p4r
from google.protobuf import any_pb2

from p4target.runtime import codec
from p4target.runtime.arbitration import Arbitration
from p4target.runtime.errors import RuntimeStatus
from p4target.runtime.roles import P4RoleConfig, RoleScope
from p4target.runtime.stream import Session


def drain(session: Session) -> list[tuple[int, int]]:
    """(status code, election id) of every arbitration message queued for `session`."""
    out = []
    for msg in session.take():
        assert isinstance(msg, p4r.StreamMessageResponse)
        arb = msg.arbitration
        out.append((arb.status.code, (arb.election_id.high << 64) | arb.election_id.low))
    return out


OK, ALREADY_EXISTS, NOT_FOUND = 0, 6, 5
PACKET_IN = p4r.StreamMessageResponse(packet=p4r.PacketIn(payload=b"x"))


def test_highest_election_id_is_primary_and_everyone_is_told():
    arb = Arbitration()
    a, b = Session(1), Session(1)
    arb.update(a, "", 10)
    assert drain(a) == [(OK, 10)]
    arb.update(b, "", 5)
    assert drain(b) == [(ALREADY_EXISTS, 10)]
    assert drain(a) == []
    c = Session(1)
    arb.update(c, "", 20)
    assert drain(a) == [(ALREADY_EXISTS, 20)]
    assert drain(b) == [(ALREADY_EXISTS, 20)]
    assert drain(c) == [(OK, 20)]
    assert arb.recipients(PACKET_IN) == [c]
    arb.check_primary("", 20)
    with pytest.raises(RuntimeStatus) as err:
        arb.check_primary("", 10)
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED


def test_primary_leaving_leaves_no_primary_until_highest_id_is_reclaimed():
    arb = Arbitration()
    a, b = Session(1), Session(1)
    arb.update(a, "", 10)
    arb.update(b, "", 5)
    drain(a), drain(b)
    arb.remove(a)
    assert drain(b) == [(NOT_FOUND, 10)]
    with pytest.raises(RuntimeStatus):
        arb.check_primary("", 5)
    arb.update(b, "", 10)  # what finsy does on NOT_FOUND
    assert drain(b) == [(OK, 10)]
    arb.check_primary("", 10)


def test_duplicate_election_id_is_rejected_and_roles_are_separate():
    arb = Arbitration()
    a, b, c = Session(1), Session(1), Session(1)
    arb.update(a, "", 10)
    with pytest.raises(RuntimeStatus) as err:
        arb.update(b, "", 10)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "already in use" in err.value.message
    arb.update(c, "other", 10)  # another role may use the same id
    assert drain(c) == [(OK, 10)]
    assert set(arb.recipients(PACKET_IN)) == {a, c}


def test_session_without_election_id_is_backup():
    arb = Arbitration()
    a = Session(1)
    arb.update(a, "", None)
    assert drain(a) == [(NOT_FOUND, 0)]
    assert arb.recipients(PACKET_IN) == []


def test_codec_accepts_padded_rejects_wide_and_encodes_canonically():
    assert codec.decode(b"\x00\x00\x0a", 9, "f") == 10
    assert codec.decode(b"\x01\xff", 9, "f") == 511
    with pytest.raises(RuntimeStatus) as err:
        codec.decode(b"\x02\x00", 9, "port")
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "9 bits" in err.value.message
    with pytest.raises(RuntimeStatus):
        codec.decode(b"", 8, "f")
    assert codec.encode(0) == b"\x00"
    assert codec.encode(0x0A000001) == b"\x0a\x00\x00\x01"
    assert codec.encode(256) == b"\x01\x00"
    packed = codec.pack_fields([255, 0], [9, 7])
    assert packed == b"\x7f\x80"
    assert codec.unpack_fields(packed + b"rest", [9, 7]) == [255, 0]


# -- roles (p4target.runtime.roles): the scope a role's primary announced --------------------------

def role_scope(**fields) -> RoleScope:
    config = any_pb2.Any()
    config.Pack(P4RoleConfig(**fields))
    return RoleScope.parse("r", config)


def table_update(table_id: int) -> p4r.Update:
    return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=p4r.TableEntry(table_id=table_id)))


def test_role_writes_only_its_scope_and_the_default_role_writes_everything():
    arb = Arbitration()
    primary, learner, other = Session(1), Session(1), Session(1)
    arb.update(primary, "", 1)
    arb.update(learner, "learner", 1, role_scope(shared_p4_ids=[100, 200]))
    arb.update(other, "other", 1, role_scope(exclusive_p4_ids=[200], can_push_pipeline=True))
    arb.check_write("learner", [table_update(100)])
    with pytest.raises(RuntimeStatus) as err:
        arb.check_write("learner", [table_update(100), table_update(300)])
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    assert "update 1" in err.value.message and "P4 id 300" in err.value.message
    with pytest.raises(RuntimeStatus) as err:
        arb.check_write("learner", [table_update(200)])  # shared with it, but "other" holds it exclusively
    assert "exclusively" in err.value.message
    group = p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(
        packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
            multicast_group_entry=p4r.MulticastGroupEntry(multicast_group_id=1))))
    with pytest.raises(RuntimeStatus):
        arb.check_write("learner", [group])
    arb.check_write("", [table_update(200), table_update(300), group])
    arb.check_write("other", [table_update(200)])
    with pytest.raises(RuntimeStatus) as err:
        arb.check_pipeline("learner")
    assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
    arb.check_pipeline("other")
    arb.check_pipeline("")
    entities = [table_update(100).entity, table_update(300).entity]
    assert arb.readable("learner", entities) == entities[:1]
    assert arb.readable("", entities) == entities


def test_stream_messages_go_to_the_roles_that_take_them():
    arb = Arbitration()
    primary, punted, quiet = Session(1), Session(1), Session(1)
    arb.update(primary, "", 1)
    arb.update(punted, "punted", 1, role_scope(shared_p4_ids=[7], receives_packet_ins=True,
                                               packet_in_filter=P4RoleConfig.PacketFilter(metadata_id=1, value=b"\x02")))
    arb.update(quiet, "quiet", 1, role_scope(shared_p4_ids=[8]))

    def packet_in(ingress_port: bytes) -> p4r.StreamMessageResponse:
        return p4r.StreamMessageResponse(packet=p4r.PacketIn(
            payload=b"x", metadata=[p4r.PacketMetadata(metadata_id=1, value=ingress_port)]))

    assert set(arb.recipients(packet_in(b"\x02"))) == {primary, punted}
    assert arb.recipients(packet_in(b"\x03")) == [primary]
    digest = p4r.StreamMessageResponse(digest=p4r.DigestList(digest_id=8))
    assert set(arb.recipients(digest)) == {primary, quiet}


def test_a_role_config_of_another_type_is_invalid():
    config = any_pb2.Any()
    config.Pack(p4r.Role(name="not a role config"))
    with pytest.raises(RuntimeStatus) as err:
        RoleScope.parse("r", config)
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT and "stratum.P4RoleConfig" in err.value.message
