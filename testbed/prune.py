"""Run folders listed and pruned by age: `aggnet clean --runs 7d [--runs-dir runs] [--dry-run]`.

A run folder is one `testbed.network.new_run_dir` made: RUNS_DIR/YYYYMMDD-HHMMSS[-N]. Its age
is the time since anything in it was last written, so a run still writing is never old; other
folders and files in RUNS_DIR are not ours and are left alone.
"""
from __future__ import annotations

import os
import re
import shutil
import time
from dataclasses import dataclass

RUN_NAME = re.compile(r"^\d{8}-\d{6}(-\d+)?$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class PruneError(Exception):
    """A bad --runs age or runs folder (one line, exit 2)."""

    exit_code = 2


def parse_age(text: str) -> float:
    """Seconds in an age such as 7d, 12h, 30m, 90s or 2w."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw])", text.strip())
    if match is None:
        raise PruneError(f"error: --runs {text!r}: expected an age such as 7d, 12h, 30m, 90s or 2w")
    return float(match.group(1)) * UNITS[match.group(2)]


@dataclass
class RunFolder:
    path: str
    last_write: float  # newest modification time of the folder and everything in it
    size: int  # bytes of its files


def run_folders(root: str) -> list[RunFolder]:
    """The run folders in `root`, oldest first; PruneError if `root` is not a folder."""
    if not os.path.isdir(root):
        raise PruneError(f"error: --runs-dir {root}: no such folder")
    out = []
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if RUN_NAME.match(name) and os.path.isdir(path) and not os.path.islink(path):
            out.append(_measure(path))
    return sorted(out, key=lambda r: r.last_write)


def _measure(path: str) -> RunFolder:
    last, size = os.lstat(path).st_mtime, 0
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(folder, name))
            except OSError:
                continue  # removed meanwhile
            last = max(last, st.st_mtime)
            size += st.st_size if name in files else 0
    return RunFolder(path, last, size)


def prune_runs(root: str, older_than_s: float, dry_run: bool = False, now: float | None = None) -> list[RunFolder]:
    """Remove (or with dry_run only list) the run folders not written for `older_than_s` seconds."""
    now = time.time() if now is None else now
    old = [r for r in run_folders(root) if now - r.last_write >= older_than_s]
    if not dry_run:
        for run in old:
            shutil.rmtree(run.path)
    return old


def describe(run: RunFolder, now: float) -> str:
    """`PATH (SIZE, last written AGE ago)`, for the listing."""
    age = now - run.last_write
    unit = next(u for u in ("w", "d", "h", "m", "s") if age >= UNITS[u] or u == "s")
    return f"{run.path} ({run.size / (1 << 20):.1f} MB, last written {age / UNITS[unit]:.1f}{unit} ago)"
