"""The wire format's derived views (numpy codec, struct, offsets, scapy layer) agree byte for byte;
framing round-trips."""
import numpy as np
import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import raw

from hosts import codec
from protocol import wire
from protocol.layer import Agg


@pytest.mark.parametrize("lanes", wire.LANE_COUNTS)
def test_codec_matches_scapy_layer_and_struct(lanes):
    rng = np.random.default_rng(lanes)
    values = rng.integers(-2**31, 2**31, size=(5, lanes), dtype=np.int64).astype(np.int32)
    flags = np.array([0, wire.FLAG_POOL, wire.FLAG_RETX, wire.FLAG_RESULT | wire.FLAG_OVERFLOW, 0xF0])
    arr = codec.encode(7, np.arange(5) + 300, np.arange(5) + 2**32 - 2, flags, values, workers=3, scale=-5)
    for i in range(5):
        f = int(flags[i])
        ref = Agg(job_id=7, slot=300 + i, seq=(2**32 - 2 + i) % 2**32, pool=f >> 7 & 1, result=f >> 6 & 1,
                  retx=f >> 5 & 1, overflow=f >> 4 & 1, workers=3, scale=-5, values=[int(v) for v in values[i]])
        assert arr[i].tobytes() == raw(ref)
        header = wire.HEADER_STRUCT.pack(7, 300 + i, (2**32 - 2 + i) % 2**32, f, 0, lanes, 3, -5)
        assert arr[i].tobytes()[:wire.HEADER_BYTES] == header
        assert arr[i].tobytes()[wire.OFFSETS["lanes"]:wire.OFFSETS["lanes"] + 2] == lanes.to_bytes(2, "big")
    assert len(arr.tobytes()) == 5 * wire.packet_bytes(lanes) == 5 * (16 + 4 * lanes)


def test_decode_roundtrip_and_scapy_dissects_it():
    values = np.arange(64, dtype=np.int32).reshape(2, 32) - 40
    data = codec.encode(2, [0, 1], [10, 11], [0, wire.FLAG_POOL], values, scale=12).tobytes()
    arr = codec.decode(data, 32)
    assert arr["seq"].tolist() == [10, 11]
    assert arr["flags"].tolist() == [0, wire.FLAG_POOL]
    assert arr["scale"].tolist() == [12, 12]
    np.testing.assert_array_equal(arr["values"], values)
    pkt = Ether(codec.frame(data[:144], "02:00:00:00:00:01", "02:00:00:00:00:02", "10.0.0.1", "10.0.0.9", 5000))
    assert pkt[Agg].job_id == 2 and pkt[Agg].seq == 10 and pkt[Agg].values == values[0].tolist()
    assert pkt[IP].chksum == IP(raw(pkt[IP]))[IP].chksum  # our header checksum equals scapy's
    assert pkt[UDP].dport == wire.AGG_PORT


def test_decode_rejects_bad_buffers():
    good = codec.encode(1, 0, 0, 0, np.zeros((1, 32), np.int32)).tobytes()
    with pytest.raises(codec.CodecError, match="not a whole number"):
        codec.decode(good[:-1], 32)
    with pytest.raises(codec.CodecError, match="lanes=32, expected 64"):
        codec.decode(good + bytes(128), 64)
    with pytest.raises(wire.WireError, match="not supported"):
        codec.packet_dtype(16)


def test_frame_roundtrip_and_errors():
    payload = b"\x01\x02\x03"
    f = codec.frame(payload, "aa:bb:cc:dd:ee:01", "aa:bb:cc:dd:ee:02", "10.0.1.1", "10.0.2.2", 1234, 4321)
    parsed = codec.parse_frame(f)
    assert parsed == codec.Frame("aa:bb:cc:dd:ee:02", "aa:bb:cc:dd:ee:01", "10.0.1.1", "10.0.2.2", 1234, 4321,
                                 payload)
    with pytest.raises(codec.CodecError, match="too short"):
        codec.parse_frame(f[:20])
    arp = bytes(Ether(type=0x0806) / (b"\x00" * 40))
    with pytest.raises(codec.CodecError, match="ethertype=0x0806"):
        codec.parse_frame(arp)
