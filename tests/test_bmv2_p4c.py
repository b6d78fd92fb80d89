"""The BMv2 pipeline: p4c's JSON and P4Info are what is pushed, and our P4Info IDs must equal p4c's.

The ID comparison runs against a P4Info p4c wrote (tests/data/p4info/basic_routing.p4info.txtpb).
load_program's plumbing runs against a stand-in `p4c` on PATH that writes given outputs; the
real compiler is used by the bmv2-marked test where it is installed.
"""
from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from google.protobuf import text_format

from controller.installer import InstallError, load_program
from controller.p4c import CompileError, id_mismatches, read_p4info_text
from p4target.frontend import load_program as frontend_load
from p4target.p4info import build_p4info

REPO = Path(__file__).resolve().parent.parent
P4INFO_DATA = REPO / "tests" / "data" / "p4info"
AGGNET = str(REPO / "p4src" / "aggnet.p4")

FAKE_P4C = """
import os, sys
argv = sys.argv[1:]
if os.environ.get("FAKE_P4C_ERROR"):
    sys.stderr.write("warning: something harmless\\n" + os.environ["FAKE_P4C_ERROR"] + "\\n")
    sys.exit(1)
out, p4info, program = argv[argv.index("-o") + 1], argv[argv.index("--p4runtime-files") + 1], argv[-1]
name = os.path.splitext(os.path.basename(program))[0]
with open(os.path.join(out, name + ".json"), "w") as fh:
    fh.write('{"program": "%s"}' % program)
with open(p4info, "w") as fh, open(os.environ["FAKE_P4C_P4INFO"]) as src:
    fh.write(src.read())
"""


def p4c_basic_routing():
    return read_p4info_text(str(P4INFO_DATA / "basic_routing.p4info.txtpb"))


def ours_basic_routing():
    return build_p4info(frontend_load(str(P4INFO_DATA / "basic_routing.p4")))


def test_our_ids_equal_those_p4c_wrote():
    assert id_mismatches(ours_basic_routing(), p4c_basic_routing()) == []


def test_the_first_mismatch_is_named_with_both_ids():
    theirs = p4c_basic_routing()
    table = next(t for t in theirs.tables if t.preamble.name == "ingress.bd")
    table.preamble.id += 1
    table.match_fields[0].id = 7
    del theirs.actions[-1]
    dropped = ours_basic_routing().actions[-1].preamble
    assert id_mismatches(ours_basic_routing(), theirs) == [
        "table ingress.bd: id 48392551 here, 48392552 from p4c",
        "table ingress.bd match field meta.ingress_metadata.bd: id 1 here, 7 from p4c",
        f"action {dropped.name} (id {dropped.id}) is not in p4c's P4Info",
    ]


def test_an_entity_only_p4c_has_is_reported():
    theirs = p4c_basic_routing()
    extra = theirs.registers.add()
    extra.preamble.id, extra.preamble.name = 0x16000001, "ingress.extra"
    assert id_mismatches(ours_basic_routing(), theirs) == [
        "register ingress.extra (id 369098753 in p4c's P4Info) is missing from ours"]


@pytest.fixture
def fake_p4c(tmp_path, monkeypatch):
    """A stand-in p4c on PATH that writes NAME.json and copies FAKE_P4C_P4INFO to the P4Info path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    p4c = bin_dir / "p4c"
    p4c.write_text(f"#!{sys.executable}\n{FAKE_P4C}")
    p4c.chmod(p4c.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def write_p4info(path: Path, p4info) -> str:
    path.write_text(text_format.MessageToString(p4info))
    return str(path)


def test_bmv2_pushes_p4cs_json_and_p4info(fake_p4c, monkeypatch):
    embedded = load_program(AGGNET)
    monkeypatch.setenv("FAKE_P4C_P4INFO", write_p4info(fake_p4c / "p4c.txtpb", embedded.p4info))
    build = fake_p4c / "build"
    program = load_program(AGGNET, "bmv2", str(build))
    assert program.device_config == f'{{"program": "{AGGNET}"}}'.encode()
    assert program.device_config == (build / "aggnet.json").read_bytes()
    assert program.p4info == read_p4info_text(str(build / "aggnet.p4info.txtpb")) == embedded.p4info
    assert (program.lanes, program.slots) == (embedded.lanes, embedded.slots)
    assert program.cookie != embedded.cookie  # another device config: a switch gets it pushed
    assert load_program(AGGNET, "bmv2").device_config == program.device_config  # temporary build dir


def test_bmv2_refuses_a_program_whose_ids_differ_from_p4cs(fake_p4c, monkeypatch):
    p4info = load_program(AGGNET).p4info
    table = next(t for t in p4info.tables if t.preamble.name == "AggIngress.agg_job")
    table.preamble.id ^= 1
    monkeypatch.setenv("FAKE_P4C_P4INFO", write_p4info(fake_p4c / "p4c.txtpb", p4info))
    with pytest.raises(InstallError) as err:
        load_program(AGGNET, "bmv2")
    assert str(err.value).startswith(f"{AGGNET}: P4Info differs from p4c's: table AggIngress.agg_job: id ")
    assert "\n" not in str(err.value) and err.value.exit_code == 2


def test_a_failing_p4c_is_named_by_its_first_error(fake_p4c, monkeypatch):
    monkeypatch.setenv("FAKE_P4C_ERROR", "aggnet.p4(12): [--Werror=type-error] error: bit<8> vs bit<16>")
    with pytest.raises(CompileError) as err:
        load_program(AGGNET, "bmv2")
    assert str(err.value) == f"{AGGNET}: p4c failed (exit 1): aggnet.p4(12): [--Werror=type-error] error: bit<8> vs bit<16>"
    assert err.value.exit_code == 2


def test_a_missing_p4c_is_a_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CompileError) as err:
        load_program(AGGNET, "bmv2")
    assert str(err.value) == f"{AGGNET}: p4c not found on PATH (the BMv2 target compiles with it)"


def test_an_unknown_target_is_refused():
    with pytest.raises(InstallError, match="unknown target 'tofino'"):
        load_program(AGGNET, "tofino")


@pytest.mark.bmv2
@pytest.mark.skipif(shutil.which("p4c") is None, reason="p4c is not on PATH")
@pytest.mark.parametrize("name", ["aggnet.p4", "aggnet_l64.p4"])
def test_p4c_gives_aggnet_the_ids_we_give_it(name, tmp_path):
    path = str(REPO / "p4src" / name)
    program = load_program(path, "bmv2", str(tmp_path))  # refuses any id that differs
    ours = load_program(path).p4info
    for field in ("tables", "actions", "counters", "registers"):
        assert sorted((e.preamble.name, e.preamble.id) for e in getattr(program.p4info, field)) == \
            sorted((e.preamble.name, e.preamble.id) for e in getattr(ours, field))
    assert (tmp_path / f"{name[:-3]}.json").read_bytes() == program.device_config
