"""Each supported construct parses, resolves and gets the expected IR shape and type."""
from __future__ import annotations

import pytest

from p4target.errors import P4Error
from p4target.frontend import ir, load_source

HEADERS = """
#include <core.p4>
#include <v1model.p4>
header h_t { bit<8> a; bit<16> b; int<32> s; bit<1> flag; bit<7> pad; }  // BMv2: whole bytes
header v_t { bit<16> tci; bit<16> et; }
struct headers { h_t h; v_t[3] vl; }
struct meta_t { bit<8> x; bit<16> y; bool ok; bit<32> w; int<8> i; }
struct pair_t { bit<8> first; bit<16> second; }
"""

PARSER = """
parser P(packet_in pk, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.h); transition accept; }
}
"""

TAIL = """
control VC(inout headers hdr, inout meta_t meta) { apply { } }
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers hdr, inout meta_t meta) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.h); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def program(apply: str = "", locals_: str = "", decls: str = "", parser: str = PARSER) -> ir.Program:
    """A full v1model program with the given ingress body."""
    src = HEADERS + decls + parser + (
        "control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) {\n"
        f"{locals_}\n apply {{\n{apply}\n}}\n}}\n") + TAIL
    return load_source(src, "t.p4")


def stmts(apply: str, **kw) -> list[ir.Stmt]:
    return program(apply, **kw).main.ingress.body.stmts


def rhs(expr: str, lhs: str = "meta.x", **kw) -> ir.Expr:
    """The typed right-hand side of `lhs = expr;`."""
    s = stmts(f"{lhs} = {expr};", **kw)[0]
    assert isinstance(s, ir.Assign)
    return s.rhs


@pytest.mark.parametrize("lit,value,type_", [
    ("8w5", 5, ir.BitsType(8)),
    ("8w0xFF", 255, ir.BitsType(8)),
    ("0b1010_1010", 0xAA, ir.BitsType(8)),
    ("0o17", 15, ir.BitsType(8)),
    ("1_0", 10, ir.BitsType(8)),
    ("300", 44, ir.BitsType(8)),  # untyped literal wraps into the l-value's width
])
def test_integer_literals(lit, value, type_):
    c = rhs(lit)
    assert isinstance(c, ir.Constant) and c.value == value and c.type == type_


def test_signed_literals_and_folding():
    c = rhs("-8s5", lhs="meta.i")
    assert c.value == -5 and c.type == ir.IntType(8)
    assert rhs("8s127 + 1", lhs="meta.i").value == -128  # two's complement wrap
    assert rhs("8w255 + 1").value == 0
    assert rhs("8w250 |+| 10").value == 255  # saturating
    assert rhs("-8s100 |-| 100", lhs="meta.i").value == -128
    assert rhs("3 * 4 + 1").value == 13


def test_untyped_literal_adapts_to_the_other_operand():
    e = rhs("meta.y + 1", lhs="meta.y")
    assert isinstance(e, ir.Binary) and e.op == "+" and e.right.type == ir.BitsType(16)
    assert isinstance(e.left, ir.Member) and isinstance(e.left.expr, ir.VarRef)
    assert e.left.expr.decl.direction == "inout"


def test_const_and_define_are_folded():
    e = rhs("meta.y + K", lhs="meta.y", decls="#define KSHIFT 2\nconst bit<16> K = 16w1 << KSHIFT;\n")
    assert isinstance(e.right, ir.Constant) and e.right.value == 4 and e.right.type == ir.BitsType(16)


def test_operators_types():
    assert rhs("meta.x == 3", lhs="meta.ok").type == ir.BoolType()
    assert rhs("meta.x < 3 && !meta.ok || meta.y != 0", lhs="meta.ok").op == "||"
    e = rhs("meta.x ++ meta.y ++ 8w0", lhs="meta.w")
    assert e.type == ir.BitsType(32) and e.op == "++"
    sh = rhs("meta.y >> meta.x", lhs="meta.y")
    assert sh.op == ">>" and sh.type == ir.BitsType(16)
    assert rhs("~meta.x & 0x0F | meta.x ^ 1").op == "|"
    assert rhs("-meta.i", lhs="meta.i").op == "-"
    assert rhs("meta.ok ? meta.x : 8w7").type == ir.BitsType(8)
    sl = rhs("hdr.h.b[11:4]")
    assert isinstance(sl, ir.Slice) and (sl.hi, sl.lo) == (11, 4) and sl.type == ir.BitsType(8)


def test_casts():
    c = rhs("(bit<8>)meta.y")
    assert isinstance(c, ir.Cast) and c.type == ir.BitsType(8) and c.expr.type == ir.BitsType(16)
    assert rhs("(int<8>)meta.x", lhs="meta.i").type == ir.IntType(8)
    assert rhs("(bool)hdr.h.flag", lhs="meta.ok").type == ir.BoolType()
    assert rhs("(bit<1>)meta.ok", lhs="hdr.h.flag").type == ir.BitsType(1)
    assert rhs("(bit<16>)8w3", lhs="meta.y").value == 3  # folded


def test_enums_and_errors():
    decls = "enum bit<8> Op { ADD = 1, MAX = 7 }\nenum Mode { FAST, SLOW }\n"
    e = rhs("(bit<8>)Op.MAX", decls=decls)  # folded, as p4c folds it: a compile-time constant (a @field_list index)
    assert isinstance(e, ir.Constant) and e.value == 7 and e.type == ir.BitsType(8)
    p = program("Mode m = Mode.SLOW; if (m == Mode.FAST) { meta.x = 1; }", decls=decls)
    assert p.types["Mode"].members == ["FAST", "SLOW"]
    cond = p.main.ingress.body.stmts[1].cond
    assert cond.op == "==" and cond.right.member == "FAST"
    e = rhs("sm.parser_error == error.PacketTooShort", lhs="meta.ok")
    assert isinstance(e.right, ir.ErrorMember) and e.right.member == "PacketTooShort"


def test_header_validity_and_stack_access():
    s = stmts("hdr.h.setInvalid(); meta.ok = hdr.vl[1].isValid(); hdr.vl[0].setValid(); meta.w = hdr.vl.size;")
    assert isinstance(s[0].call, ir.HeaderMethodCall) and s[0].call.method == "setInvalid"
    valid = s[1].rhs
    assert valid.method == "isValid" and isinstance(valid.header, ir.ArrayIndex) and valid.type == ir.BoolType()
    assert s[3].rhs.value == 3


def test_parser_select_forms_and_stacks():
    parser = """
