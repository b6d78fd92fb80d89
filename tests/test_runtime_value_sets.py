"""Parser value sets end to end: a real P4Runtime server on 127.0.0.1 runs
tests/data/runtime/value_sets.p4; finsy (an independent client) writes and reads its value sets
(ValueSetEntry), and packets through the pipeline take the parse path the sets decide. The raw
stub checks the status codes finsy hides (INSERT refused, a set over its size refused whole).
The same program as our lowering and as p4c's BMv2 JSON (parse_vsets) runs on both engines too.
"""
import asyncio
import shutil
import subprocess
from pathlib import Path

import pytest
from finsy import P4Schema, P4ValueSetEntry, Switch, SwitchOptions
from finsy.p4entity import P4ValueSetMember
from finsy.proto import p4r
from google.protobuf import text_format
from p4rt_raw import RawClient, write_codes

from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.lowered.from_ir import lower_program
from p4target.native.pipeline import ENGINES, make_pipeline
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer

PROGRAM = Path(__file__).parent / "data" / "runtime" / "value_sets.p4"
ETH = bytes.fromhex("000000000001" "000000000002")


@pytest.fixture(scope="module")
def p4info_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("p4info") / "value_sets.p4info.txtpb"
    path.write_text(text_format.MessageToString(build_p4info(load_program(str(PROGRAM)))))
    return path


@pytest.fixture(params=ENGINES)
def server(tmp_path, request):
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", log_path=str(tmp_path / "requests.txt"), engine=request.param)
    srv.port = srv.start()
    yield srv
    srv.stop()


def frame(ether_type: int, proto: int = 6, flags: int = 1) -> bytes:
    return ETH + ether_type.to_bytes(2, "big") + bytes([proto, flags, 0, 0])


def run_packet(server, data: bytes) -> tuple[int, bytes]:
    [(port, out)] = server.pipeline.process(0, data)
    return port, out


def test_value_sets_written_read_and_matched(server, p4info_path):
    sets = [P4ValueSetEntry("tunnel_types", members=[P4ValueSetMember(0x88B5), P4ValueSetMember(0x9000)]),
            P4ValueSetEntry("marking", members=[P4ValueSetMember(proto=6, flags=1)])]

    async def main(writes):
        async with Switch("s1", f"127.0.0.1:{server.port}", SwitchOptions(p4info=p4info_path, p4blob=PROGRAM)) as sw:
            if writes:
                await sw.modify(writes)
            return {e.value_set_id: sorted(tuple(sorted(m.items())) for m in e.members)
                    async for e in sw.read(P4ValueSetEntry("tunnel_types", members=[]))} | \
                   {e.value_set_id: sorted(tuple(sorted(m.items())) for m in e.members)
                    async for e in sw.read(P4ValueSetEntry("marking", members=[]))}

    assert asyncio.run(main([])) == {"tunnel_types": [], "marking": []}
    assert getattr(server.pipeline, "engine_name", "python") == server.device.engine  # no fallback
    assert run_packet(server, frame(0x88B5)) == (1, frame(0x88B5))  # no tunnel types yet
    read = asyncio.run(main(sets))
    assert read == {"tunnel_types": [(("", 0x88B5),), (("", 0x9000),)], "marking": [(("flags", 1), ("proto", 6))]}
    marked = ETH + bytes.fromhex("88b5" "0601beef")
    assert run_packet(server, frame(0x88B5)) == (2, marked)
    assert run_packet(server, frame(0x9000, flags=2)) == (2, frame(0x9000, flags=2))  # a tunnel, not marked
    assert run_packet(server, frame(0x0800)) == (1, frame(0x0800))
    assert run_packet(server, frame(0x88B6)) == (1, frame(0x88B6))


def test_value_set_writes_are_modify_only_and_bounded(server, p4info_path):
    async def set_pipeline():
        async with Switch("s1", f"127.0.0.1:{server.port}", SwitchOptions(p4info=p4info_path, p4blob=PROGRAM)):
            pass
    asyncio.run(set_pipeline())
    schema = P4Schema(p4info_path)
    raw = RawClient(server.port)
    raw.arbitrate(20)
    two = P4ValueSetEntry("tunnel_types", members=[P4ValueSetMember(0x88B5), P4ValueSetMember(0x9000)]).encode(schema)
    five = P4ValueSetEntry("tunnel_types", members=[P4ValueSetMember(0x1000 + i) for i in range(5)]).encode(schema)
    wide = P4ValueSetEntry("tunnel_types", members=[P4ValueSetMember(1)]).encode(schema)
    wide.value_set_entry.members[0].match[0].exact.value = b"\x01\x00\x00"
    half = P4ValueSetEntry("marking", members=[P4ValueSetMember(proto=6, flags=1)]).encode(schema)
    del half.value_set_entry.members[0].match[1]
    def modify(entity):
        return p4r.Update(type=p4r.Update.MODIFY, entity=entity)
    assert write_codes(raw, modify(two), election_id=20) == ["OK"]
    assert write_codes(raw, p4r.Update(type=p4r.Update.INSERT, entity=two), modify(five), modify(wide), modify(half),
                       election_id=20) == \
        ["INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "INVALID_ARGUMENT", "INVALID_ARGUMENT"]
    [entity] = raw.read(p4r.Entity(value_set_entry=p4r.ValueSetEntry(value_set_id=two.value_set_entry.value_set_id)))
    assert sorted(m.match[0].exact.value for m in entity.value_set_entry.members) == [b"\x88\xb5", b"\x90\x00"]
    assert run_packet(server, frame(0x9000)) == (2, frame(0x9000))
    raw.close()


def p4c_json(tmp_path: Path) -> Path:
    out = tmp_path / "p4c"
    done = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", str(out), str(PROGRAM)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return out / "value_sets.json"


FORMS = ["source", "lowered", pytest.param("p4c_json", marks=pytest.mark.skipif(
    shutil.which("p4c") is None, reason="p4c not on PATH (source /opt/p4ref/env.sh)"))]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_the_program_matches_its_value_sets(form, engine, tmp_path):
    program = {"source": lambda: load_program(str(PROGRAM)), "lowered": lambda: lower_program(load_program(str(PROGRAM))),
               "p4c_json": lambda: bmv2_json.load_file(str(p4c_json(tmp_path)))}[form]()
    pipeline = make_pipeline(program, engine)
    assert getattr(pipeline, "engine_name", "python") == engine
    try:
        assert pipeline.process(0, frame(0x88B5)) == [(1, frame(0x88B5))]
        pipeline.state.value_set_write("VsParser.tunnel_types", [(0x88B5,), (0x9000,)])
        pipeline.state.value_set_write("VsParser.marking", [(6, 1)])
        assert pipeline.process(0, frame(0x88B5)) == [(2, ETH + bytes.fromhex("88b5" "0601beef"))]
        assert pipeline.process(0, frame(0x9000, flags=2)) == [(2, frame(0x9000, flags=2))]
        assert pipeline.process(0, frame(0x0800)) == [(1, frame(0x0800))]
        pipeline.state.value_set_write("VsParser.tunnel_types", [])
        assert pipeline.process(0, frame(0x9000)) == [(1, frame(0x9000))]
    finally:
        if engine == "native":
            pipeline.close()
