"""p4c's BMv2 JSON as a program: read into the lowered form, run, and refused clearly when malformed.

- Every corpus program (../shared/p4c-corpus), compiled by the reference p4c, passes its STF test
  from the JSON alone (`aggnet p4 stf PROG.json TEST.stf`), as it does on simple_switch: on the
  Python engine, and on the native engine (p4target/backends/c.py), which runs every one of them
  (a fallback to the Python engine fails the test).
- A malformed or inconsistent JSON is one line naming the file and the JSON path, exit 2.
- Device configs: bare JSON, and BMv2's P4DeviceConfig (made here by BMv2's own protobuf stubs).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import bmv2_ref
import corpus
import pytest
from test_native_build import WIDE_HASH, WIDE_HASH_OUT

from p4target import load
from p4target import state as st
from p4target.constants import MAX_BACKWARD_JUMPS
from p4target.device_config import bmv2_json_in
from p4target.errors import P4Error
from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.native.pipeline import NativePipeline
from p4target.stf import StfRunner, parse_stf

REPO = Path(__file__).resolve().parent.parent
CORPUS = corpus.CORPUS
PROGRAM = REPO / "tests" / "data" / "runtime" / "ipv4_cpu.p4"
LOOPS = REPO / "tests" / "data" / "interp" / "loops.p4"
ACTION_LOOPS = REPO / "tests" / "data" / "stf" / "action_loops.p4"
P4C = shutil.which("p4c")
needs_p4c = pytest.mark.skipif(P4C is None, reason="p4c is not on PATH (source /opt/p4ref/env.sh)")


@pytest.fixture(scope="module")
def p4c(p4c_compiler):
    """The reference p4c, compiling in the background ahead of the tests."""
    p4c_compiler.prefetch([str(PROGRAM), str(LOOPS), str(ACTION_LOOPS)] + [str(CORPUS / f"{n}.p4") for n in corpus.names()])
    return p4c_compiler


@pytest.fixture(scope="module")
def ipv4_json(p4c) -> str:
    return p4c.json(str(PROGRAM))


@needs_p4c
@pytest.mark.parametrize("name", corpus.params())
def test_corpus_program_passes_its_stf_from_p4c_json(name, p4c):
    program = bmv2_json.load_file(p4c.json(str(CORPUS / f"{name}.p4")))
    stf = CORPUS / f"{name}.stf"
    result = StfRunner(load.pipeline(program, "python"), str(stf)).run(parse_stf(stf.read_text(), str(stf)))
    assert result.passed, result.report(name)


@needs_p4c
@pytest.mark.parametrize("name", corpus.params())
def test_corpus_program_passes_its_stf_natively_from_p4c_json(name, p4c, caplog):
    program = bmv2_json.load_file(p4c.json(str(CORPUS / f"{name}.p4")))
    pipeline = load.pipeline(program, "native")
    warnings = [r.getMessage() for r in caplog.records if r.name == "aggnet.native"]
    try:
        assert pipeline.engine_name == "native" and warnings == []  # no fallback to the Python engine
        stf = CORPUS / f"{name}.stf"
        result = StfRunner(pipeline, str(stf)).run(parse_stf(stf.read_text(), str(stf)))
        assert result.passed, result.report(name)
    finally:
        if isinstance(pipeline, NativePipeline):
            pipeline.close()


@needs_p4c
def test_a_hash_written_to_a_200_bit_field_runs_natively_from_p4c_json(p4c, tmp_path, caplog):
    source = tmp_path / "wide_hash.p4"
    source.write_text(WIDE_HASH)
    pipeline = load.pipeline(bmv2_json.load_file(p4c.json(str(source))), "native")
    try:
        assert isinstance(pipeline, NativePipeline)
        assert [r.getMessage() for r in caplog.records if r.name == "aggnet.native"] == []
        assert pipeline.process(1, bytes([7, 0])) == [(2, WIDE_HASH_OUT)]
    finally:
        pipeline.close()


@needs_p4c
def test_aggnet_p4_stf_takes_a_json_program(p4c):
    name = "header-stack-ops-bmv2"
    program = p4c.json(str(CORPUS / f"{name}.p4"))
    for engine in ("python", "native"):
        ok = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "stf", "--engine", engine, program,
                             str(CORPUS / f"{name}.stf")], capture_output=True, text=True, timeout=120)
        assert ok.returncode == 0 and ok.stdout.startswith("PASS") and ok.stderr == "", ok.stdout + ok.stderr
    wrong = Path(program).with_suffix(".wrong.stf")
    wrong.write_text("packet 0 000000000000000000000000\nexpect 0 ffff\n")
    failed = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "stf", program, str(wrong)],
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1 and "FAIL" in failed.stdout, failed.stdout + failed.stderr


# --------------------------------------------------------------------------- malformed JSON


def _keyed(doc: dict) -> int:
    """Index of ingress's first table with a key (p4c puts keyless synthesized tables first)."""
    return next(i for i, t in enumerate(doc["pipelines"][0]["tables"]) if t["key"])