parser P(packet_in pk, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        meta.y = pk.lookahead<bit<16>>();
        transition select(meta.y, sm.ingress_port) {
            (0x8100 &&& 0xFF00, _): vlan;
            (1 .. 9, 9w3): hh;
            default: reject;
        }
    }
    state vlan {
        pk.extract(hdr.vl.next);
        transition select(hdr.vl.last.et) { 0x8100: vlan; default: hh; }
    }
    state hh {
        pk.extract(hdr.h);
        verify(hdr.h.a != 0, error.NoMatch);
        transition accept;
    }
}
"""
    p = program(parser=parser)
    st = p.main.parser.states
    look = st["start"].body[0].rhs
    assert isinstance(look, ir.ExternMethodCall) and look.method == "lookahead" and look.type == ir.BitsType(16)
    cases = st["start"].transition.cases
    mask, dc = cases[0].keysets
    assert isinstance(mask, ir.KsMask) and (mask.value.value, mask.mask.value) == (0x8100, 0xFF00)
    assert isinstance(dc, ir.KsDefault)
    rng = cases[1].keysets[0]
    assert isinstance(rng, ir.KsRange) and (rng.lo.value, rng.hi.value) == (1, 9) and rng.lo.type == ir.BitsType(16)
    assert cases[2].next == "reject" and all(isinstance(k, ir.KsDefault) for k in cases[2].keysets)
    nxt = st["vlan"].body[0].call.args[0]
    assert isinstance(nxt, ir.Member) and nxt.member == "next" and nxt.type is p.types["v_t"]
    ver = st["hh"].body[1].call
    assert isinstance(ver, ir.ExternFunctionCall) and ver.name == "verify"


TABLES = """
    direct_counter(CounterType.packets) dc;
    @name("fwd_action") action fwd(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    action mark(bit<8> v) { meta.x = v; dc.count(); }
    @id(0x02000123) table acl {
        key = {
            hdr.h.a: ternary @name("alpha");
            hdr.h.b: range;
            meta.y: optional;
            hdr.h.isValid(): exact;
        }
        actions = { fwd; @defaultonly drop; mark; }
        const default_action = drop();
        entries = {  // p4c: `priority =` only in non-const entries, and on the first if on any
            priority = 9: (0x10 &&& 0xF0, 1 .. 100, 7, true): fwd(3);
            priority = 5: (_, _, _, false): mark(8w1);
        }
        counters = dc;
        size = 64;
    }
    @name(".global_t") table t2 {
        key = { meta.x: exact; }
        actions = { fwd; NoAction; }
    }
"""


def test_tables_keys_entries_and_names():
    p = program("acl.apply();", locals_=TABLES)
    ing = p.main.ingress
    acl = ing.tables["acl"]
    assert [(k.name, k.match_kind) for k in acl.keys] == [
        ("alpha", "ternary"), ("hdr.h.b", "range"), ("meta.y", "optional"), ("hdr.h.$valid$", "exact")]
    assert acl.annotations.get_int("id") == 0x02000123
    assert acl.default_action_const and acl.default_action.action.name == "drop"
    assert not acl.entries_const and len(acl.entries) == 2
    e0, e1 = acl.entries
    assert isinstance(e0.keys[0], ir.KsMask) and isinstance(e0.keys[1], ir.KsRange)
    assert e0.action.action.control_plane_name == "I.fwd_action" and e0.action.args[0].value == 3
    assert e0.action.args[0].type == ir.BitsType(9)
    assert e0.priority == 9 and e1.priority == 5
    assert acl.direct_counter is ing.instances["dc"] and acl.size == 64
    assert [r.annotations.has("defaultonly") for r in acl.actions] == [False, True, False]
    assert ing.tables["t2"].control_plane_name == "global_t"
    assert ing.actions["fwd"].control_plane_name == "I.fwd_action"


def test_apply_hit_miss_and_switch_on_action_run():
    body = """
        if (!t2.apply().miss) { meta.x = 2; }
        if (meta.y == 0) {
            if (acl.apply().hit) { meta.x = 1; }
        } else {  // BMv2 (p4c) refuses a table applied twice on one path
            switch (acl.apply().action_run) {
                fwd:
                mark: { meta.x = 3; }
                default: { exit; }
            }
        }
        switch (meta.x) { 1: { return; } 2: { } }
    """
    p = program(body, locals_=TABLES)
    s = p.main.ingress.body.stmts
    assert isinstance(s[0].cond, ir.Unary) and s[0].cond.expr.which == "miss"
    hit = s[1].then.stmts[0].cond
    assert isinstance(hit, ir.TableHitMiss) and hit.which == "hit" and hit.table.name == "acl"
    sw = s[1].else_.stmts[0]
    assert isinstance(sw.subject, ir.ActionRun) and sw.subject.table.name == "acl"
    assert [[getattr(label, "name", None) for label in c.labels] for c in sw.cases] == [["fwd", "mark"], [None]]
    assert isinstance(sw.cases[1].body.stmts[0], ir.Exit)
    vs = s[2]
    assert [c.labels[0].value for c in vs.cases] == [1, 2] and isinstance(vs.cases[0].body.stmts[0], ir.Return)


def test_externs_registers_counters_meters_hash_digest():
    locals_ = """
    register<bit<32>>(1024) r;
    register<int<32>>(8) lanes;
    counter(32w16, CounterType.bytes) c;
    meter(4, MeterType.packets) m;
    """
    body = """
        bit<32> v;
        r.read(v, 5);
        r.write(5, v + 1);
        int<32> acc;
        lanes.read(acc, 0);
        lanes.write(0, acc |+| hdr.h.s);
        c.count((bit<32>)meta.x);
        bit<2> color;
        m.execute_meter(0, color);
        hash(meta.y, HashAlgorithm.crc16, 16w0, { hdr.h.a, hdr.h.b }, 16w1024);
        digest<pair_t>(1, { meta.x, meta.y });
        digest(1, meta);
        clone(CloneType.I2E, 100);
        clone_preserving_field_list(CloneType.E2E, 7, 1);
        resubmit_preserving_field_list(2);
        random(meta.x, 0, 127);
        log_msg("x={}", { meta.x });
        assert(meta.ok);
        mark_to_drop(sm);
        sm.mcast_grp = 16w1;
    """
    p = program(body, locals_=locals_)
    ing = p.main.ingress
    assert [(i.name, i.extern, i.size) for i in ing.locals] == [
        ("r", "register", 1024), ("lanes", "register", 8), ("c", "counter", 16), ("m", "meter", 4)]
    assert ing.instances["c"].kind == "bytes" and ing.instances["m"].kind == "packets"
    calls = [s.call for s in ing.body.stmts if isinstance(s, ir.MethodCallStmt)]
    read = calls[0]
    assert read.method == "read" and isinstance(read.target, ir.InstanceRef) and read.target.decl is ing.instances["r"]
    assert read.args[1].type == ir.BitsType(32)
    write = calls[1]
    assert write.args[1].type == ir.BitsType(32)
    assert calls[3].args[1].op == "|+|" and calls[3].args[1].type == ir.IntType(32)
    hash_ = next(c for c in calls if getattr(c, "name", "") == "hash")
    assert hash_.type_args[0] == ir.BitsType(16) and isinstance(hash_.args[3], ir.ListExpr)
    digests = [c for c in calls if getattr(c, "name", "") == "digest"]
    assert digests[0].type_args == [p.types["pair_t"]] and isinstance(digests[0].args[1], ir.StructExpr)
    assert digests[1].type_args == [p.types["meta_t"]]
    rnd = next(c for c in calls if getattr(c, "name", "") == "random")
    assert [a.type for a in rnd.args] == [ir.BitsType(8)] * 3
    assert next(c for c in calls if getattr(c, "name", "") == "mark_to_drop").decl.params[0].direction == "inout"


def test_struct_initializers_named_args_and_locals():
    body = """
        pair_t pr = { 1, 2 };
        pr = { second = 16w9, first = 8w4 };
        mark_to_drop(standard_metadata = sm);
        meta.y = pr.second;
    """
    s = stmts(body)
    assert isinstance(s[0], ir.VarDeclStmt) and isinstance(s[0].decl.init, ir.StructExpr)
    assert list(s[0].decl.init.fields) == ["first", "second"]
    assert s[0].decl.init.fields["second"].type == ir.BitsType(16)
    assert list(s[1].rhs.fields) == ["first", "second"] and s[1].rhs.fields["first"].value == 4
    assert isinstance(s[3].rhs.expr, ir.VarRef) and s[3].rhs.expr.decl is s[0].decl


def test_action_calls_and_control_locals():
    locals_ = "bit<8> tmp = 3;\n action inc(inout bit<8> v) { v = v + 1; }\n action setx() { inc(meta.x); }"
    p = program("setx(); inc(tmp); meta.x = tmp;", locals_=locals_)
    ing = p.main.ingress
    # lowered: the control-level initializer is the apply block's first statement
    assert isinstance(ing.locals[0], ir.VarDecl) and ing.locals[0].init is None
    init = ing.body.stmts[0]
    assert isinstance(init, ir.Assign) and init.lhs.decl is ing.locals[0] and init.rhs.value == 3
    call = ing.body.stmts[1].call
    assert isinstance(call, ir.ActionCall) and call.action is ing.actions["setx"]
    inner = ing.actions["setx"].body.stmts[0].call
    assert inner.action is ing.actions["inc"] and inner.args[0].member == "x"
    assert ing.body.stmts[2].call.args[0].decl is ing.locals[0]


def test_locations_point_to_original_lines():
    p = program("meta.x = 1;\n\n    meta.y = 2;")
    s = p.main.ingress.body.stmts
    assert s[1].loc.line - s[0].loc.line == 2 and s[1].loc.col == 5 and s[0].loc.file == "t.p4"


def test_preprocessor_conditionals(tmp_path):
    (tmp_path / "defs.p4").write_text("#ifndef DEFS\n#define DEFS\n#define W 12\n#endif\n")
    src = """#include <core.p4>
#include "defs.p4"
#include "defs.p4"
#if defined(W) && W > 8
header h_t { bit<W> f; }
#else
header h_t { bit<1> f; }
#endif
#ifdef NOT_DEFINED
#error should not happen
#endif
control C(inout h_t h) { apply { h.f = 1; nosuch = 2; } }
"""
    main = tmp_path / "main.p4"
    main.write_text(src)
    from p4target.frontend import load_program
    with pytest.raises(P4Error) as info:  # no V1Switch: fails late, after everything else checked
        load_program(str(main))
    assert str(info.value).startswith(f"{main}:12:43: error: nosuch: declaration not found")
    ok = tmp_path / "ok.p4"
    ok.write_text(src.replace(" nosuch = 2;", "") + "typedef bit<W> w_t;\nconst w_t Z = 4095;\n")
    with pytest.raises(P4Error, match="no main package"):
        load_program(str(ok))
