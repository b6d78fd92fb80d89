"""A program's names and strings are data, never code (issue 30): whatever a client names its tables, actions,
counters, headers, parse states, digests or log formats, the switch prints them as C or Python only as escaped
literals, namespace constants or ASCII hints (p4target/backends/source_text.py), so the program loads with the
names intact and nothing else happens.

The crafted names come through p4c's BMv2 JSON (tests/data/names/named.p4 compiled by p4c, every `QZ` replaced),
through P4 source (`@name("...")`, log_msg) and through the Thrift API naming what they named, on both engines;
the last test pushes them to an `aggnet switch` process over gRPC as a client would. Before the fix the action
payloads below ran `touch MARKER` as the switch (native: a constructor after the C comment `/* action NAME */`;
python: a line after `# action NAME`)."""
from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import subprocess
from pathlib import Path

import corpus
import pytest

from p4target import state as st
from p4target.backends.c import generate_c
from p4target.backends.source_text import IDENTIFIER, Identifiers, c_string, identifier
from p4target.compiled import front_end
from p4target.errors import P4Error
from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.lowered import model as m
from p4target.lowered.from_ir import lower_program
from p4target.native.build import compiler
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.pipeline import Pipeline

REPO = Path(__file__).resolve().parent.parent
NAMED = REPO / "tests" / "data" / "names" / "named.p4"
NATIVE_LOG_LINE = 4000  # the native engine's log line holds at least this much of a log_msg (engine/events.c)
needs_cc = pytest.mark.skipif(compiler() is None, reason="no C compiler for the native engine")
needs_p4c = pytest.mark.skipif(shutil.which("p4c") is None, reason="needs p4c on PATH (source /opt/p4ref/env.sh)")


def c_attack(marker: Path) -> str:
    """Closes the C comment and function it was printed into and adds a constructor running a command."""
    return ("*/ } extern int system(const char *); __attribute__((constructor)) static void pwn(void) "
            f'{{ system("touch {marker}"); }} __attribute__((unused)) static void q_(pk_t *p, const u64 *A) {{ /* ')


def python_attack(marker: Path) -> str:
    """Leaves the `#` comment it was printed into and runs a command when the module loads."""
    return f"\n    pass\nimport os\nos.system('touch {marker}')\ndef _q(F):\n    pass\n#"


QUOTES = "\"'\\#??=/\x00\n\u00e9\u2028\\n*/"  # both languages' string ends and escapes, NUL, newline, a trigraph, non-ASCII
# an attack on both printers (the C one's comment swallows the Python one's lines), and text: QUOTES and 64 KiB
# the e2e test's other names: text that the unfixed printers kept in their comments harmlessly (so that there the
# attack in the action's name ran), none of it an identifier's character
E2E_TEXT = "\"'\\#??=/\u00e9\u2028" + "L" * 65536
PAYLOADS = {"attack": lambda marker: c_attack(marker) + python_attack(marker), "text": lambda _: QUOTES + "L" * 65536}


@pytest.fixture(scope="module")
def named_json(tmp_path_factory) -> tuple[str, object]:
    """p4c's BMv2 JSON (text) and P4Info of named.p4."""
    if shutil.which("p4c") is None:
        pytest.skip("needs p4c on PATH (source /opt/p4ref/env.sh)")
    from controller.p4c import compile_bmv2

    data, p4info = compile_bmv2(str(NAMED), str(tmp_path_factory.mktemp("p4c")))
    return data.decode(), p4info


def json_named(text: str, tokens: list[tuple[str, str]]) -> str:
    """p4c's JSON with each (token, payload) replaced (a token is only ever inside a JSON string), JSON-escaped."""
    for token, payload in tokens:
        text = text.replace(token, json.dumps(payload)[1:-1])
    return text


def source_named(tokens: list[tuple[str, str]]) -> str:
    """named.p4 with each (token, payload) replaced in its string literals, escaped as our front end reads them."""
    source = NAMED.read_text()
    for token, payload in tokens:
        literal = payload.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        source = source.replace(f'"{token}', f'"{literal}')
    return source


