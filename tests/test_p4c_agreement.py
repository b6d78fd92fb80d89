"""scripts/p4c_agreement.py sorts a folder of programs into p4c's verdict against ours.

p4c here is a stand-in on PATH that rejects a program holding the marker P4C_REJECTS (with an
error line the table must quote) and accepts the rest, warning of an unknown table property where
the marker P4C_WARNS is, so every row can be produced on purpose;
our side is the real front end. The real p4c's verdicts on the same kind of programs are checked
by test_frontend_language.py and test_frontend_p4c_rejects.py.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_frontend_p4c_rejects import write

REPO = Path(__file__).resolve().parent.parent
FAKE_P4C = """#!/bin/sh
for last; do :; done
if grep -q P4C_REJECTS "$last"; then echo "$last(1): [--Werror=type-error] error: stand-in refuses" >&2; exit 1; fi
if grep -q P4C_WARNS "$last"; then
  echo "$last($(grep -n made_up "$last" | cut -d: -f1)): [--Wwarn=ignore-prop] warning: Unknown table property: made_up" >&2
fi
exit 0
"""


def test_every_row_and_the_json(tmp_path):
    bin_dir, folder = tmp_path / "bin", tmp_path / "programs"
    bin_dir.mkdir()
    folder.mkdir()
    (bin_dir / "p4c").write_text(FAKE_P4C)
    (bin_dir / "p4c").chmod(0o755)
    write(folder, ("both_accept", "", "", "h.h.a = 1;", None))
    write(folder, ("only_p4c_accepts", "", "", "h.h.a = true;", None))
    write(folder, ("only_we_accept", "// P4C_REJECTS", "", "", None))
    write(folder, ("both_reject", "// P4C_REJECTS", "", "h.h.a = h.h.s;", None))
    table = "action a() { }\n    table t { key = { h.h.a: exact; } actions = { a; } made_up = 3; }"
    write(folder, ("warned_alike", "// P4C_WARNS", table, "t.apply();", None))
    write(folder, ("warned_otherwise", "", table, "t.apply();", None))  # we warn, the stand-in does not
    (folder / "skeleton.p4").write_text('#include <v1model.p4>\n// included below, not a program\n')
    (folder / "uses_skeleton.p4").write_text((folder / "both_accept.p4").read_text() + '#include "skeleton.p4"\n')
    (folder / "not_v1model.p4").write_text("control c() { apply { } }\n")
    out = tmp_path / "out.json"
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "p4c_agreement.py"), str(folder), "--jobs", "2",
                           "--json", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    programs = {Path(v["program"]).stem: v for v in json.loads(out.read_text())["programs"]}
    assert {name: v["row"] for name, v in programs.items()} == {
        "both_accept": "both accept", "uses_skeleton": "both accept", "both_reject": "both reject",
        "only_p4c_accepts": "only p4c accepts", "only_we_accept": "only we accept", "warned_alike": "both accept",
        "warned_otherwise": "both accept"}
    assert {name: v["warnings"] for name, v in programs.items() if v["warnings"]} == {
        "warned_alike": "same warnings", "warned_otherwise": "other warnings"}
    line = next(i for i, text in enumerate((folder / "warned_alike.p4").read_text().splitlines(), 1) if "made_up" in text)
    assert programs["warned_alike"]["p4c_warnings"] == programs["warned_alike"]["our_warnings"] == [
        f"{line}: Unknown table property: made_up"]
    assert json.loads(out.read_text())["counts"] == {"both accept": 4, "both reject": 1, "only p4c accepts": 1,
                                                     "only we accept": 1, "our crashes": 0, "same line": 0,
                                                     "other line": 1, "p4c names no line": 0,
                                                     "same warnings": 1, "other warnings": 1}
    lines = proc.stdout.splitlines()
    assert "  only_we_accept.p4: " + str(folder / "only_we_accept.p4") + "(1): [--Werror=type-error] error: " \
           "stand-in refuses" in lines
    assert any(line.startswith("  only_p4c_accepts.p4: ") and ": error: " in line for line in lines)
    assert lines[lines.index("other warnings in warned_otherwise.p4:") + 1] == f"  we:  {line}: Unknown table property: made_up"


def test_without_p4c_it_says_so_in_one_line(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "p4c_agreement.py"), str(tmp_path)],
                          capture_output=True, text=True, env={"PATH": str(tmp_path)}, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "p4c_agreement: p4c is not on PATH (source /opt/p4ref/env.sh)"]
