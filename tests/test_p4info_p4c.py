"""Our P4Info equals the one p4c writes, field by field, for every program both compile.

Programs: p4c's v1model corpus (../shared/p4c-corpus, the ones listed as passing on BMv2),
p4src/*.p4, and the test programs under tests/data/p4info and tests/data/runtime. A program
`aggnet p4 compile` rejects fails (naming our error); one p4c rejects is skipped. p4c runs once per
program per session, in the background ahead of the tests (the session's p4c_compiler, tests/conftest.py,
which the BMv2 tests share); with pytest's cache plugin on, its output is also kept per program source
and p4c version, so a second run compiles nothing. Without p4c every test skips with that reason.

`python tests/test_p4info_p4c.py [PROGRAM.p4...]` prints the differences, program by program.
"""
from __future__ import annotations

import difflib
import shutil
import sys
import tempfile
from pathlib import Path

import bmv2_ref
import corpus
import pytest

from controller.p4c import CompileError

ROOT = Path(__file__).resolve().parent.parent
CORPUS = corpus.CORPUS
P4C = shutil.which("p4c")


def programs() -> list[Path]:
    """Every program compared: the corpus's, then the repository's own."""
    found = []
    if (CORPUS / "PASS_ON_BMV2.txt").is_file():
        names = (CORPUS / "PASS_ON_BMV2.txt").read_text().split()
        found += [CORPUS / (name if name.endswith(".p4") else name + ".p4") for name in names]
    for folder in (ROOT / "p4src", ROOT / "tests" / "data" / "p4info", ROOT / "tests" / "data" / "runtime"):
        found += sorted(p for p in folder.glob("*.p4") if "V1Switch(" in p.read_text())
    return found


def ours(path: Path) -> str:
    """Our P4Info of the program, as text (P4Error when `aggnet p4 compile` rejects it)."""
    from google.protobuf import text_format

    from p4target.frontend import load_program
    from p4target.p4info import build_p4info

    return text_format.MessageToString(build_p4info(load_program(str(path))))


def theirs(compiler: bmv2_ref.Compiler, path: Path) -> str:
    """p4c's P4Info of the program, printed as ours is (CompileError when p4c rejects it)."""
    return canonical(Path(compiler.compiled(str(path)).p4info).read_text())


def canonical(text: str) -> str:
    """Text format of a P4Info as our side prints it (p4c's header comments and spacing dropped)."""
    from finsy.proto import p4i
    from google.protobuf import text_format

    return text_format.MessageToString(text_format.Parse(text, p4i.P4Info()))


def differences(theirs: str, ours: str) -> str:
    return "".join(difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "p4c", "aggnet", n=3))


@pytest.fixture(scope="module")
def compiler(p4c_compiler: bmv2_ref.Compiler) -> bmv2_ref.Compiler:
    if P4C is None:
        pytest.skip("p4c is not on PATH (source /opt/p4ref/env.sh)")
    p4c_compiler.prefetch(str(p) for p in programs())
    return p4c_compiler


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT)) if ROOT in path.parents else path.name


@pytest.mark.bmv2
@pytest.mark.parametrize("path", programs(), ids=_id)
def test_our_p4info_is_p4cs(compiler, path):
    from p4target.errors import P4Error

    try:
        mine = ours(path)
    except P4Error as exc:
        pytest.fail(f"aggnet p4 compile rejects it: {exc}")
    try:
        reference = theirs(compiler, path)
    except CompileError as exc:
        pytest.skip(f"p4c rejects it: {exc}")
    assert mine == reference, f"{path}: our P4Info differs from p4c's:\n{differences(reference, mine)}"


def test_the_corpus_and_repository_programs_are_found():
    names = {p.name for p in programs()}
    assert {"aggnet.p4", "profiles.p4", "control_plane.p4"} <= names
    if CORPUS.is_dir():
        assert "arith-bmv2.p4" in names and len(names) > 100


if __name__ == "__main__":
    from p4target.errors import P4Error

    if P4C is None:
        sys.exit("p4c is not on PATH (source /opt/p4ref/env.sh)")
    selected = [Path(a).resolve() for a in sys.argv[1:]] or programs()
    with tempfile.TemporaryDirectory() as folder, bmv2_ref.Compiler(folder, workers=2) as compiler:
        compiler.prefetch(str(p) for p in selected)
        for program in selected:
            try:
                mine, reference = ours(program), theirs(compiler, program)
            except (P4Error, CompileError) as exc:
                print(f"SKIP {program}: {exc}")
                continue
            print(f"SAME {program}" if mine == reference else f"DIFF {program}\n{differences(reference, mine)}")
