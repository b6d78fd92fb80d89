"""Where `aggnet p4 compile` and `p4c --target bmv2 --arch v1model` disagree, over a folder of P4 programs.

For every .p4 directly in each FOLDER, p4c's verdict (its exit code, compiling into a temporary
directory) is set against ours: the front end in-process, its P4Info, and the program compiled
for our engines (the lowered form and the Python engine; with --native the C engine built too),
so "we accept" means the program would run. Each program is judged in a process of its own with a
time limit, so one that hangs or kills the front end cannot stop the survey.

The table puts every program in one row: both accept, both reject, only p4c accepts (with our
first error line), only we accept (with p4c's first error line), our crashes (an internal error
or a traceback, whatever p4c says). Where both reject, it also says whether the two errors name the
same line of the program, and lists those that do not (p4c names none when it crashes, or when the
program has no `main` and it only warns). With --stf, each program both accept that has a NAME.stf
beside it runs that packet test on both engines, from its source and from p4c's JSON, and the table
counts those that pass and lists those that do not. Where both accept, the warnings of the kinds
we give (`WARNED`, p4c's wording) are compared: the same ones at the same lines, or where they
differ (a warning p4c gives without a line needs only its text from us). --json writes the same as JSON.

    source /opt/p4ref/env.sh   # p4c on PATH
    python scripts/p4c_agreement.py ~/my-p4-programs [more folders] [--json out.json] [--jobs 2]

Programs that do not include v1model.p4 are skipped unless --all is given (p4c's bmv2 back end
targets v1model); local #include files are found next to the program, as p4c finds them.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from multiprocessing import get_context
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

V1MODEL = re.compile(r'^\s*#\s*include\s*[<"]v1model\.p4[>"]', re.M)
LOCAL_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)
ROWS = ("both accept", "both reject", "only p4c accepts", "only we accept", "our crashes")
LINES = ("same line", "other line", "p4c names no line")
WARNINGS = ("same warnings", "other warnings")
WARNED = re.compile(r"Explicit transition to reject not supported on this target|\w+: implicit transition to `reject'|"
                    r"Target does not support default_action for \S+ \(due to action profiles\)|"
                    r"Entry \(priority \d+\) and Entry \(priority \d+\) have priorities out of order|"
                    r"Entry and Entry have the same priority \d+|Unknown table property: \w+")
P4C_WARNING = re.compile(r"^(?:(.*?)\((\d+)\): )?\[--Wwarn=[\w-]+\] warning: (.*)$")
OUR_WARNING = re.compile(r"^(.*?):(\d+):\d+: warning: (.*)$")


@dataclass
class Verdict:
    program: str
    p4c_ok: bool
    p4c_error: str  # p4c's first error line when it rejects
    ours: str  # "ok", "error" or "crash"
    our_error: str  # our one-line error, or the crash's exception
    stf: str = ""  # with --stf: "pass", or where the STF test failed first; "" when not run
    p4c_warnings: list[str] = field(default_factory=list)  # "LINE: text" ("?: text" without a line), kinds WARNED
    our_warnings: list[str] = field(default_factory=list)

    @property
    def p4c_line(self) -> int | None:
        return error_line(self.p4c_error, r"\.p4[(:](\d+)")

    @property
    def our_line(self) -> int | None:
        return error_line(self.our_error, r"\.p4:(\d+)")

    @property
    def lines(self) -> str:
        """Where both reject: "same line", "other line", or "p4c names no line"; else ""."""
        if self.row != "both reject":
            return ""
        if self.p4c_line is None:
            return "same line" if self.our_line is None else "p4c names no line"
        return "same line" if self.p4c_line == self.our_line else "other line"

    @property
    def warnings(self) -> str:
        """Where both accept and either warns (kinds WARNED): "same warnings" or "other warnings"; else ""."""
        if self.row != "both accept" or not (self.p4c_warnings or self.our_warnings):
            return ""
        def text(w: str) -> str:
            return w.split(": ", 1)[1]

        lined = {w for w in self.p4c_warnings if not w.startswith("?:")}
        unlined = {text(w) for w in self.p4c_warnings if w.startswith("?:")}
        ours = set(self.our_warnings)
        same = lined <= ours and unlined <= {text(w) for w in ours} and all(w in lined or text(w) in unlined for w in ours)
        return "same warnings" if same else "other warnings"

    @property
    def row(self) -> str:
        if self.ours == "crash":
            return "our crashes"
        if self.p4c_ok:
            return "both accept" if self.ours == "ok" else "only p4c accepts"
        return "only we accept" if self.ours == "ok" else "both reject"


def first_error(text: str) -> str:
    """The line of a compiler's output that says what is wrong (p4c prints context lines after it)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return next((line for line in lines if re.search(r"\berror\b:?", line) and "warning:" not in line),
                lines[0] if lines else "")


