"""Our P4Info equals the one p4c writes, field by field, for every program both compile.

Programs: p4c's v1model corpus (../shared/p4c-corpus, the ones listed as passing on BMv2),
p4src/*.p4, and the test programs under tests/data/p4info and tests/data/runtime. A program
`aggnet p4 compile` rejects fails (naming our error); one p4c rejects is skipped. p4c
(`p4c --target bmv2 --arch v1model --p4runtime-files`, from PATH or /opt/p4ref; its back end
p4c-bm2-ss is called directly when it is there) runs once per program per session, in parallel;
with pytest's cache plugin on, its P4Info is also kept per program source and p4c version, so a
second run compiles nothing. Without p4c every test skips with that reason.

`python tests/test_p4info_p4c.py [PROGRAM.p4...]` prints the differences, program by program.
"""
from __future__ import annotations

import difflib
import functools
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import corpus
import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = corpus.CORPUS
P4C = shutil.which("p4c") or next((p for p in ["/opt/p4ref/bin/p4c"] if os.access(p, os.X_OK)), None)
# `p4c --target bmv2 --arch v1model` runs p4c-bm2-ss; calling it directly skips the driver (a third faster)
BMV2_COMPILER = next((c for c in [os.path.join(os.path.dirname(P4C), "p4c-bm2-ss")] if os.access(c, os.X_OK)),
                     None) if P4C else None


def programs() -> list[Path]:
    """Every program compared: the corpus's, then the repository's own."""
    found = []
    if (CORPUS / "PASS_ON_BMV2.txt").is_file():
        names = (CORPUS / "PASS_ON_BMV2.txt").read_text().split()
        found += [CORPUS / (name if name.endswith(".p4") else name + ".p4") for name in names]
    for folder in (ROOT / "p4src", ROOT / "tests" / "data" / "p4info", ROOT / "tests" / "data" / "runtime"):
        found += sorted(p for p in folder.glob("*.p4") if "V1Switch(" in p.read_text())
    return found


class Compiled:
    """Our P4Info text (or our one-line error) and p4c's (or its first error line), per program."""

    def __init__(self, cache_dir: Path | None):
        self.cache_dir = cache_dir
        self.ours: dict[Path, str] = {}
        self.our_errors: dict[Path, str] = {}
        self.p4c: dict[Path, str] = {}
        self.p4c_errors: dict[Path, str] = {}

    def run(self, paths: list[Path]) -> Compiled:
        for path in paths:
            self._ours(path)
        accepted = [p for p in paths if p in self.ours]
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            list(pool.map(self._p4c, accepted))
        return self

    def _ours(self, path: Path) -> None:
        from google.protobuf import text_format

        from p4target.errors import P4Error
        from p4target.frontend import load_program
        from p4target.p4info import build_p4info

        try:
            self.ours[path] = text_format.MessageToString(build_p4info(load_program(str(path))))
        except P4Error as exc:
            self.our_errors[path] = str(exc)

    def _p4c(self, path: Path) -> None:
        from p4target.device_config import device_config_source

        key = hashlib.sha256((p4c_version() + device_config_source(str(path))).encode()).hexdigest()[:24]
        cached = self.cache_dir / f"{path.stem}-{key}.txt" if self.cache_dir else None
        if cached is not None and cached.is_file():
            text = cached.read_text()
        else:
            text = compile_p4info(path)
            if cached is not None:
                cached.write_text(text)
        if text.startswith("error\n"):
            self.p4c_errors[path] = text.split("\n", 2)[1]
        else:
            self.p4c[path] = canonical(text)


@functools.cache
def p4c_version() -> str:
    return subprocess.run([BMV2_COMPILER or P4C, "--version"], capture_output=True, text=True).stdout.strip()


def compile_p4info(path: Path) -> str:
    """p4c's P4Info text for `path`, or "error\\n" + its first error line."""
    with tempfile.TemporaryDirectory(prefix="p4info-") as out:
        p4info = os.path.join(out, "p4info.txtpb")
        if BMV2_COMPILER:
            argv = [BMV2_COMPILER, "--arch", "v1model", "-o", os.path.join(out, "program.json")]
        else:
            argv = [P4C, "--target", "bmv2", "--arch", "v1model", "-o", out]
        done = subprocess.run([*argv, "--p4runtime-files", p4info, str(path)], capture_output=True, text=True,
                              timeout=600)
        if done.returncode != 0:
            lines = [line for line in (done.stderr + done.stdout).splitlines() if "error" in line.lower()]
            return "error\n" + (lines[0] if lines else f"p4c exited with {done.returncode}") + "\n"
        with open(p4info) as fh:
            return fh.read()


def canonical(text: str) -> str:
    """Text format of a P4Info as our side prints it (p4c's header comments and spacing dropped)."""
    from finsy.proto import p4i
    from google.protobuf import text_format

    return text_format.MessageToString(text_format.Parse(text, p4i.P4Info()))


def differences(theirs: str, ours: str) -> str:
    return "".join(difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "p4c", "aggnet", n=3))


@pytest.fixture(scope="session")
def compiled(request) -> Compiled:
    if P4C is None:
        pytest.skip("p4c is not on PATH or in /opt/p4ref/bin (source /opt/p4ref/env.sh)")
    cache = getattr(request.config, "cache", None)  # None under `-p no:cacheprovider` (scripts/test.sh)
    return Compiled(Path(cache.mkdir("p4c-p4info")) if cache is not None else None).run(programs())


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT)) if ROOT in path.parents else path.name


@pytest.mark.bmv2
@pytest.mark.parametrize("path", programs(), ids=_id)
def test_our_p4info_is_p4cs(compiled, path):
    assert path not in compiled.our_errors, f"aggnet p4 compile rejects it: {compiled.our_errors[path]}"
    if path in compiled.p4c_errors:
        pytest.skip(f"p4c rejects it: {compiled.p4c_errors[path]}")
    theirs, ours = compiled.p4c[path], compiled.ours[path]
    assert ours == theirs, f"{path}: our P4Info differs from p4c's:\n{differences(theirs, ours)}"


def test_the_corpus_and_repository_programs_are_found():
    names = {p.name for p in programs()}
    assert {"aggnet.p4", "profiles.p4", "control_plane.p4"} <= names
    if CORPUS.is_dir():
        assert "arith-bmv2.p4" in names and len(names) > 100


if __name__ == "__main__":
    if P4C is None:
        sys.exit("p4c is not on PATH or in /opt/p4ref/bin")
    selected = [Path(a).resolve() for a in sys.argv[1:]] or programs()
    result = Compiled(None).run(selected)
    for program in selected:
        if program in result.our_errors:
            print(f"SKIP {program}: ours: {result.our_errors[program]}")
        elif program in result.p4c_errors:
            print(f"SKIP {program}: p4c: {result.p4c_errors[program]}")
        elif result.ours[program] == result.p4c[program]:
            print(f"SAME {program}")
        else:
            print(f"DIFF {program}\n{differences(result.p4c[program], result.ours[program])}")