def _broken(ipv4_json: str, tmp_path: Path, edit) -> str:
    doc = json.loads(Path(ipv4_json).read_text())
    edit(doc)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(doc))
    return str(path)


@needs_p4c
@pytest.mark.parametrize("edit, message", [
    (lambda d: d["headers"][1].update(header_type="nope"), "headers[1]: unknown header type 'nope'"),
    (lambda d: d.update(header_unions=[{"name": "u", "id": 0, "union_type": "u_t", "header_ids": []}]),
     "header_unions[0]: unknown header union type 'u_t'"),
    (lambda d: d["pipelines"][0]["tables"][_keyed(d)]["key"][0].update(target=["ipv5", "dstAddr"]),
     "].key[0].target: unknown header 'ipv5'"),
    (lambda d: d["actions"][0].update(runtime_data=7),
     "actions[0].runtime_data: expected a list, found int"),
    (lambda d: d["pipelines"][0].update(init_table="nowhere"), "pipelines[0].init_table: unknown node 'nowhere'"),
    (lambda d: d.update(__meta__={"version": [3, 0]}), "expected BMv2 JSON format 2.x"),
    (lambda d: d["parsers"][0]["parse_states"][0]["parser_ops"].append({"op": "jump", "parameters": []}),
     "parsers[0].parse_states[0].parser_ops["),
])
def test_a_malformed_json_names_file_and_path(ipv4_json, tmp_path, edit, message):
    path = _broken(ipv4_json, tmp_path, edit)
    with pytest.raises(P4Error) as err:
        bmv2_json.load_file(path)
    assert str(err.value).startswith(f"{path}: error: ") and message in str(err.value)


def _loop_back(doc: dict) -> None:
    table = doc["pipelines"][0]["tables"][0]  # I.t, made its own next node
    table["next_tables"] = {action: table["name"] for action in table["next_tables"]}


def _jump(doc: dict) -> dict:
    """Action a's `_jump` (after its then-part, over the else-part; primitive 2 of 5)."""
    return next(p for p in doc["actions"][0]["primitives"] if p["op"] == "_jump")


def _jump_set(**param):
    return lambda doc: _jump(doc)["parameters"][0].update(param)


JUMP_MESSAGE = "actions[0].primitives[2]: _jump takes 1 parameter(s), the last a constant index into the action, 0 to 5"


@needs_p4c
@pytest.mark.parametrize("edit, message", [
    (_loop_back, "pipelines[0]: node 'I.t' leads back to itself"),
    (_jump_set(value="0x6"), JUMP_MESSAGE),
    (_jump_set(type="field", value=["h", "v"]), JUMP_MESSAGE),
    (lambda doc: _jump(doc)["parameters"].append({"type": "hexstr", "value": "0x4"}), JUMP_MESSAGE),
], ids=["pipeline-cycle", "jump-outside", "jump-computed", "jump-arity"])
def test_json_that_loops_among_nodes_or_jumps_out_of_its_action_is_refused(p4c, tmp_path, edit, message):
    """p4c never writes a loop among a pipeline's nodes (simple_switch 1.15 spins on the packet forever), nor a jump
    out of its action or to a computed place. Refused at load. (A jump back is a loop: JumpLimit ends it.)"""
    path = _broken(p4c.json(str(LOOPS)), tmp_path, edit)
    with pytest.raises(P4Error) as err:
        bmv2_json.load_file(path)
    assert str(err.value).startswith(f"{path}: error: {message}")


@pytest.mark.parametrize("engine", ["python", "native"])
@pytest.mark.parametrize("source", ["p4", pytest.param("p4c", marks=needs_p4c)])
def test_a_loop_that_never_ends_drops_its_packets_and_no_other(source, engine, request):
    """action_loops.p4's triangle loops while `i <= n` on bit<8>: for n = 255 that never ends (simple_switch spins on
    the packet for good). Each such packet is dropped after MAX_BACKWARD_JUMPS jumps back, the first logged, and
    the next packet goes through as before. Our front end's lowering and p4c's JSON, both engines."""
    program = load_program(str(ACTION_LOOPS)) if source == "p4" else \
        bmv2_json.load_file(request.getfixturevalue("p4c").json(str(ACTION_LOOPS)))
    pipeline = load.pipeline(program, engine)
    try:
        forever = bytes.fromhex("00ff0000000000")  # op 0 (triangle), n = 255
        assert pipeline.process(0, forever) == pipeline.process(0, forever) == []
        assert pipeline.process(0, bytes.fromhex("00050000000000")) == [(1, bytes.fromhex("000500000f0010"))]
        assert [line for line in pipeline.state.log if "jumps back" in line] == [
            f"packet dropped in ingress: {'JumpLimit: ' if engine == 'python' else ''}action I.triangle: more than "
            f"{MAX_BACKWARD_JUMPS} jumps back in one run (a loop that may never end)"]
    finally:
        if isinstance(pipeline, NativePipeline):
            pipeline.close()


