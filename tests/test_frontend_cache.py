"""The front end's output cached by program hash (p4target/compiled.py): what a switch loads from the
cache is what the front end makes, an edited program is compiled afresh, and errors are never cached."""
from pathlib import Path

import pytest

from p4target.compiled import front_end, front_end_file, p4info_file, printed
from p4target.device_config import device_config_source
from p4target.errors import P4Error
from p4target.frontend import load_program, load_source
from p4target.native.pipeline import generate, make_pipeline
from p4target.p4info import build_p4info

REPO = Path(__file__).resolve().parent.parent
AGGNET = str(REPO / "p4src" / "aggnet.p4")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "aggnet" / "native"


def test_a_cached_program_equals_the_front_ends_and_runs(cache):
    source = device_config_source(AGGNET)
    first = front_end(source, "device_config.p4")
    assert len(list(cache.glob("frontend-*.pickle"))) == 1
    again = front_end(source, "device_config.p4")
    assert len(list(cache.glob("frontend-*.pickle"))) == 1  # read back, not written again
    assert first[1] == again[1] == build_p4info(load_source(source, "device_config.p4"))
    assert front_end_file(AGGNET)[1] == build_p4info(load_program(AGGNET))
    pipeline = make_pipeline(again[0], "python")
    assert "AggIngress.agg_values" in pipeline.state.schema.registers


def test_the_printed_form_and_the_p4info_are_cached_as_generated(cache):
    source = device_config_source(AGGNET)
    form, cprog, info = printed(source, "device_config.p4")
    assert len(list(cache.glob("printed-*.pickle"))) == 1
    again = printed(source, "device_config.p4")
    assert len(list(cache.glob("printed-*.pickle"))) == 1  # read back, not written again
    assert again is not None and again[1].source == cprog.source == generate(load_source(source, "device_config.p4"))[1].source
    assert info == again[2] == p4info_file(AGGNET) == build_p4info(load_program(AGGNET))
    pipeline = make_pipeline(form, "native", cprog=cprog)
    assert pipeline.engine_name == "native" and "AggIngress.agg_values" in pipeline.state.schema.registers


def test_an_edited_program_is_compiled_again_and_errors_are_not_cached(cache):
    source = device_config_source(AGGNET)
    front_end(source, "device_config.p4")
    edited = source.replace("#define AGG_SLOTS 1024", "#define AGG_SLOTS 512")
    assert edited != source
    assert front_end(edited, "device_config.p4")[1] != front_end(source, "device_config.p4")[1]
    assert len(list(cache.glob("frontend-*.pickle"))) == 2
    for _ in range(2):
        with pytest.raises(P4Error, match="aggnet.p4:[0-9]+:1: error: syntax error, unexpected 'this'"):  # #line
            front_end(source + "\nthis is not P4;\n", "bad.p4")
    assert len(list(cache.glob("frontend-*.pickle"))) == 2
