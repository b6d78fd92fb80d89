"""p4c for the BMv2 target: compile a program, read back what p4c wrote, hold our P4Info IDs to p4c's.

BMv2 takes the pipeline as p4c's JSON plus p4c's P4Info. The controller and the embedded
target use P4Info built by p4target (p4c's naming and ID scheme, docs/targets.md); `id_mismatches`
is what keeps "the same IDs on both targets" honest: a program whose IDs differ is refused
rather than run with a controller that silently addresses the wrong objects.
"""
from __future__ import annotations

import os
import subprocess
from typing import Any

# P4Info entity lists with a preamble, and the kind named in messages.
KINDS = (("tables", "table"), ("actions", "action"), ("action_profiles", "action profile"),
         ("counters", "counter"), ("direct_counters", "direct counter"), ("meters", "meter"),
         ("direct_meters", "direct meter"), ("controller_packet_metadata", "controller header"),
         ("value_sets", "value set"), ("registers", "register"), ("digests", "digest"))
# Members with their own ids inside an entity: (list field, what they are called).
MEMBERS = {"tables": ("match_fields", "match field"), "actions": ("params", "param"),
           "controller_packet_metadata": ("metadata", "field")}


class CompileError(Exception):
    """p4c missing or failing, or its output unreadable: one line, exit 2."""

    exit_code = 2


def compile_bmv2(program: str, out_dir: str, p4c: str = "p4c") -> tuple[bytes, Any]:
    """p4c -> OUT_DIR/NAME.json and OUT_DIR/NAME.p4info.txtpb; returns (the JSON, the P4Info)."""
    name = os.path.splitext(os.path.basename(program))[0]
    os.makedirs(out_dir, exist_ok=True)
    p4info_path = os.path.join(out_dir, f"{name}.p4info.txtpb")
    argv = [p4c, "--target", "bmv2", "--arch", "v1model", "-o", out_dir, "--p4runtime-files", p4info_path, program]
    try:
        done = subprocess.run(argv, capture_output=True, text=True)
    except FileNotFoundError:
        raise CompileError(f"{program}: {p4c} not found on PATH (the BMv2 target compiles with it)") from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no output")
        raise CompileError(f"{program}: p4c failed (exit {done.returncode}): {first}")
    json_path = os.path.join(out_dir, f"{name}.json")
    try:
        with open(json_path, "rb") as fh:
            config = fh.read()
    except OSError as exc:
        raise CompileError(f"{json_path}: p4c wrote no BMv2 JSON: {exc.strerror}") from None
    return config, read_p4info_text(p4info_path)


def read_p4info_text(path: str) -> Any:
    """A P4Info from its protobuf text format (what `p4c --p4runtime-files X.txtpb` writes)."""
    from finsy.proto import p4i
    from google.protobuf import text_format

    try:
        with open(path, encoding="utf-8") as fh:
            return text_format.Parse(fh.read(), p4i.P4Info())
    except OSError as exc:
        raise CompileError(f"{path}: cannot read P4Info: {exc.strerror}") from None
    except text_format.ParseError as exc:
        raise CompileError(f"{path}: not a text-format P4Info: {exc}") from None


def id_mismatches(ours: Any, p4c: Any) -> list[str]:
    """Every way our P4Info's names and IDs differ from p4c's, one line each, in a fixed order."""
    out = []
    for field, kind in KINDS:
        mine = {e.preamble.name: e for e in getattr(ours, field)}
        theirs = {e.preamble.name: e for e in getattr(p4c, field)}
        for name in sorted(mine.keys() | theirs.keys()):
            if name not in theirs:
                out.append(f"{kind} {name} (id {mine[name].preamble.id}) is not in p4c's P4Info")
            elif name not in mine:
                out.append(f"{kind} {name} (id {theirs[name].preamble.id} in p4c's P4Info) is missing from ours")
            else:
                a, b = mine[name], theirs[name]
                if a.preamble.id != b.preamble.id:
                    out.append(f"{kind} {name}: id {a.preamble.id} here, {b.preamble.id} from p4c")
                if field in MEMBERS:
                    out += _member_mismatches(f"{kind} {name}", *MEMBERS[field], a, b)
    return out


def _member_mismatches(owner: str, field: str, what: str, a: Any, b: Any) -> list[str]:
    mine = {m.name: m.id for m in getattr(a, field)}
    theirs = {m.name: m.id for m in getattr(b, field)}
    return [f"{owner} {what} {name}: id {mine.get(name, 'missing')} here, {theirs.get(name, 'missing')} from p4c"
            for name in sorted(mine.keys() | theirs.keys()) if mine.get(name) != theirs.get(name)]