@needs_p4c
def test_conditionals_whose_branches_meet_print_once_each(p4c):
    """A chain of conditionals whose two branches lead to the next one: the Python engine printed the rest of the
    chain inside each branch (2**40 copies for 40 of them, a load that never ended); each is printed once now."""
    doc = json.loads(Path(p4c.json(str(LOOPS))).read_text())
    pipeline, table = doc["pipelines"][0], doc["pipelines"][0]["tables"][0]
    cond, count = pipeline["conditionals"][0], 40
    for i in range(count):
        after = f"chain{i + 1}" if i + 1 < count else None
        pipeline["conditionals"].append({**cond, "name": f"chain{i}", "id": 100 + i, "true_next": after,
                                         "false_next": after})
    table["next_tables"], table["base_default_next"] = {action: "chain0" for action in table["next_tables"]}, "chain0"
    plain = load.pipeline(bmv2_json.load_file(p4c.json(str(LOOPS))), "python")
    chained = load.pipeline(bmv2_json.loads(json.dumps(doc)), "python")
    assert len(chained.source) - len(plain.source) < 400 * count
    assert chained.process(0, bytes.fromhex("09")) == [(1, bytes.fromhex("07"))]


@needs_p4c
@pytest.mark.parametrize("engine", ["python", "native"])
def test_a_looping_parser_ends_every_packet(p4c, engine):
    """A parser loop ends as on simple_switch when the stack or the packet runs out (StackOutOfBounds: 0xe3,
    PacketTooShort: 0xe1; simple_switch 1.15 sends these same bytes), and where simple_switch spins forever (a loop
    that consumes nothing) after MAX_PARSER_STATES states with ParserTimeout (0xe5); the pipeline goes on."""
    pipeline = load.pipeline(bmv2_json.load_file(p4c.json(str(LOOPS))), engine)
    assert pipeline.process(0, bytes.fromhex("01aa")) == [(1, bytes.fromhex("e5aa"))]
    assert pipeline.process(0, bytes.fromhex("02aabbccddeeff")) == [(1, bytes.fromhex("e3aabbccddeeff"))]
    assert pipeline.process(0, bytes.fromhex("03aabb")) == [(1, bytes.fromhex("e1"))]
    assert pipeline.process(0, bytes.fromhex("09")) == [(1, bytes.fromhex("07"))]  # the action's forward jumps


def test_not_json_at_all_is_one_line_with_its_position(tmp_path):
    path = tmp_path / "half.json"
    path.write_text('{"header_types": [\n  {"name": ')
    stf = tmp_path / "t.stf"
    stf.write_text("packet 0 00\n")
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "stf", str(path), str(stf)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines() == [f"{path}:2:12: error: not valid JSON: Expecting value"]


# --------------------------------------------------------------------------- device configs


def _p4_device_config(json_path: str, tmp_path: Path) -> bytes:
    """BMv2's P4DeviceConfig around the JSON, serialized by BMv2's own stubs (from /opt/p4ref)."""
    if not (bmv2_ref.BMV2_P4_STUBS / "tmp" / "p4config_pb2.py").exists():
        pytest.skip("BMv2's p4.tmp stubs are not installed (bash ../shared/p4ref/install.sh)")
    code = ("import sys\nfrom p4.tmp import p4config_pb2\nc = p4config_pb2.P4DeviceConfig(reassign=True)\n"
            "c.device_data = open(sys.argv[1], 'rb').read()\nsys.stdout.buffer.write(c.SerializeToString())\n")
    env = {**os.environ, "PYTHONPATH": str(bmv2_ref.p4_stubs_path(tmp_path / "stubs")), "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "python"}
    return subprocess.run([sys.executable, "-c", code, json_path], capture_output=True, env=env, check=True,
                          timeout=60).stdout


@needs_p4c
def test_device_config_json_is_found_bare_or_in_bmv2_p4_device_config(ipv4_json, tmp_path):
    raw = Path(ipv4_json).read_bytes()
    wrapped = _p4_device_config(ipv4_json, tmp_path)
    assert wrapped != raw and bmv2_json_in(wrapped) == raw and bmv2_json_in(raw) == raw
    assert bmv2_json_in(PROGRAM.read_bytes()) is None  # P4 source stays P4 source
    assert bmv2_json_in(b"\x1a\xff\xff") is None  # a truncated message is not JSON


@needs_p4c
def test_runtime_loads_json_device_config_with_the_clients_p4info(ipv4_json, tmp_path):
    """SetForwardingPipelineConfig as BMv2 clients send it: the device takes p4c's P4Info as given."""
    from finsy.proto import p4i, p4r
    from google.protobuf import text_format

    from p4target.runtime.device import compile_config

    info = text_format.Parse(Path(ipv4_json).with_suffix(".p4info.txtpb").read_text(), p4i.P4Info())
    config = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=_p4_device_config(ipv4_json, tmp_path))
    loaded = compile_config(config, "python")
    assert loaded.p4info == info
    assert set(loaded.pipeline.state.tables) >= {t.preamble.name for t in info.tables}


