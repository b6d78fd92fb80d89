"""Hash/checksum algorithms against known vectors (BMv2's definitions)."""
import random

from p4target.backends import hashes

CHECK = b"123456789"
# The classic IPv4 header example with its checksum field zeroed; checksum is 0xB861.
IPV4_HDR = bytes.fromhex("450000730000400040110000c0a80001c0a800c7")


def test_crc_check_values():
    assert hashes.crc32(CHECK) == 0xCBF43926  # CRC-32/ISO-HDLC
    assert hashes.crc16(CHECK) == 0xBB3D  # CRC-16/ARC, BMv2's crc16


def test_csum16_ipv4_header_and_edge_cases():
    assert hashes.csum16(IPV4_HDR) == 0xB861
    filled = IPV4_HDR[:10] + (0xB861).to_bytes(2, "big") + IPV4_HDR[12:]
    assert hashes.csum16(filled) == 0  # a correct header sums to 0xFFFF
    assert hashes.csum16(b"") == 0xFFFF
    assert hashes.csum16(b"\xff\xff") == 0x0000
    assert hashes.csum16(b"\x01") == hashes.csum16(b"\x01\x00")  # odd length pads with zero


def test_xor16_and_identity():
    assert hashes.xor16(b"\x12\x34\x56") == 0x1234 ^ 0x5600
    assert hashes.identity(b"\x01\x02") == 0x0102
    assert hashes.identity(bytes(range(1, 11))) == 0x0102030405060708


def test_pack_fields_is_msb_first_and_pads_the_tail():
    assert hashes.pack_fields([(0x4, 4), (0x5, 4), (0xAB, 8)]) == b"\x45\xab"
    assert hashes.pack_fields([(1, 1)]) == b"\x80"
    assert hashes.pack_fields([(0x1FF, 9), (0, 7)]) == b"\xff\x80"


def test_v1model_hash_base_and_modulo():
    data = hashes.pack_fields([(0x0A000001, 32), (0x0A000002, 32)])
    h = hashes.crc16(data)
    assert hashes.v1model_hash("crc16", 10, data, 100) == 10 + h % 100
    assert hashes.v1model_hash("crc32", 0, data, 0) == hashes.crc32(data)
    r = random.Random(1)
    assert 5 <= hashes.v1model_hash("random", 5, b"", 10, r) < 15
