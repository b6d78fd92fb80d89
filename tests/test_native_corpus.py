"""Every program of p4c's v1model STF corpus (../shared/p4c-corpus) on the native engine itself, from
our front end, as `aggnet p4 stf --engine native PROG.p4 TEST.stf` runs it: no fallback to the Python
engine (a fallback fails the test, it is never a skip) and the STF test passes. Every program runs
through our lowering and backends/c.py. (From p4c's JSON: tests/test_bmv2_json.py.)"""
import logging

import corpus
import pytest

from p4target.frontend import load_program
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.stf import StfRunner, parse_stf

pytestmark = pytest.mark.skipif(bool(corpus.MISSING), reason=corpus.MISSING or "-")


@pytest.mark.parametrize("name", corpus.params())
def test_corpus_program_passes_natively_from_source(name, caplog):
    caplog.set_level(logging.WARNING, logger="aggnet.native")
    pipeline = make_pipeline(load_program(str(corpus.CORPUS / f"{name}.p4")), "native")
    try:
        fallbacks = [r.getMessage() for r in caplog.records if r.name == "aggnet.native"]
        assert isinstance(pipeline, NativePipeline) and fallbacks == []
        stf = corpus.CORPUS / f"{name}.stf"
        result = StfRunner(pipeline, str(stf)).run(parse_stf(stf.read_text(), str(stf)))
        assert result.passed, result.report(name)
    finally:
        if isinstance(pipeline, NativePipeline):
            pipeline.close()
