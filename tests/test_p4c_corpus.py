"""p4c's v1model STF corpus on the embedded target: every program listed as passing must pass.

The corpus (../shared/p4c-corpus: p4c's testdata programs with an .stf test that passes on
BMv2) is read-only input. tests/data/p4c_corpus_pass.txt lists the programs known to pass
here; the list only grows. Programs run in-process, spread over worker processes.

`python tests/test_p4c_corpus.py [NAME...]` prints one line per program (PASS/FAIL + reason).
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor

import corpus
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = str(corpus.CORPUS)
EXPECTED = os.path.join(ROOT, "tests", "data", "p4c_corpus_pass.txt")


def corpus_names() -> list[str]:
    """Program names (without .p4) the corpus lists as passing on BMv2."""
    with open(os.path.join(CORPUS, "PASS_ON_BMV2.txt")) as f:
        return [line.strip().removesuffix(".p4") for line in f if line.strip()]


def expected_passes() -> set[str]:
    with open(EXPECTED) as f:
        return {line.strip() for line in f if line.strip() and not line.startswith("#")}


def run_one(name: str) -> tuple[str, bool, str]:
    """(name, passed, one-line reason) for corpus program `name`."""
    from p4target.errors import P4Error
    from p4target.stf import run_stf_file

    try:
        result = run_stf_file(os.path.join(CORPUS, name + ".p4"), os.path.join(CORPUS, name + ".stf"))
    except P4Error as exc:
        return name, False, str(exc)
    except Exception as exc:  # noqa: BLE001 - a crash is a failure with its reason, not a test error
        return name, False, f"internal error: {type(exc).__name__}: {exc}"
    reason = "" if result.passed else " | ".join(result.failures)[:300]
    return name, result.passed, reason


def run_all(names: list[str]) -> list[tuple[str, bool, str]]:
    """Run programs in parallel worker processes (each imports the target once)."""
    with ProcessPoolExecutor(max_workers=min(4, os.cpu_count() or 1)) as pool:
        return list(pool.map(run_one, names, chunksize=4))


@pytest.mark.skipif(not os.path.isdir(CORPUS), reason=f"p4c corpus not found at {CORPUS}")
def test_expected_corpus_programs_pass():
    names = corpus_names()
    expected = expected_passes()
    unknown = expected - set(names)
    assert not unknown, f"{EXPECTED} names programs that are not in the corpus: {sorted(unknown)}"
    results = run_all(sorted(expected))
    failed = [f"{n}: {why}" for n, ok, why in results if not ok]
    assert not failed, "corpus programs that passed before fail now:\n" + "\n".join(failed)


if __name__ == "__main__":
    chosen = sys.argv[1:] or corpus_names()
    outcome = run_all(chosen)
    for n, ok, why in outcome:
        print(f"{'PASS' if ok else 'FAIL'} {n} {why}")
    print(f"{sum(ok for _, ok, _ in outcome)} of {len(outcome)} pass", file=sys.stderr)
