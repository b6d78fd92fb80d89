"""Constructs the C back end (p4target/backends/c.py) once left to the Python engine, now native
when a program comes as p4c's BMv2 JSON: parser value sets (one of 96-bit values too), range
matches on a 96-bit key, digests of 128- and 72-bit fields, parser transition keys wider than
128 bits (a value set's too) and lookaheads wider than 128 bits.

Each program under tests/data/native_gaps/ compiles with p4c without a warning; its JSON is loaded
on the native engine (no fallback, no warning line), on the Python engine and on simple_switch, the
source on the native engine too (through our lowering), and all of them
send the same packets, per port and in order (and queue the same digests), before and after the
control plane writes value sets (also over P4Runtime, to a native RuntimeServer) and table entries.
"""
from __future__ import annotations

import contextlib
import ctypes
import re
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import bmv2_ref
import pytest
from bm_thrift import BmClient
from finsy.proto import p4i, p4r
from google.protobuf import text_format
from p4rt_raw import RawClient

from p4target import state as st
from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.native.engine import Trace
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.runtime import RuntimeServer
from p4target.runtime.bmv2_thrift import wire

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import fuzz_engine as fz  # noqa: E402

# The reference runs need BMv2; the sanitizer test does not (it never skips with them).
NEEDS_BMV2 = pytest.mark.skipif(bool(bmv2_ref.missing()), reason=bmv2_ref.missing() or "-")

DATA = Path(__file__).parent / "data" / "native_gaps"
ETH = bytes.fromhex("000000000001" "000000000002")


def p4c(name: str, out: Path) -> tuple[Path, Path]:
    """p4c's JSON and P4Info for tests/data/native_gaps/NAME.p4; p4c must print nothing (no warning)."""
    p4info = out / f"{name}.p4info.txtpb"
    done = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out),
                           "--p4runtime-files", str(p4info), str(DATA / f"{name}.p4")], capture_output=True, text=True)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stdout + done.stderr
    return out / f"{name}.json", p4info


@contextlib.contextmanager
def targets(name: str, folder: Path, caplog: pytest.LogCaptureFixture) -> Iterator[tuple[Path, Path, dict]]:
    """(JSON, P4Info, {target name: pipeline or Bmv2Switch}) for tests/data/native_gaps/NAME.p4."""
    json_path, p4info = p4c(name, folder)
    program = bmv2_json.load_file(str(json_path))
    python = make_pipeline(program, "python")
    natives = {"native": make_pipeline(program, "native"),
               "native from source": make_pipeline(load_program(str(DATA / f"{name}.p4")), "native")}
    try:
        for native in natives.values():
            assert isinstance(native, NativePipeline)  # no fallback to the Python engine
        assert [r.getMessage() for r in caplog.records if r.name == "aggnet.native"] == []  # nor its warning line
        with bmv2_ref.Bmv2Switch(str(json_path), python.state.schema) as bmv2:
            yield json_path, p4info, {"python": python, **natives, "bmv2": bmv2}
    finally:
        for native in natives.values():
            if hasattr(native, "close"):
                native.close()


def outputs(targets: dict, packets: list[tuple[int, bytes]]) -> dict[str, dict[int, list[bytes]]]:
    """The packets out of each target, per port."""
    return {name: bmv2_ref.observe(t, packets).outputs for name, t in targets.items()}


