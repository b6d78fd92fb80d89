"""p4c's STF corpus, defined once for the tests: ../shared/p4c-corpus beside the checkout, or $AGGNET_P4C_CORPUS.

Tests `import corpus` (pytest puts tests/ on sys.path). Without the corpus, `params()` is one skipped case
that says where it looked, never an empty (silently passing) parametrization.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("AGGNET_P4C_CORPUS") or ROOT.parent / "shared" / "p4c-corpus")
MISSING = "" if (CORPUS / "PASS_ON_BMV2.txt").is_file() else \
    f"p4c's corpus is not at {CORPUS} (put ../shared beside the checkout or set $AGGNET_P4C_CORPUS)"


def names() -> list[str]:
    """The programs (without .p4) the corpus lists as passing on BMv2; [] without the corpus."""
    if MISSING:
        return []
    return [n.removesuffix(".p4") for n in (CORPUS / "PASS_ON_BMV2.txt").read_text().split()]


def params() -> list:
    """`names()` for pytest.mark.parametrize, or one case skipped with MISSING as its reason."""
    return names() or [pytest.param("corpus-missing", marks=pytest.mark.skip(reason=MISSING))]
