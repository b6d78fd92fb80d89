"""A sample of p4c's v1model STF corpus (../shared/p4c-corpus) on the native engine itself (no
fallback): arithmetic, checksums, exits, header unions, parser errors, saturation, table entries
of every match kind. The whole corpus: `aggnet p4 stf --engine native` over PASS_ON_BMV2.txt."""
import os

import corpus
import pytest

from p4target.frontend import load_program
from p4target.native.build import compiler
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.stf import StfRunner, parse_stf

CORPUS = str(corpus.CORPUS)
SAMPLE = ["arith-bmv2", "checksum2-bmv2", "gauntlet_exit_combination_1-bmv2", "gauntlet_side_effect_order_1-bmv2",
          "gauntlet_exit_combination_3-bmv2", "issue2225-bmv2",  # an action that exits copies its inout args out
          "issue1755-bmv2", "parser_error-bmv2", "saturated-bmv2", "table-entries-lpm-bmv2",
          "table-entries-range-bmv2", "table-entries-ternary-bmv2", "table-entries-optional-bmv2", "union-valid-bmv2",
          "v1model-const-entries-bmv2"]

pytestmark = [pytest.mark.skipif(bool(corpus.MISSING), reason=corpus.MISSING or "-"),
              pytest.mark.skipif(compiler() is None, reason="no C compiler for the native engine")]


@pytest.mark.parametrize("name", SAMPLE)
def test_corpus_program_passes_natively(name):
    base = os.path.join(CORPUS, name)
    pipeline = make_pipeline(load_program(base + ".p4"), "native")
    assert isinstance(pipeline, NativePipeline)
    with open(base + ".stf") as f:
        result = StfRunner(pipeline, base + ".stf").run(parse_stf(f.read(), base + ".stf"))
    assert result.failures == []