def same_everywhere(targets: dict, packets: list[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    """What every target sent for `packets` (asserted equal across them)."""
    out = outputs(targets, packets)
    for name, got in out.items():
        assert got == out["bmv2"], f"{name} differs from simple_switch"
    return out["bmv2"]


# --------------------------------------------------------------------------- parser value sets

TAG_IDS = (0x1, 0x1_0000_0000_0000_0000, 0xFFFF_FFFF_FFFF_FFFF_FFFF_FFFF, 0x1_0000_0000_0000_0001)


def tagged(ether_type: int, tag_id: int) -> bytes:
    return ETH + ether_type.to_bytes(2, "big") + tag_id.to_bytes(12, "big") + b"\x00" + b"payload"


VS_PACKETS = [(0, tagged(t, i)) for t in (0x88B5, 0x9000, 0x0800) for i in TAG_IDS]


def canonical(value: int) -> bytes:
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


class Runtime:
    """A native RuntimeServer on 127.0.0.1 given p4c's JSON and P4Info over P4Runtime."""

    def __init__(self, json_path: Path, p4info_path: Path):
        self.server = RuntimeServer(device_id=1, address="127.0.0.1:0", engine="native")
        self.client = None
        try:
            self.client = RawClient(self.server.start())
            self.client.arbitrate(10)
            info = text_format.Parse(p4info_path.read_text(), p4i.P4Info())
            self.value_sets = {vs.preamble.name: vs.preamble.id for vs in info.value_sets}
            self.client.set_pipeline(p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                                     p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=json_path.read_bytes()))
        except BaseException:
            self.close()
            raise

    def value_set_write(self, name: str, members: list[tuple[int, ...]]) -> None:
        entry = p4r.ValueSetEntry(value_set_id=self.value_sets[name], members=[
            p4r.ValueSetMember(match=[p4r.FieldMatch(field_id=i + 1, exact=p4r.FieldMatch.Exact(value=canonical(v)))
                                      for i, v in enumerate(m)]) for m in members])
        self.client.write([p4r.Update(type=p4r.Update.MODIFY, entity=p4r.Entity(value_set_entry=entry))])

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        self.server.stop()


@pytest.mark.bmv2
@NEEDS_BMV2
def test_value_sets_native_from_p4c_json(tmp_path, caplog):
    with targets("value_sets", tmp_path, caplog) as (json_path, p4info, ts):
        run_value_sets(Runtime(json_path, p4info), ts)


def run_value_sets(runtime: Runtime, ts: dict) -> None:
    thrift = None
    try:
        assert getattr(runtime.server.pipeline, "engine_name", "python") == "native"
        ts["p4runtime"] = runtime.server.pipeline
        thrift = BmClient(ts["bmv2"].thrift_port)
        widths = {"VsParser.tag_types": 2, "VsParser.marked_ids": 12}  # bytes of each set's values

        def write(name: str, members: list[tuple[int, ...]]) -> None:
            for t in ("python", "native", "native from source"):
                ts[t].state.value_set_write(name, members)
            runtime.value_set_write(name, members)
            thrift.std("bm_parse_vset_clear", (wire.STRING, name))  # simple_switch_CLI's pvs_add pads wrongly
            for (value,) in members:
                thrift.std("bm_parse_vset_add", (wire.STRING, name), (wire.STRING, value.to_bytes(widths[name], "big")))

        assert same_everywhere(ts, VS_PACKETS) == {1: [data for _, data in VS_PACKETS]}  # empty sets: no tags
        write("VsParser.tag_types", [(0x88B5,), (0x9000,)])
        write("VsParser.marked_ids", [(TAG_IDS[1],), (TAG_IDS[2],)])
        out = same_everywhere(ts, VS_PACKETS)
        assert [data[-8] for data in out[2]] == [0, 0xEE, 0xEE, 0] * 2  # the tags' mark byte
        assert out[1] == [data for _, data in VS_PACKETS[8:]]
        write("VsParser.marked_ids", [(TAG_IDS[3],)])  # differs from TAG_IDS[1] in both 64-bit words
        out = same_everywhere(ts, VS_PACKETS)
        assert [data[-8] for data in out[2]] == [0, 0, 0, 0xEE] * 2
    finally:
        if thrift is not None:
            thrift.close()
        runtime.close()


# --------------------------------------------------------------------------- range on a 96-bit key

LOW, HIGH = 0x1_FFFF_FFFF_FFFF_FF00, 0x2_0000_0000_0000_00FF  # a range across a 64-bit word boundary
ADDRS = (0, LOW - 1, LOW, LOW + 0x80, 0x2_0000_0000_0000_0000, HIGH, HIGH + 1, 0x1_0000_0000_0000_0000 | 0x80,
         0x3_0000_0000_0000_0080, 0xFFFF_FFFF_FFFF_FFFF_FFFF_FFFF)


def wide(addr: int, kind: int) -> bytes:
    return ETH + b"\x12\x34" + addr.to_bytes(12, "big") + bytes([kind, 0])


@pytest.mark.bmv2
@NEEDS_BMV2
def test_range_on_a_96_bit_key_native_from_p4c_json(tmp_path, caplog):
    with targets("wide_range", tmp_path, caplog) as (_, _, ts):
        run_wide_range(ts)


def run_wide_range(ts: dict) -> None:
    entries = [st.TableEntry({"hdr.w.addr": st.Range(LOW, HIGH), "hdr.w.kind": st.Exact(1)}, "WrIngress.send",
                             {"port": 2, "tag": 0xA1}, priority=10),
               st.TableEntry({"hdr.w.addr": st.Range(0, 0x1_0000_0000_0000_0000 | 0xFF), "hdr.w.kind": st.Exact(1)},
                             "WrIngress.send", {"port": 3, "tag": 0xB2}, priority=5),
               st.TableEntry({"hdr.w.addr": st.Range(0x1_0000_0000_0000_0000, 0xFFFF_FFFF_FFFF_FFFF_FFFF_FFFF),
                              "hdr.w.kind": st.Exact(2)}, "WrIngress.send", {"port": 4, "tag": 0xC3}, priority=1)]
    for t in ts.values():
        for e in entries:
            t.state.insert_entry("WrIngress.classify", st.TableEntry(e.match, e.action, dict(e.params), e.priority))
    packets = [(0, wide(a, k)) for k in (1, 2) for a in ADDRS]
    out = same_everywhere(ts, packets)
    assert {port: [data[-1] for data in sent] for port, sent in out.items()} == \
        {2: [0xA1] * 4, 3: [0xB2] * 2, 4: [0xC3] * 9}


# --------------------------------------------------------------------------- digests of wide fields

LEARN_BYTES = (16, 1, 9, 2)  # learn_t: bit<128> a, bit<8> c, bit<72> b, bit<9> port
LEA = struct.Struct("<4sQiiQI")  # BMv2's learning notification header, then its samples' bytes
_AF_SP, _NN_SUB, _NN_SUB_SUBSCRIBE, _NN_SOL_SOCKET, _NN_RCVTIMEO = 1, 33, 1, 0, 5


class Learned:
    """simple_switch's learning notifications (nanomsg SUB on its --notifications-addr), as digests."""

    def __init__(self, address: str):
        self.nn = nn = ctypes.CDLL(bmv2_ref.NANOMSG, use_errno=True)
        nn.nn_socket.argtypes = [ctypes.c_int, ctypes.c_int]
        nn.nn_connect.argtypes = [ctypes.c_int, ctypes.c_char_p]
        nn.nn_setsockopt.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        nn.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self.fd = nn.nn_socket(_AF_SP, _NN_SUB)
        timeout = ctypes.c_int(200)
        nn.nn_setsockopt(self.fd, _NN_SUB, _NN_SUB_SUBSCRIBE, b"LEA|", 4)
        nn.nn_setsockopt(self.fd, _NN_SOL_SOCKET, _NN_RCVTIMEO, ctypes.byref(timeout), ctypes.sizeof(timeout))
        assert nn.nn_connect(self.fd, address.encode()) >= 0
        self.buf = ctypes.create_string_buffer(1 << 16)

    def next(self) -> list[tuple[int, ...]] | None:
        """The samples of the next notification, or None after the receive timeout."""
        n = self.nn.nn_recv(self.fd, self.buf, len(self.buf), 0)
        if n < 0:
            return None
        msg = ctypes.string_at(self.buf, n)
        *_, count = LEA.unpack_from(msg)
        size, samples = sum(LEARN_BYTES), []
        for s in range(count):
            sample, at = msg[LEA.size + s * size:LEA.size + (s + 1) * size], 0
            values = []
            for nbytes in LEARN_BYTES:
                values.append(int.from_bytes(sample[at:at + nbytes], "big"))
                at += nbytes
            samples.append(tuple(values))
        return samples

    def close(self) -> None:
        self.nn.nn_close(self.fd)


def learn_frame(a: int, b: int, c: int) -> bytes:
    return ETH + b"\x12\x34" + a.to_bytes(16, "big") + b.to_bytes(9, "big") + bytes([c])


@pytest.mark.bmv2
@NEEDS_BMV2
def test_digest_of_wide_fields_native_from_p4c_json(tmp_path, caplog):
    with targets("wide_digest", tmp_path, caplog) as (_, _, ts):
        run_wide_digest(ts)


def run_wide_digest(ts: dict) -> None:
    bmv2 = ts["bmv2"]
    learned = Learned(f"ipc://{bmv2._dir}/notifications.ipc")
    try:
        warm = 0  # a subscriber sees only what is published after it joined: wait for a first notification
        while True:
            bmv2.process(0, learn_frame(warm, 0, 0))
            if learned.next() is not None:
                break
            warm += 1
        while learned.next() is not None:  # the warm-up packets' notifications still on their way
            pass
        values = [((1 << 127) | i, (0xAB << 64) | (1 << 63) | i, i) for i in range(1, 6)]
        packets = [(i % 3 + 1, learn_frame(*v)) for i, v in enumerate(values)]
        same_everywhere(ts, packets)
        expected = [(a, c, b, port) for (a, b, c), (port, _) in zip(values, packets)]
        for t in ("python", "native", "native from source"):
            assert ts[t].state.drain_digests() == [("learn_t", v) for v in expected], t
        samples: list[tuple[int, ...]] = []
        for _ in range(100):  # BMv2 may hold samples in its learn buffer a while (a give-up, not a bound)
            samples += learned.next() or []
            if len(samples) >= len(expected):
                break
        assert samples == expected
    finally:
        learned.close()


# --------------------------------------------------------------------------- a select on a 264-bit key

SRC, DST = 0x20010DB8_00000000_00000000_00000001, 0x20010DB8_00000000_00000000_00000002
LINK_LOCAL = 0xFE80 << 112


def ipv6(src: int, dst: int, next_hdr: int) -> bytes:
    return ETH + b"\x86\xdd" + bytes([0x60, 0, 0, 0, 0, 8, next_hdr, 64]) + src.to_bytes(16, "big") + \
        dst.to_bytes(16, "big") + b"payload!"


# (packet, the parse state wide_select.p4 takes: 1 exact, 2 src prefix, 3 dst bits, 4 straddle, 5 value set, 6 other,
# 7 a range, which p4c and our lowering turn into masked cases)
WS_CASES = [(ipv6(SRC, DST, 17), 1), (ipv6(SRC, DST, 6), 6), (ipv6(SRC, DST + 1, 17), 6),
            (ipv6(SRC ^ (1 << 127), DST, 17), 6),  # one bit off in the top word of the key
            (ipv6(SRC | 0xFFFF, LINK_LOCAL | 5, 6), 2), (ipv6(SRC, 0xFEBF << 112, 6), 2),
            (ipv6(SRC, 0xFEC0 << 112, 6), 6), (ipv6(SRC ^ (1 << 64), LINK_LOCAL, 6), 6),
            (ipv6(0, (1 << 64) | 0xFF, 0), 3), (ipv6(7, (1 << 64) | 0xFF | (0xAB << 32), 9), 3),
            (ipv6(0, (1 << 64) | 0x1FF, 0), 6), (ipv6(0, (1 << 65) | 0xFF, 0), 6),
            (ipv6(0xFFFFFFFF << 32, 0, 0x3A), 4), (ipv6((0xFFFFFFFF << 32) | 1, 9, 0x3A), 4),
            (ipv6((1 << 64) | (0xFFFFFFFF << 32), 0, 0x3A), 6), (ipv6(0x7FFFFFFF << 32, 0, 0x3A), 6),
            (ipv6(0xFFFFFFFF << 32, 0, 0x3B), 6), (ipv6(5, 6, 7), 6), (ipv6(5, 6, 8), 6),
            (ipv6(SRC, DST, 0x80), 7), (ipv6(1, 2, 0x84), 7), (ipv6(1, 2, 0x85), 6), (ipv6(1, 2, 0x7F), 6)]
FLOWS = [(5, 6, 7), ((1 << 128) - 1, 1 << 127, 0xFF)]


@pytest.mark.bmv2
@NEEDS_BMV2
def test_select_on_two_128_bit_fields_native_from_p4c_json(tmp_path, caplog):
    with targets("wide_select", tmp_path, caplog) as (_, _, ts):
        thrift = BmClient(ts["bmv2"].thrift_port)
        try:
            run_wide_select(ts, thrift)
        finally:
            thrift.close()


def run_wide_select(ts: dict, thrift: BmClient) -> None:
    packets = [(0, data) for data, _ in WS_CASES] + [(0, ipv6(*FLOWS[1]))]
    paths = [path for _, path in WS_CASES]
    out = same_everywhere(ts, packets + [(0, ETH + b"\x08\x00" + b"not ipv6")])
    assert [data[21] for data in out[2]] == paths + [6]  # the hop limit: the state taken
    assert out[1] == [ETH + b"\x08\x00" + b"not ipv6"]
    for t in ("python", "native", "native from source"):
        ts[t].state.value_set_write("WsParser.flows", FLOWS)
    for src, dst, next_hdr in FLOWS:  # BMv2 takes a member as its fields' bytes, one after the other
        thrift.std("bm_parse_vset_add", (wire.STRING, "WsParser.flows"),
                   (wire.STRING, src.to_bytes(16, "big") + dst.to_bytes(16, "big") + bytes([next_hdr])))
    out = same_everywhere(ts, packets)
    assert [data[21] for data in out[2]] == [5 if data == ipv6(*FLOWS[0]) else path for data, path in WS_CASES] + [5]


# --------------------------------------------------------------------------- lookaheads of 144 to 200 bits

PROBE_BODY = 0x00112233_44556677_8899AABB_CCDDEEFF_00112233
MIDDLE = 0xFFFFFFFF_FFFFFFFF << 48  # the bits wide_lookahead.p4's masked case looks at


def probe(kind: int, body: int, rest: bytes = b"tail bytes after the probe") -> bytes:
    return ETH + b"\x12\x34" + bytes([kind]) + body.to_bytes(20, "big") + rest


# (packet, the parse state wide_lookahead.p4 takes: 1 exact, 2 masked, 3 low byte, 4 other)
WL_CASES = [(probe(1, PROBE_BODY), 1), (probe(1, PROBE_BODY ^ 1), 4), (probe(1, PROBE_BODY ^ (1 << 159)), 4),
            (probe(2, MIDDLE), 2), (probe(2, MIDDLE | 0xFF | (1 << 159)), 2), (probe(2, MIDDLE ^ (1 << 100)), 4),
            (probe(3, MIDDLE), 4), (probe(7, 0xFF), 3), (probe(2, 0xFF), 3), (probe(2, MIDDLE, b"\x00\x00\x00\x00"), 2)]


def peeked(data: bytes, path: int) -> bytes:
    """What wide_lookahead.p4 sends for `data`: 200 bits, then 160 bits (through metadata) and 144 bits (as a
    header) looked at after Ethernet, the state taken, the probe and what follows it."""
    body = data[14:]
    return data[:14] + body[:25] + body[:20] + bytes([path]) + body[:18] + body


@pytest.mark.bmv2
@NEEDS_BMV2
def test_lookaheads_wider_than_128_bits_native_from_p4c_json(tmp_path, caplog):
    with targets("wide_lookahead", tmp_path, caplog) as (_, _, ts):
        run_wide_lookahead(ts)


def run_wide_lookahead(ts: dict) -> None:
    short = [probe(9, 3, b""), probe(9, 3, b"\x01\x02\x03"), ETH + b"\x12\x34\x01\x02"]  # the 200 bits run past the end
    out = same_everywhere(ts, [(0, data) for data, _ in WL_CASES] + [(0, data) for data in short])
    assert out[1][:len(WL_CASES)] == [peeked(data, path) for data, path in WL_CASES]
    # too short: the parser rejects before its first lookahead writes a bit; the header it made valid stays zero
    assert out[1][len(WL_CASES):] == [data[:14] + bytes(46) + data[14:] for data in short]


def test_wide_keys_and_lookaheads_replay_under_sanitizers():
    """The C of both programs from source (a select on a 168-bit lookahead, on 264 bits of fields and a value set
    of them) replays its trace under ASan and UBSan, then takes fuzzed frames with no finding."""
    for name, packets in (("wide_lookahead", [data for data, _ in WL_CASES]),
                          ("wide_select", [data for data, _ in WS_CASES])):
        trace = Trace()
        native = NativePipeline(load_program(str(DATA / f"{name}.p4")), trace=trace)
        try:
            if name == "wide_select":
                native.state.value_set_write("WsParser.flows", FLOWS)
            for data in packets:
                native.process(0, data)
            source, text = native.source, trace.text()
        finally:
            native.close()
        result = fz.run(name, source, text, 3_000, 1)
        assert result.ok, result.line
        counts = re.match(r"replayed (\d+) packets \((\d+) with outputs differing from the trace\)", result.line)
        assert counts and int(counts[1]) == len(packets) and counts[2] == "0", result.line
