"""ruff and mypy pass on the code, with the settings in pyproject.toml (rules, packages, caches).

Both run from this interpreter's environment (`python -m`), so the pinned versions of
requirements.txt decide, not whatever is on PATH. mypy keeps its cache in .mypy_cache/ at the
repository root (gitignored), so a rerun checks only what changed.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINTED = ["config", "controller", "hosts", "p4target", "protocol", "testbed", "scripts", "tests"]


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_ruff_finds_nothing():
    done = run_tool("ruff", "check", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_finds_nothing():
    done = run_tool("mypy")  # the packages come from [tool.mypy] in pyproject.toml
    assert done.returncode == 0, done.stdout + done.stderr
