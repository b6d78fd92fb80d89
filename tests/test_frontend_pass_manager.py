"""The front end's pass manager: `aggnet p4 compile --list-passes` lists the passes in the
order they run, `--dump-after PASS` prints the program as P4 after that pass, so a user sees
what each pass did (a call inlined, a division become a shift)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_frontend_passes import TEMPLATE

from p4target.frontend import load_source
from p4target.frontend.passes import PASS_NAMES, PASSES

REPO = Path(__file__).resolve().parent.parent
PROGRAM = TEMPLATE % dict(
    decls="bit<8> inc(inout bit<8> x) { x = x + 1; return x; }", locals="", parser_locals="",
    states="state start { pk.extract(hdr.h); transition accept; }",
    apply="hdr.h.a = inc(hdr.h.b); hdr.h.c = hdr.h.d / 4;")


def compile_(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed.cli", "p4", "compile", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def dump_sections(stdout: str) -> dict[str, str]:
    """`// after NAME` headed sections of a --dump-after output, by pass name."""
    sections: dict[str, str] = {}
    for chunk in stdout.split("// after ")[1:]:
        name, _, text = chunk.partition("\n")
        sections[name] = text
    return sections


def test_list_passes_names_every_pass_in_run_order_with_what_it_does():
    out = compile_("--list-passes")
    assert out.returncode == 0, out.stderr
    rows = [line.split(None, 1) for line in out.stdout.splitlines()]
    assert [name for name, _ in rows] == ["check", *PASS_NAMES]
    assert all(doc.strip() for _, doc in rows)


def test_the_passes_run_in_the_listed_order_each_once():
    seen: list[str] = []
    load_source(PROGRAM, "t.p4", after=lambda name, program: seen.append(name))
    assert seen == ["check", *(p.name for p in PASSES)]


def test_dump_after_shows_each_pass_doing_its_job(tmp_path):
    (tmp_path / "t.p4").write_text(PROGRAM)
    out = compile_("t.p4", "--dump-after", "side_effects", "--dump-after", "functions",
                   "--dump-after", "strength", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    sections = dump_sections(out.stdout)
    assert list(sections) == ["side_effects", "functions", "strength"]
    ingress = {name: text.split("control I(", 1)[1].split("\n}", 1)[0] for name, text in sections.items()}
    assert "inc(hdr.h.b)" in ingress["side_effects"]
    assert "inc(" not in ingress["functions"]  # inlined
    assert "(hdr.h.d / 8w4)" in ingress["functions"]
    assert "(hdr.h.d >> " in ingress["strength"] and " / " not in ingress["strength"]


def test_an_unknown_pass_is_one_line_naming_the_known_ones(tmp_path):
    (tmp_path / "t.p4").write_text(PROGRAM)
    out = compile_("t.p4", "--dump-after", "inlining", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr.count("\n") == 1 and "unknown pass 'inlining'" in out.stderr and "functions" in out.stderr
