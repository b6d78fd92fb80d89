"""`aggnet clean --runs OLDER_THAN`: run folders not written for that long are listed (--dry-run)
or removed; younger ones, folders still being written and anything not named like a run stay."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DAY = 86400


def aggnet(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "testbed.cli", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=60)


def make_run(root: Path, name: str, age_s: float, fresh_file_age_s: float | None = None) -> Path:
    """A run folder with a log, everything last written `age_s` ago (one file `fresh_file_age_s` ago)."""
    run = root / name
    (run / "logs").mkdir(parents=True)
    (run / "logs" / "s1.log").write_bytes(b"x" * 1000)
    (run / "results.json").write_text("{}")
    stamp = time.time() - age_s
    for path in (run / "logs" / "s1.log", run / "results.json", run / "logs", run):
        os.utime(path, (stamp, stamp))
    if fresh_file_age_s is not None:
        fresh = time.time() - fresh_file_age_s
        os.utime(run / "logs" / "s1.log", (fresh, fresh))
    return run


def test_dry_run_lists_and_a_real_run_removes_only_old_run_folders(tmp_path):
    old = make_run(tmp_path, "20261101-120000", 10 * DAY)
    old_twin = make_run(tmp_path, "20261101-120000-2", 9 * DAY)
    recent = make_run(tmp_path, "20261203-080000", DAY)
    still_writing = make_run(tmp_path, "20261120-080000", 12 * DAY, fresh_file_age_s=60)
    not_a_run = make_run(tmp_path, "keep-me", 30 * DAY)

    listed = aggnet("clean", "--runs", "7d", "--runs-dir", str(tmp_path), "--dry-run")
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert [line.split()[2] for line in lines[:-1]] == [str(old), str(old_twin)]  # oldest first
    assert "last written 1.4w ago" in lines[0] and lines[-1].startswith("would remove 2 run folder(s)")
    assert all(p.exists() for p in (old, old_twin, recent, still_writing, not_a_run))

    pruned = aggnet("clean", "--runs", "7d", "--runs-dir", str(tmp_path))
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines()[-1].startswith("removed 2 run folder(s)")
    assert not old.exists() and not old_twin.exists()
    assert recent.exists() and still_writing.exists() and not_a_run.exists()

    hours = aggnet("clean", "--runs", "12h", "--runs-dir", str(tmp_path))
    assert hours.returncode == 0 and not recent.exists() and still_writing.exists() and not_a_run.exists()


def test_a_bad_age_or_folder_is_one_line_exit_2(tmp_path):
    for args, wanted in ((("--runs", "7days"), "--runs '7days': expected an age such as 7d"),
                         (("--runs", "7d", "--runs-dir", str(tmp_path / "nope")), "no such folder")):
        out = aggnet("clean", *args)
        assert out.returncode == 2 and out.stdout == "", out
        assert len(out.stderr.strip().splitlines()) == 1 and wanted in out.stderr, out.stderr