def no_marker(marker: Path) -> None:
    assert not marker.exists(), "a name ran as code"


def exercise(pipeline, payload: str, digest: str) -> None:
    """The renamed program works as named.p4 does, addressed by the crafted names: an entry, a frame forwarded,
    counted, logged with the crafted format and learned as `digest`."""
    table, action, counter = (f"MyIngress.{payload}{kind}" for kind in ("table", "action", "counter"))
    pipeline.state.insert_entry(table, st.TableEntry({"sm.ingress_port": st.Exact(1)}, action, {"port": 2}))
    frame = bytes(12) + b"\x88\xb5payload"
    assert pipeline.process(1, frame) == [(2, frame)]
    assert pipeline.state.counter(counter).read(0)[0] == 1
    assert [name for name, _ in pipeline.state.drain_digests()] == [digest]
    line, expected = pipeline.state.log[-1], f"{payload}log 2"
    if isinstance(pipeline, NativePipeline):
        assert expected.startswith(line) and len(line) >= min(len(expected), NATIVE_LOG_LINE)
    else:
        assert line == expected


def loaded(program, engine: str):
    """The program on `engine`: native must run natively (a fallback would hide a printer that choked)."""
    pipeline = make_pipeline(program, engine)
    assert isinstance(pipeline, NativePipeline) == (engine == "native")
    return pipeline


# -- the escaping function and the identifiers


@needs_cc
def test_a_c_string_holds_exactly_the_bytes_it_was_made_from(tmp_path):
    texts = [QUOTES, "\x00" + "12", "a\nb\r\tc", "*/ /* // #define x", "??=??/??'??(??)??!??<??>??-",
             "\ud800 lone surrogate", "\u00e9\u4e2d\U0001f600", "L" * 65536, ""]
    expect = [t.encode("utf-8", "surrogatepass") for t in texts] + [bytes(range(256))]
    literals = [c_string(t) for t in texts] + [c_string(bytes(range(256)))]
    program = tmp_path / "strings.c"
    program.write_text("#include <stdio.h>\nint main(void) {\n" + "".join(
        f"    {{ static const char s[] = {lit}; printf(\"%zu:\", sizeof s - 1); "
        "for (size_t i = 0; i + 1 < sizeof s; i++) printf(\"%02x\", (unsigned char)s[i]); printf(\"\\n\"); }\n"
        for lit in literals) + "    return 0;\n}\n")
    exe = tmp_path / "strings"
    subprocess.run([compiler(), "-std=c11", "-Wall", "-Werror", "-o", str(exe), str(program)], check=True)
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out == [f"{len(data)}:{data.hex()}" for data in expect]
    assert all(lit.isascii() and "\n" not in lit and "??" not in lit for lit in literals)


def test_identifiers_are_the_printers_own():
    names = Identifiers()
    made = [names("ac", k, name) for k, name in enumerate([QUOTES, "MyIngress.set_port", "L" * 65536, "", "é"])]
    assert all(IDENTIFIER.fullmatch(x) for x in made) and len(set(made)) == len(made)
    assert made[1] == "ac1_MyIngress_set_port" and names("ac", 1, "other") == "ac1_other"  # one number per key
    for bad in ("1ac", "a-b", "a b", "é", "a\n"):
        with pytest.raises(P4Error):
            identifier(bad)


# -- every name of real programs renamed, printed as C and as Python

RENAMED = "*/\n#\"'\\\x00??=\u00e9"
PROGRAMS = [REPO / "tests" / "data" / p for p in ("interp/misc.p4", "interp/meters.p4", "interp/pre.p4",
                                                  "runtime/ipv4_cpu.p4", "runtime/value_sets.p4", "native/selector.p4",
                                                  "native_gaps/wide_digest.p4", "native_gaps/wide_select.p4")]
CORPUS_PROGRAMS = ["issue561-7-bmv2", "checksum-l4-bmv2", "v1model-special-ops-bmv2", "equality-bmv2"]
KEYWORD_FIELDS = {"op", "kind", "type", "match_type", "algo"}  # what the lowered form spells, not a name


