"""A stateful extern added the registry's way (issue 32 item 1): reset_register<T>, one module
(tests/reset_register_extern.py) and one C file (tests/reset_register.c), registered by importing the module.
Its cells live where a register's do on both engines; a read() in the program takes a cell and leaves zero; the
control plane (P4Info, P4Runtime over gRPC, STF) sees them as a register's cells; the program goes through our
BMv2 JSON and back; and a composition root that does not load the module (`aggnet p4 compile`) refuses the
program in one line, as it refuses any extern it does not know."""
from __future__ import annotations

import asyncio
import random
import subprocess
from pathlib import Path

import pytest
import reset_register_extern  # noqa: F401  (registers the test-only extern)
from finsy import P4RegisterEntry, Switch, SwitchOptions
from google.protobuf import text_format

from p4target import load
from p4target.frontend import load_program
from p4target.load import ENGINES
from p4target.lowered import bmv2_json, to_json
from p4target.native.build import compiler
from p4target.native.pipeline import NativePipeline
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer
from p4target.stf import run_stf_file

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "externs" / "reset_register.p4"
ETH = bytes.fromhex("000000000001" "000000000002" "88b5")
pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler for the native engine")


def frame(op: int, index: int, value: int) -> bytes:
    return ETH + bytes([op, index]) + value.to_bytes(2, "big")


def value_out(pipeline, op: int, index: int, value: int = 0) -> int:
    [(port, out)] = pipeline.process(0, frame(op, index, value))
    assert port == 1 and out[:-2] == frame(op, index, value)[:-2]
    return int.from_bytes(out[-2:], "big")


@pytest.fixture(params=ENGINES)
def pipeline(request):
    running = load.pipeline(load_program(str(PROGRAM)), request.param)
    assert isinstance(running, NativePipeline) == (request.param == "native")  # no fallback
    yield running
    if isinstance(running, NativePipeline):
        running.close()


def test_a_read_takes_the_cell_and_leaves_zero(pipeline):
    assert value_out(pipeline, 1, 3, 0x1234) == 0
    assert pipeline.state.register_read("I.taken", 3) == 0x1234
    assert value_out(pipeline, 2, 3) == 0x1234
    assert value_out(pipeline, 2, 3) == 0 and pipeline.state.register_read("I.taken", 3) == 0
    pipeline.state.register_write("I.taken", 7, 0xBEEF)
    assert value_out(pipeline, 3, 7, 9) == 0xBEEF and pipeline.state.register_read("I.taken", 7) == 9
    assert value_out(pipeline, 3, 8, 5) == 0  # index 8 of 8 cells: reads 0, writes nothing
    assert [pipeline.state.register_read("I.taken", i) for i in range(8)] == [0] * 7 + [9]


def test_both_engines_and_our_bmv2_json_send_the_same_packets():
    form = load.lowered(load_program(str(PROGRAM))).form
    again = bmv2_json.loads(to_json.dumps(form), "reset_register.json")
    rng = random.Random(32)
    sent = [frame(rng.randrange(4), rng.randrange(10), rng.randrange(1 << 16)) for _ in range(500)]
    outs = []
    for program, engine in ((form, "python"), (form, "native"), (again, "python"), (again, "native")):
        running = load.pipeline(program, engine)
        outs.append([running.process(0, data) for data in sent])
        if isinstance(running, NativePipeline):
            running.close()
    assert outs[0] == outs[1] == outs[2] == outs[3]
    assert sum(1 for [(_, out)] in outs[0] if out[-2:] != b"\0\0") > 100  # reads that took a value


@pytest.mark.parametrize("engine", ENGINES)
def test_p4runtime_reads_and_writes_its_cells_as_a_register(tmp_path, engine):
    p4info = build_p4info(load_program(str(PROGRAM)))
    [reg] = p4info.registers
    assert (reg.preamble.name, reg.size, reg.type_spec.bitstring.bit.bitwidth) == ("I.taken", 8, 16)
    p4info_path = tmp_path / "reset_register.p4info.txtpb"
    p4info_path.write_text(text_format.MessageToString(p4info))
    server = RuntimeServer(device_id=1, address="127.0.0.1:0", log_path=str(tmp_path / "requests.txt"), engine=engine)
    port = server.start()

    async def session(write: bool) -> dict[int, int]:
        options = SwitchOptions(p4info=p4info_path, p4blob=PROGRAM)
        async with Switch("s1", f"127.0.0.1:{port}", options) as sw:
            if write:
                await sw.modify([P4RegisterEntry("I.taken", index=2, data=0x55)])
            return {e.index: e.data for e in [e async for e in sw.read(P4RegisterEntry("I.taken"))]}

    try:
        assert asyncio.run(asyncio.wait_for(session(True), 20))[2] == 0x55
        assert getattr(server.pipeline, "engine_name", "python") == engine
        assert value_out(server.pipeline, 2, 2) == 0x55
        assert asyncio.run(asyncio.wait_for(session(False), 20)) == dict.fromkeys(range(8), 0)
    finally:
        server.stop()


@pytest.mark.parametrize("engine", ENGINES)
def test_its_stf_test_passes(engine):
    result = run_stf_file(str(PROGRAM), str(PROGRAM.with_suffix(".stf")), engine)
    assert result.passed, result.report("reset_register.stf")
    assert result.packets_in == result.packets_out == 4


def test_a_composition_root_without_its_module_refuses_the_program(tmp_path):
    proc = subprocess.run([str(REPO / ".venv" / "bin" / "aggnet"), "p4", "compile", str(PROGRAM)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [  # as p4c blames an extern it does not know: at its declaration
        f"{PROGRAM}:9:10: error: Unknown extern method read from type reset_register"]
