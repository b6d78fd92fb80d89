"""The extern registry (p4target/externs): one module per v1model extern, and nothing half-added.

- complete: every extern function and extern type v1model.p4 declares has a module; every primitive the
  lowering writes, p4c writes into the JSON of the STF programs, or a module claims, is printed by both
  back ends (the language's own by a `p_<op>` method of both, an extern's by its module alone);
- add_to_field / subtract_from_field, a test-only extern added the registry's way (one module,
  tests/add_to_field_extern.py, registered by importing it): the Python engine, the native engine and
  simple_switch (running our lowering's JSON) send the same packets. Outside this test the front end refuses
  them as p4c does (an extern function of the program's own: "unknown extern function").
"""
from __future__ import annotations

import ast
import random
import re
from pathlib import Path

import add_to_field_extern  # noqa: F401  (registers the test-only extern)
import bmv2_ref
import pytest

from p4target import externs
from p4target.backends import c as c_backend
from p4target.backends import python as py_backend
from p4target.backends.vectorize import VECTOR_OP
from p4target.externs.base import Extern
from p4target.frontend import load_program
from p4target.lowered import to_json
from p4target.lowered.from_ir import lower_program
from p4target.native.pipeline import NativePipeline, make_pipeline
from p4target.pipeline import Pipeline

REPO = Path(__file__).resolve().parent.parent
V1MODEL = REPO / "p4target" / "include" / "v1model.p4"
ADD_TO_FIELD = REPO / "tests" / "data" / "externs" / "add_to_field.p4"


# The primitives p4c (1.2.x, --target bmv2 --arch v1model) writes: those in its JSON of the corpus and tests/data
# programs, and those of the v1model externs no such program calls.
P4C_WRITES = {"_jump", "_jump_if_zero", "add_header", "assign", "assign_VL", "assign_header", "assign_header_stack",
              "clone_egress_pkt_to_egress", "clone_ingress_pkt_to_egress", "count", "exit", "generate_digest",
              "mark_to_drop", "modify_field_with_hash_based_offset", "pop", "push", "recirculate", "register_read",
              "register_write", "remove_header", "resubmit",
              "assert", "assume", "execute_meter", "log_msg", "modify_field_rng_uniform", "truncate"}


def v1model_externs() -> tuple[set[str], set[str]]:
    """(extern functions, extern types) v1model.p4 declares."""
    text = V1MODEL.read_text()
    types = set(re.findall(r"^extern\s+(\w+)\s*(?:<[^>]*>)?\s*\{", text, re.M))
    functions = set(re.findall(r"^extern\s+\w+(?:<[^>]*>)?\s+(\w+)\s*(?:<[^>]*>)?\s*\(", text, re.M))
    return functions, types


def core_ops(printer: type) -> set[str]:
    """The primitives a printer prints itself (the language's own: assign, header and stack operations, exit)."""
    return {name[2:] for klass in printer.__mro__ for name in vars(klass) if name.startswith("p_")}


def lowering_ops() -> set[str]:
    """Every primitive op the lowering (p4target/lowered/from_ir) writes as a literal `m.Primitive("op", ...)`."""
    ops = set()
    for path in (REPO / "p4target" / "lowered" / "from_ir").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "Primitive" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                ops.add(node.args[0].value)
    return ops


def overrides(ext: Extern, *methods: str) -> bool:
    return any(getattr(type(ext), name) is not getattr(Extern, name) for name in methods)


def test_every_v1model_extern_has_a_module():
    functions, types = v1model_externs()
    assert {"hash", "digest", "clone3", "log_msg", "assert"} <= functions and {"register", "meter"} <= types
    assert sorted(f for f in functions if externs.for_function(f) is None) == []
    assert sorted(t for t in types if externs.for_type(t) is None) == []


def test_every_primitive_is_printed_by_both_back_ends_once():
    python_core, c_core = core_ops(py_backend._Printer), core_ops(c_backend._Printer)
    python_core.discard(VECTOR_OP)  # the Python printer's own: a run of lanes its vectorizer rerolled
    assert python_core == c_core, "the language's own primitives differ between the back ends"
    registered = {op for ext in externs.registered() for op in ext.primitives}
    assert sorted(python_core & registered) == [], "an extern's primitive also printed by a back end's p_ method"
    assert {"assign", "add_header", "exit"} <= python_core and {"register_write", "count"} <= registered
    written = lowering_ops() | registered | P4C_WRITES
    assert sorted(op for op in written if op not in python_core | registered | {"_jump", "_jump_if_zero"}) == []


def test_every_module_says_how_it_lowers_and_prints():
    for ext in externs.registered():
        name = type(ext).__name__
        if ext.functions or any(t not in ("action_profile", "action_selector", "Checksum16") for t in ext.types):
            assert overrides(ext, "lower", "checksum"), f"{name} declares calls it does not lower"
        if ext.primitives:
            assert overrides(ext, "emit", "python") and overrides(ext, "emit", "c"), f"{name} prints nothing"


def test_a_name_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        externs.base.register(type("Again", (Extern,), {"primitives": ("count",)}))


# --------------------------------------------------------------------------- an extern added the registry's way

def packets(n: int) -> list[tuple[int, bytes]]:
    """Ethernet + h_t (op a b x c n|m w) with random values; op picks the table's entry (1, 2 or none)."""
    rng = random.Random(20)
    out = []
    for _ in range(n):
        h = bytes([rng.choice([0, 1, 2, 3])]) + rng.randbytes(1 + 2 + 2 + 1 + 1 + 8)
        out.append((rng.randrange(4), bytes(6) + bytes.fromhex("020000000001") + b"\x88\xb5" + h))
    return out


@pytest.fixture(scope="module")
def lowered():
    return lower_program(load_program(str(ADD_TO_FIELD)))


def test_add_to_field_same_on_both_engines(lowered):
    py, nat = Pipeline(lowered), make_pipeline(lowered, "native")
    assert isinstance(nat, NativePipeline)
    sent = packets(400)
    outs = [py.process(port, data) for port, data in sent]
    assert outs == [nat.process(port, data) for port, data in sent]
    port, data = sent[0]
    out = outs[0][0][1]
    assert out[14 + 1] == (data[14 + 1] + 200) & 0xFF  # a + 200, wrapped
    assert out[-8:] == ((int.from_bytes(data[-8:], "big") + 0xFFFF_FFFF_0000_0001) % (1 << 64)).to_bytes(8, "big")


@pytest.mark.bmv2
@pytest.mark.skipif(bool(bmv2_ref.missing()), reason=bmv2_ref.missing() or "-")
def test_add_to_field_same_on_simple_switch(lowered, tmp_path):
    path = tmp_path / "add_to_field.json"
    path.write_text(to_json.dumps(lowered))
    ours = Pipeline(lowered)
    sent = packets(200)
    with bmv2_ref.Bmv2Switch(str(path), ours.state.schema) as sw:
        theirs = bmv2_ref.observe(sw, sent)
    mine = bmv2_ref.observe(ours, sent)
    assert sum(len(v) for v in mine.outputs.values()) == len(sent)
    assert bmv2_ref.first_difference(mine, theirs) == ""