def renamed(p: m.Program) -> m.Program:
    """A copy of `p` with RENAMED after every name it holds (and every string: log formats, source locations), but
    what the engines look up by its own spelling (standard_metadata, the pipelines, errors, $valid$, ...)."""
    sm_type = p.header("standard_metadata").header_type
    keep = {"standard_metadata", sm_type, "$valid$", "*", "__HIT__", "__MISS__", "ingress", "egress"}
    keep |= {f.name for t in p.header_types if t.name == sm_type for f in t.fields} | {n for n, _ in p.errors}
    seen: set[int] = set()

    def name(s: str) -> str:
        return s if s in keep else s + RENAMED

    def walk(x):
        if isinstance(x, str):
            return name(x)
        if isinstance(x, list | tuple):
            return type(x)(walk(v) for v in x)
        if not dataclasses.is_dataclass(x) or id(x) in seen:
            return x
        seen.add(id(x))
        for f in dataclasses.fields(x):
            if f.name in KEYWORD_FIELDS or isinstance(x, m.Named) and x.kind == "primitive" or \
                    isinstance(x, m.Program) and f.name in ("source", "errors", "enums", "field_aliases"):
                continue
            v = getattr(x, f.name)
            by_action = isinstance(x, m.Table) and f.name == "next_tables"
            v = {(name(k) if by_action else k): walk(w) for k, w in v.items()} if isinstance(v, dict) else walk(v)
            object.__setattr__(x, f.name, v)  # some are frozen: this copy is not shared with anything yet
        return x

    return walk(copy.deepcopy(p))


@pytest.mark.parametrize("path", PROGRAMS + [
    pytest.param(corpus.CORPUS / f"{n}.p4", id=n, marks=pytest.mark.skipif(bool(corpus.MISSING), reason=corpus.MISSING
                                                                             or "-")) for n in CORPUS_PROGRAMS])
def test_every_name_of_a_program_prints_as_data(path):
    program = renamed(lower_program(load_program(str(path))))
    assert all(t.name.endswith(RENAMED) for pl in program.pipelines for t in pl.tables)
    c = generate_c(program).source
    python = Pipeline(program)
    for source in (c, python.source):
        assert "*/\n#" not in source and source.isascii()
    assert all(name.endswith(RENAMED) for name in python.state.schema.tables)


# -- crafted names through p4c's JSON and P4 source, on both engines


@needs_p4c
@pytest.mark.parametrize("engine", ["python", pytest.param("native", marks=needs_cc)])
@pytest.mark.parametrize("kind", PAYLOADS)
def test_crafted_names_in_p4c_json_load_as_data(named_json, kind, engine, tmp_path):
    marker = tmp_path / "marker"
    payload = PAYLOADS[kind](marker)
    pipeline = loaded(bmv2_json.loads(json_named(named_json[0], [("QZ", payload)]), "named.json"), engine)
    try:
        no_marker(marker)
        exercise(pipeline, payload, f"{payload}learn_t")
    finally:
        if isinstance(pipeline, NativePipeline):
            pipeline.close()
    no_marker(marker)


@pytest.mark.parametrize("engine", ["python", pytest.param("native", marks=needs_cc)])
@pytest.mark.parametrize("kind", PAYLOADS)
def test_crafted_names_in_p4_source_load_as_data(kind, engine, tmp_path):
    marker = tmp_path / "marker"
    payload = PAYLOADS[kind](marker).replace("\x00", "")  # a P4 string literal has no NUL
    program, p4info = front_end(source_named([("QZ", payload)]), "named.p4")
    assert {a.preamble.name for a in p4info.actions} >= {f"MyIngress.{payload}action"}
    assert {t.preamble.name for t in p4info.tables} == {f"MyIngress.{payload}table"}
    pipeline = loaded(program, engine)
    try:
        no_marker(marker)
        exercise(pipeline, payload, "QZlearn_t")  # a struct type's name
    finally:
        if isinstance(pipeline, NativePipeline):
            pipeline.close()
    no_marker(marker)


# -- an `aggnet switch` process, pushed the crafted names over gRPC and addressed by them over Thrift


