"""The control plane on the native engine against the Python engine: the same writes refused alike."""
from __future__ import annotations

from pathlib import Path

import pytest

from p4target import state as st
from p4target.frontend import load_program
from p4target.lowered import model as lowered
from p4target.native.build import compiler
from p4target.native.pipeline import NativePipeline
from p4target.pipeline import Pipeline

pytestmark = pytest.mark.skipif(compiler() is None, reason="no C compiler for the native engine")
DATA = Path(__file__).parent / "data"


def test_a_program_printed_from_its_lowered_form_keeps_defaultonly_actions(tmp_path):
    """A table without a default_action gets an implicit @defaultonly NoAction; when the native engine prints a
    program from its lowered form (here: a range over 96 bits), its state once lost that scope and took entries
    running NoAction that the Python engine and simple_switch_grpc refuse."""
    path = tmp_path / "wide_range.p4"
    path.write_text((DATA / "native_gaps" / "wide_range.p4").read_text().replace("default_action = drop();", ""))
    program = load_program(str(path))
    native, python = NativePipeline(program), Pipeline(program)
    try:
        assert isinstance(native.program, lowered.Program)
        for pipeline in (native, python):
            match = {"hdr.w.addr": st.Range(1, 2**90), "hdr.w.kind": st.Exact(1)}
            with pytest.raises(st.InvalidArgument, match="@defaultonly"):
                pipeline.state.insert_entry("WrIngress.classify", st.TableEntry(match, "NoAction", priority=1))
            pipeline.state.insert_entry("WrIngress.classify", st.TableEntry(match, "WrIngress.drop", priority=1))
            assert pipeline.state.table("WrIngress.classify").schema.default_only == {"NoAction"}
    finally:
        native.close()
