"""Arbitration bookkeeping and byte-string codec of the P4Runtime server (no gRPC)."""
import grpc
import pytest
from finsy.proto import p4r

from p4target.runtime import codec
from p4target.runtime.arbitration import Arbitration, Session
from p4target.runtime.errors import RuntimeStatus


def drain(session: Session) -> list[tuple[int, int]]:
    """(status code, election id) of every arbitration message queued for `session`."""
    out = []
    while not session._outbox.empty():
        msg = session._outbox.get_nowait()
        assert isinstance(msg, p4r.StreamMessageResponse)
        arb = msg.arbitration
        out.append((arb.status.code, (arb.election_id.high << 64) | arb.election_id.low))
    return out


OK, ALREADY_EXISTS, NOT_FOUND = 0, 6, 5


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
    assert arb.primaries() == [c]
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
    assert set(arb.primaries()) == {a, c}


def test_session_without_election_id_is_backup():
    arb = Arbitration()
    a = Session(1)
    arb.update(a, "", None)
    assert drain(a) == [(NOT_FOUND, 0)]
    assert arb.primaries() == []


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