def switch_and_children(thrift_port: int) -> tuple[int, list[int]]:
    """The pid of the switch serving Thrift on `thrift_port`, and the pids of its children (from /proc)."""
    switch, parents = 0, {}
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if f"--thrift-port\0{thrift_port}\0" in (proc / "cmdline").read_text():
                switch = int(proc.name)
            status = (proc / "status").read_text()
        except OSError:
            continue  # gone meanwhile
        parents[int(proc.name)] = int(status.split("\nPPid:")[1].split()[0])
    return switch, sorted(pid for pid, ppid in parents.items() if ppid == switch)


def text_format_named(p4info, replacements: list[tuple[str, str]]):
    """A copy of `p4info` with each (token, payload) replaced in its text (the payload escaped as text format)."""
    from google.protobuf import text_encoding, text_format

    text = text_format.MessageToString(p4info)
    for token, payload in replacements:
        text = text.replace(token, text_encoding.CEscape(payload.encode(), as_utf8=False))
    return text_format.Parse(text, type(p4info)())


def forward_and_count(thrift, p4rt, table: str, action: str, counter: str) -> None:
    """An entry sending what enters on the CPU port back there, written over Thrift by the crafted names: a
    PacketOut comes back as a PacketIn, counted in the crafted counter."""
    from bm_thrift import action_data, exact, match_key, priority
    from finsy.proto import p4r

    from p4target.runtime.bmv2_thrift.wire import I32, STRING

    thrift.std("bm_mt_add_entry", (STRING, table), match_key(exact(b"\x00\xff")), (STRING, action),
               action_data(b"\x00\xff"), priority(0))
    [entry] = thrift.std("bm_mt_get_entries", (STRING, table))
    assert entry[4][2] == action.encode()
    frame = bytes(12) + b"\x88\xb5 crafted names"
    p4rt.send(p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=frame)))
    while (message := p4rt.next_message()).WhichOneof("update") != "packet":
        pass  # digests, if any
    assert message.packet.payload == frame
    assert thrift.std("bm_counter_read", (STRING, counter), (I32, 0))[2] == 1  # packets


@needs_p4c
@pytest.mark.slow
@pytest.mark.parametrize("engine", ["python", pytest.param("native", marks=needs_cc)])
def test_a_switch_pushed_crafted_names_runs_none_of_them(named_json, engine, tmp_path):
    from bm_thrift import BmClient
    from finsy.proto import p4r
    from p4rt_raw import RawClient
    from procs import running_switch

    commit = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    marker = tmp_path / "marker"
    attack = PAYLOADS["attack"](marker)
    tokens = [("QZaction", attack + "action"), ("QZ", E2E_TEXT)]
    table, action, counter = f"MyIngress.{E2E_TEXT}table", f"MyIngress.{attack}action", f"MyIngress.{E2E_TEXT}counter"
    with running_switch(None, tmp_path / "switch.log", options=("--engine", engine)) as (thrift_port, grpc_port):
        p4rt, thrift = RawClient(grpc_port), BmClient(thrift_port)
        try:
            switch, children = switch_and_children(thrift_port)
            assert switch and children == []
            assert p4rt.arbitrate(10).status.code == 0
            data, p4info = named_json  # p4c's JSON and P4Info, renamed
            p4rt.set_pipeline(commit, p4r.ForwardingPipelineConfig(
                p4info=text_format_named(p4info, tokens), p4_device_config=json_named(data, tokens).encode()))
            no_marker(marker)
            forward_and_count(thrift, p4rt, table, action, counter)
            source = source_named(tokens)  # P4 source: the switch's front end makes the P4Info ours does here
            p4rt.set_pipeline(commit, p4r.ForwardingPipelineConfig(
                p4info=front_end(source, "device_config.p4")[1], p4_device_config=source.encode()))
            no_marker(marker)
            forward_and_count(thrift, p4rt, table, action, counter)
            assert switch_and_children(thrift_port) == (switch, [])  # nothing started, nothing left running
        finally:
            p4rt.close()
            thrift.close()
    no_marker(marker)