@needs_p4c
def test_json_with_a_p4info_takes_its_action_scopes(ipv4_json, tmp_path):
    """p4c's JSON has no @defaultonly/@tableonly; the P4Info sent with it does, and the state refuses what it
    scopes out (an entry running a default-only action, a default running a table-only one)."""
    from finsy.proto import p4i, p4r
    from google.protobuf import text_format

    from p4target.runtime.device import compile_config

    info = text_format.Parse(Path(ipv4_json).with_suffix(".p4info.txtpb").read_text(), p4i.P4Info())
    names = {a.preamble.id: a.preamble.name for a in info.actions}
    table = next(t for t in info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
    for ref in table.action_refs:
        if names[ref.id] == "NoAction":
            ref.scope = p4i.ActionRef.Scope.DEFAULT_ONLY
        elif names[ref.id] == "MyIngress.set_mcast":
            ref.scope = p4i.ActionRef.Scope.TABLE_ONLY
    config = p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=_p4_device_config(ipv4_json, tmp_path))
    state = compile_config(config, "python").pipeline.state
    schema = state.table("MyIngress.ipv4_lpm").schema
    assert (schema.default_only, schema.table_only) == ({"NoAction"}, {"MyIngress.set_mcast"})
    match = {"hdr.ipv4.dstAddr": st.Lpm(0x0A000000, 8)}
    with pytest.raises(st.InvalidArgument, match="@defaultonly"):
        state.insert_entry("MyIngress.ipv4_lpm", st.TableEntry(match, "NoAction"))
    with pytest.raises(st.InvalidArgument, match="@tableonly"):
        state.set_default("MyIngress.ipv4_lpm", "MyIngress.set_mcast", {"grp": 1})
    assert state.table("MyIngress.l2_exact").schema.default_only == set()  # what the P4Info leaves unscoped


UNITS_AND_GROUPS = REPO / "tests" / "data" / "runtime" / "units_and_groups.p4"


def _units_and_groups(state: st.State) -> tuple:
    return (state.schema.counters["I.pkts"].type, state.schema.direct_counters["I.hits"].type,
            state.schema.action_profiles["I.sel"].max_group_size)


@needs_p4c
def test_counter_units_and_max_group_size_reach_the_state_from_either_front_end(p4c):
    """BMv2's JSON has neither counter units nor @max_group_size: our lowering keeps them from the source, and
    p4c's JSON takes them from the P4Info sent with it; either way a group over the limit is refused."""
    from finsy.proto import p4i, p4r
    from google.protobuf import text_format

    from p4target.lowered.schema import build_schema
    from p4target.runtime.device import compile_config, compile_source

    json_path = p4c.json(str(UNITS_AND_GROUPS))
    info = text_format.Parse(Path(json_path).with_suffix(".p4info.txtpb").read_text(), p4i.P4Info())
    from_json = compile_config(p4r.ForwardingPipelineConfig(p4info=info, p4_device_config=Path(json_path).read_bytes()),
                               "python").pipeline.state
    source_info, pipeline = compile_source(UNITS_AND_GROUPS.read_text(), str(UNITS_AND_GROUPS))
    from_source = pipeline.state
    assert source_info.action_profiles[0].max_group_size == info.action_profiles[0].max_group_size == 3
    for state in (from_json, from_source):
        assert _units_and_groups(state) == ("packets", "bytes", 3)
        state.profile_member_insert("I.sel", 1, "I.fwd", {"port": 1})
        with pytest.raises(st.InvalidArgument, match="exceeds the profile's max_group_size 3"):
            state.action_profile("I.sel").insert_group(1, {1: 1}, max_size=4)
    bare = st.State(build_schema(bmv2_json.load_file(json_path)))  # the JSON alone: BMv2's defaults
    assert _units_and_groups(bare) == ("packets_and_bytes", "packets_and_bytes", 0)
