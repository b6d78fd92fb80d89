"""Whole programs load into the IR the interpreter and P4Info generator consume."""
from __future__ import annotations

import os

from p4target.frontend import ir, load_program

DATA = os.path.join(os.path.dirname(__file__), "data", "frontend")


def test_basic_ipv4_program_loads():
    p = load_program(os.path.join(DATA, "basic.p4"))
    main = p.main
    assert [main.parser.name, main.verify_checksum.name, main.ingress.name, main.egress.name,
            main.compute_checksum.name, main.deparser.name] == [
        "MyParser", "MyVerifyChecksum", "MyIngress", "MyEgress", "MyComputeChecksum", "MyDeparser"]
    table = main.ingress.tables["ipv4_lpm"]
    assert table.control_plane_name == "MyIngress.ipv4_lpm"
    assert [(k.name, k.match_kind, k.width) for k in table.keys] == [("hdr.ipv4.dstAddr", "lpm", 32)]
    assert [r.action.control_plane_name for r in table.actions] == ["MyIngress.ipv4_forward", "MyIngress.drop", "NoAction"]
    assert table.size == 1024
    assert table.default_action.action.name == "drop" and table.default_action.args == []
    fwd = main.ingress.actions["ipv4_forward"]
    assert [(q.name, q.direction, str(q.type)) for q in fwd.data_params] == [("dstAddr", "", "bit<48>"), ("port", "", "bit<9>")]
    # the parser: start -> parse_ethernet -> select on etherType
    states = main.parser.states
    assert list(states) == ["start", "parse_ethernet", "parse_ipv4"]
    sel = states["parse_ethernet"].transition
    assert isinstance(sel, ir.SelectTransition)
    assert isinstance(sel.cases[0].keysets[0], ir.KsValue) and sel.cases[0].keysets[0].value.value == 0x800
    assert sel.cases[0].next == "parse_ipv4" and isinstance(sel.cases[1].keysets[0], ir.KsDefault)
    extract = states["parse_ipv4"].body[0].call
    assert isinstance(extract, ir.ExternMethodCall) and extract.method == "extract"
    assert extract.args[0].type is p.types["ipv4_t"]
    # checksum update: a list expression and a HashAlgorithm enum member
    upd = main.compute_checksum.body.stmts[0].call
    assert isinstance(upd, ir.ExternFunctionCall) and upd.name == "update_checksum"
    assert isinstance(upd.args[1], ir.ListExpr) and len(upd.args[1].items) == 11
    assert isinstance(upd.args[3], ir.EnumMember) and upd.args[3].member == "csum16"
    assert p.types["ipv4_t"].width() == 160


def test_aggregation_program_loads_into_typed_lanes():
    p = load_program(os.path.join(DATA, "agg32.p4"))
    ingress = p.main.ingress
    lanes = [i for i in ingress.instances.values() if i.name.startswith("lane")]
    assert len(lanes) == 32
    assert all(i.extern == "register" and i.size == 256 and i.type_args == [ir.IntType(32)] for i in lanes)
    assert ingress.instances["agg_packets"].kind == "packets_and_bytes"
    assert [k.name for k in ingress.tables["agg_children"].keys] == ["hdr.agg.job", "standard_metadata.ingress_port"]
    # the saturating add survives as a typed Binary on int<32>
    sat = [s for s in _walk(ingress.body) if isinstance(s, ir.Assign) and isinstance(s.rhs, ir.Binary) and s.rhs.op == "|+|"]
    assert len(sat) == 32 and all(s.rhs.type == ir.IntType(32) for s in sat)
    mcast = [s for s in _walk(ingress.body) if isinstance(s, ir.Assign) and isinstance(s.lhs, ir.Member) and s.lhs.member == "mcast_grp"]
    assert len(mcast) == 1
    assert p.constants["AGG_UDP_PORT"].value.value == 47000


def _walk(stmt):
    """Every statement inside `stmt` (blocks and ifs flattened)."""
    yield stmt
    if isinstance(stmt, ir.Block):
        for s in stmt.stmts:
            yield from _walk(s)
    elif isinstance(stmt, ir.If):
        yield from _walk(stmt.then)
        if stmt.else_ is not None:
            yield from _walk(stmt.else_)