def error_line(error: str, pattern: str) -> int | None:
    """The program line an error names (p4c writes FILE.p4(LINE), or FILE.p4:LINE:COL as we do), if it is an error."""
    found = re.search(pattern, error) if "warning" not in error.split("error", 1)[0] else None
    return int(found.group(1)) if found else None


def warnings_of(text: str, pattern: re.Pattern, path: str) -> list[str]:
    """The warnings of the kinds WARNED in a compiler's output, as "LINE: text" ("?: text" where none names a line of
    `path`), each once."""
    found = {}
    for m in filter(None, map(pattern.match, text.splitlines())):
        file, line, message = m.groups()
        if WARNED.fullmatch(message):
            where = line if line and file and Path(file).name == Path(path).name else "?"
            found[f"{where}: {message}"] = None
    return list(found)


def p4c_verdict(path: Path, timeout: float, out: str) -> tuple[bool, str, list[str]]:
    """p4c's exit code for `path` (compiled for BMv2's v1model into folder `out`: PROGRAM.json), its first error and
    its warnings."""
    try:
        proc = subprocess.run(["p4c", "--target", "bmv2", "--arch", "v1model", "-o", out,
                               "--p4runtime-files", os.path.join(out, "p4info.txtpb"), str(path)],
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"p4c timed out after {timeout:.0f} s", []
    return (proc.returncode == 0, "" if proc.returncode == 0 else first_error(proc.stderr + proc.stdout),
            warnings_of(proc.stderr + proc.stdout, P4C_WARNING, str(path)))


def _ours(path: str, native: bool) -> tuple[str, str, list[str]]:
    """Our verdict, run in a child process: the front end, P4Info, and the engines' forms; our warnings."""
    from p4target import externs, load
    from p4target.errors import P4Error
    from p4target.frontend import load_program
    from p4target.lowered.from_ir import lower_program
    from p4target.p4info import build_p4info

    externs.load()  # a spawned child starts with no externs registered: it is a composition root too
    try:
        program = load_program(path)
        build_p4info(program)
        lower_program(program)
        load.pipeline(program, "python")
        if native:

            pipeline, reason = load.native_or_reason(program)
            if pipeline is None:
                return "error", f"{path}: native engine: {reason}", []
            pipeline.close()
        return "ok", "", warnings_of("\n".join(program.warnings), OUR_WARNING, path)
    except P4Error as exc:
        return "error", str(exc).splitlines()[0], []
    except Exception as exc:  # noqa: BLE001 - a crash is what this survey looks for
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return "crash", f"{type(exc).__name__}: {exc} ({Path(where.filename).name}:{where.lineno})", []


def _stf(path: str, p4c_json: str, stf: str) -> str:
    """The STF test on both engines, from the source and from p4c's JSON: "pass", or the first failure."""
    from p4target.errors import P4Error
    from p4target.stf import run_stf_file

    for program in (path, p4c_json):
        for engine in ("python", "native"):
            side = f"{engine} engine, {'our source' if program == path else 'p4c JSON'}"
            try:
                result = run_stf_file(program, stf, engine)
            except P4Error as exc:
                return f"{side}: {str(exc).splitlines()[0]}"
            if not result.passed:
                return f"{side}: {' '.join(result.failures[0].split())}"
    return "pass"


def in_child(fn: Callable[..., tuple | str], args: tuple, timeout: float) -> tuple | str | None:
    """fn(*args) in a process of its own: a hang or a dying interpreter is a verdict (None), not the survey's end."""
    with get_context("spawn").Pool(1) as pool:
        job = pool.apply_async(fn, args)
        try:
            return job.get(timeout)
        except Exception:  # noqa: BLE001 - timeout or the child died
            return None


def judge(path: Path, native: bool, stf: bool, timeout: float) -> Verdict:
    with tempfile.TemporaryDirectory(prefix="p4c-agreement-") as out:
        p4c_ok, p4c_error, p4c_warnings = p4c_verdict(path, timeout, out)
        ours, our_error, our_warnings = in_child(_ours, (str(path), native), timeout) or (
            "crash", f"no verdict within {timeout:.0f} s, or the process died", [])
        verdict = Verdict(str(path), p4c_ok, p4c_error, ours, our_error, p4c_warnings=p4c_warnings,
                          our_warnings=our_warnings)
        test = path.with_suffix(".stf")
        if stf and verdict.row == "both accept" and test.is_file():
            p4c_json = str(Path(out) / path.with_suffix(".json").name)
            verdict.stf = in_child(_stf, (str(path), p4c_json, str(test)), timeout) or "crash: no result, or the process died"
    return verdict


def programs(folders: list[str], every: bool) -> list[Path]:
    """The .p4 files directly in `folders` (v1model programs only unless `every`), sorted; a file
    another one there #includes "like this" is part of that program, not a program. A dangling
    symbolic link (p4c's testdata links to back ends' folders a testdata-only copy lacks) is no program."""
    found = []
    for folder in folders:
        texts = {path: path.read_text(encoding="utf-8", errors="replace") for path in sorted(Path(folder).glob("*.p4")) if path.is_file()}
        included = {(path.parent / name).resolve() for path, text in texts.items() for name in LOCAL_INCLUDE.findall(text)}
        found += [path for path, text in texts.items()
                  if path.resolve() not in included and (every or V1MODEL.search(text))]
    return found


def table(verdicts: list[Verdict]) -> str:
    """Counts per row, then each disagreement and crash with the other side's reason."""
    lines = [f"{len(verdicts)} programs"]
    lines += [f"  {row:<17} {sum(v.row == row for v in verdicts):>4}" for row in ROWS]
    lines += [f"    {how:<19} {sum(v.lines == how for v in verdicts):>4}" for how in LINES]
    warned = [v for v in verdicts if v.warnings]
    lines.append(f"  where both accept and either warns (the kinds we give): {len(warned)}")
    lines += [f"    {how:<19} {sum(v.warnings == how for v in verdicts):>4}" for how in WARNINGS]
    for row in ROWS[2:]:
        rows = [v for v in verdicts if v.row == row]
        if rows:
            lines.append(f"\n{row}:")
            lines += [f"  {Path(v.program).name}: {v.p4c_error if row == 'only we accept' else v.our_error}"
                      for v in rows]
    tested = [v for v in verdicts if v.stf]
    if tested:
        lines.append(f"\nSTF tests of programs both accept: {sum(v.stf == 'pass' for v in tested)} of {len(tested)} pass "
                     "on both engines, from the source and from p4c's JSON")
        lines += [f"  {Path(v.program).name}: {v.stf}" for v in tested if v.stf != "pass"]
    for v in (v for v in warned if v.warnings == "other warnings"):
        lines.append(f"\nother warnings in {Path(v.program).name}:")
        lines += [f"  p4c: {w}" for w in v.p4c_warnings if w not in v.our_warnings]
        lines += [f"  we:  {w}" for w in v.our_warnings if w not in v.p4c_warnings]
    others = [v for v in verdicts if v.lines == "other line"]
    if others:
        lines.append("\nboth reject, at other lines (p4c's line, ours):")
        lines += [f"  {Path(v.program).name}: {v.p4c_line}, {v.our_line}: {v.our_error.split(': ', 1)[-1]}" for v in others]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from p4target import externs

    externs.load()  # this script is a composition root of the target
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", metavar="FOLDER")
    parser.add_argument("--json", metavar="OUT.json", help="write every verdict and the counts as JSON")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="programs judged at once")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per program per compiler")
    parser.add_argument("--native", action="store_true", help="also build each accepted program's C engine")
    parser.add_argument("--all", action="store_true", help="judge programs that do not include v1model.p4 too")
    parser.add_argument("--stf", action="store_true", help="run the NAME.stf of each program both accept, on both "
                                                           "engines, from the source and from p4c's JSON")
    args = parser.parse_args(argv)
    if shutil.which("p4c") is None:
        print("p4c_agreement: p4c is not on PATH (source /opt/p4ref/env.sh)", file=sys.stderr)
        return 2
    paths = programs(args.folders, args.all)
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        verdicts = list(pool.map(lambda p: judge(p, args.native, args.stf, args.timeout), paths))
    print(table(verdicts))
    if args.json:
        counts = {row: sum(v.row == row for v in verdicts) for row in ROWS}
        counts.update({how: sum(v.lines == how for v in verdicts) for how in LINES})
        counts.update({how: sum(v.warnings == how for v in verdicts) for how in WARNINGS})
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"counts": counts, "programs": [dict(asdict(v), row=v.row, lines=v.lines, warnings=v.warnings)
                                                     for v in verdicts]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
