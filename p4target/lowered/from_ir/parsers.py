"""The parser as parse states of parser ops and transitions; the deparser as an emit order."""
from __future__ import annotations

from p4target.frontend import ir
from p4target.frontend.passes.walk import walk
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import all_ones, fail, flat_stmts, scalar_type, type_width
from p4target.lowered.from_ir.statements import Statements
from p4target.lowered.from_ir.storage import (
    HeaderStore,
    Scalar,
    StackStore,
    Storage,
    Store,
    StructStore,
    header_leaf_fields,
    headers_of,
)
from p4target.lowered.from_ir.values import Values


def _keyset_masks(ks: ir.KeySet, w: int) -> list[tuple[int, int]]:
    """A select keyset as (value, mask) pairs; a range as the prefixes covering it, as p4c expands it."""
    if isinstance(ks, ir.KsDefault):
        return [(0, 0)]
    if isinstance(ks, ir.KsValue):
        return [(ir.constant_value(ks.value) & all_ones(w), all_ones(w))]
    if isinstance(ks, ir.KsMask):
        km = ir.constant_value(ks.mask) & all_ones(w)
        return [(ir.constant_value(ks.value) & km, km)]
    assert isinstance(ks, ir.KsRange)
    lo, hi = ir.constant_value(ks.lo) & all_ones(w), ir.constant_value(ks.hi) & all_ones(w)
    out = []
    while lo <= hi:
        size = lo & -lo if lo else 1 << w
        while size > hi - lo + 1:
            size >>= 1
        out.append((lo, all_ones(w) & ~(size - 1)))
        lo += size
    return out


class Parsers:
    """Parser states and the deparser."""

    def __init__(self, storage: Storage, values: Values, statements: Statements):
        self.s, self.v, self.st = storage, values, statements

    def parser(self, p: ir.Parser) -> m.Parser:
        states: list[m.ParseState] = []
        names = {name: name for name in p.states}
        reject = None
        for name, s in p.states.items():
            ops: list[m.ParserOp] = []
            for stmt in s.body:
                self.parser_stmt(stmt, ops)
            key, transitions = self.transition(s.transition, ops)
            states.append(m.ParseState(names[name], self.s.next_id("state"), ops, key, transitions))
            if any(t.next_state == "reject" for t in transitions):
                reject = True
        if reject:
            states.append(m.ParseState("reject", self.s.next_id("state"), [
                m.ParserOp("verify", [m.BoolConst(False), m.Const(self.s.errors.get("NoError", 0))])], [],
                [m.Transition("default", None, None, None)]))
        return m.Parser("parser", 0, "start", states)

    def as_parser_op(self, prim: m.Primitive) -> m.ParserOp:
        if prim.op == "assign":
            return m.ParserOp("set", prim.parameters)
        return m.ParserOp("primitive", [m.Named("primitive", prim.op)] + prim.parameters)

    def parser_stmt(self, s: ir.Stmt, ops: list[m.ParserOp]) -> None:
        if isinstance(s, ir.Block):
            for x in s.stmts:
                self.parser_stmt(x, ops)
            return
        if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternMethodCall) and \
                s.call.target is not None and getattr(s.call.target.type, "name", "") == "packet_in":
            c = s.call
            if c.method == "extract":
                target = self.extract_target(c.args[0])
                if len(c.args) == 2:
                    ops.append(m.ParserOp("extract_VL", [target, self.v.data(c.args[1])]))
                else:
                    ops.append(m.ParserOp("extract", [target]))
            elif c.method == "advance":
                ops.append(m.ParserOp("advance", [self.v.data(c.args[0])]))
            elif c.method == "lookahead":  # only its length check matters
                width = ir.width_of(c.type)
                if width:  # into a temporary of its width: BMv2 takes a lookahead only as a `set`'s source
                    t = self.s.tmp(ir.BitsType(width), c.loc)
                    ops.append(m.ParserOp("set", [t.ref, m.Lookahead(0, width)]))
            else:
                raise fail(f"packet.{c.method}() in a parser", c.loc)
            return
        if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternFunctionCall) and s.call.name == "verify":
            a = s.call.args
            ops.append(m.ParserOp("verify", [self.v.cond(a[0]), self.v.data(a[1])]))
            return
        if isinstance(s, ir.Assign) and isinstance(s.rhs, ir.ExternMethodCall) and s.rhs.method == "lookahead":
            assert s.lhs is not None
            self.lookahead_into(self.v.store_of(s.lhs), ops, 0, s.loc)
            return
        if isinstance(s, (ir.If, ir.Switch)):
            raise fail("an if or switch statement inside a parser state", s.loc)
        self.hoist_lookaheads(s, ops)
        prims: list[m.Primitive] = []
        ends: list[int] = []
        self.v.params, self.v.bound = {}, None
        self.st.prim(s, prims, ends)
        ops += [self.as_parser_op(x) for x in prims]

    def hoist_lookaheads(self, code: object, ops: list[m.ParserOp]) -> None:
        """Each `packet.lookahead<T>()` inside an expression (`lookahead<bit<112>>()[111:96]`) into a
        temporary first, as p4c does: BMv2 takes a lookahead only as a `set`'s source or a select key."""
        for n in walk(code):
            if (isinstance(n, ir.ExternMethodCall) and n.method == "lookahead" and scalar_type(n.type)
                    and id(n) not in self.v.lookaheads):
                t = self.s.tmp(n.type, n.loc)
                self.lookahead_into(t, ops, 0, n.loc)
                self.v.lookaheads[id(n)] = t

    def lookahead_into(self, dst: Store, ops: list[m.ParserOp], offset: int, loc: ir.Loc) -> int:
        """Set `dst` from the bits `offset` past the cursor (a header comes out valid); the bits it took."""
        if isinstance(dst, Scalar):
            width = type_width(dst.type)
            ops.append(m.ParserOp("set", [dst.ref, m.Lookahead(offset, width)]))
            return width
        if isinstance(dst, HeaderStore):
            ops.append(self.as_parser_op(m.Primitive("add_header", [dst.ref])))
            used = 0
            for f in header_leaf_fields(dst.type):
                field = self.v._field_of(dst, f.name, f.type)
                used += self.lookahead_into(field, ops, offset + used, loc)
            return used
        if isinstance(dst, StructStore):
            parts: list[Store] = list(dst.fields.values())
        elif isinstance(dst, StackStore) and isinstance(dst.type.element, ir.HeaderType):
            parts = list(dst.elements)  # each element in turn, as p4c sets them (issue2465-bmv2.p4)
        else:
            raise fail("packet.lookahead() into a header union", loc)
        used = 0
        for sub in parts:
            used += self.lookahead_into(sub, ops, offset + used, loc)
        return used

    def extract_target(self, e: ir.Expr) -> m.Value:
        if isinstance(e, ir.Member) and e.member == "next" and e.expr is not None:
            base = self.v.store_of(e.expr)
            assert isinstance(base, StackStore)
            return m.StackRef(base.name)
        if isinstance(e, ir.Member) and isinstance(e.expr, ir.Member) and e.expr.member == "next":
            assert e.expr.expr is not None
            base = self.v.store_of(e.expr.expr)
            assert isinstance(base, StackStore)
            return m.UnionStackField(base.name, e.member, "")
        s = self.v.store_of(e)
        if isinstance(s, HeaderStore) and not isinstance(s.ref, m.Expr):
            return s.ref
        if isinstance(s, HeaderStore):  # simple_switch cannot load p4c's JSON for one (passes/unroll.py)
            raise fail("extract into a header stack at a run-time index, which BMv2 lacks (p4c unrolls such a loop "
                       "into constant indexes under --loopsUnroll: give @command_line(\"--loopsUnroll\") in the "
                       "source, or extract into the stack's .next)", e.loc)
        raise fail("extract into something that is not a header", e.loc)

    def transition(self, tr: ir.Transition, ops: list[m.ParserOp]) -> tuple[list[m.Value], list[m.Transition]]:
        def target(name: str) -> str | None:
            return None if name == "accept" else name

        if isinstance(tr, ir.DirectTransition):
            return [], [m.Transition("default", None, None, target(tr.next))]
        assert isinstance(tr, ir.SelectTransition)
        keys: list[m.Value] = []
        widths: list[int] = []
        for k in tr.keys:
            w = type_width(k.type)
            if isinstance(k, ir.ExternMethodCall) and k.method == "lookahead":
                keys.append(m.Lookahead(0, w))
            else:
                self.hoist_lookaheads(k, ops)
                v = self.v.data(k)
                if not isinstance(v, m.Field):
                    t = self.s.tmp(ir.BitsType(w), tr.loc)
                    ops.append(m.ParserOp("set", [t.ref, v]))
                    v = t.ref
                keys.append(v)
            widths.append(w)
        transitions = []
        total = sum((w + 7) // 8 * 8 for w in widths)
        for case in tr.cases:
            if isinstance(case.keysets[0], ir.KsValueSet):
                vset = case.keysets[0].value_set.control_plane_name
                transitions.append(m.Transition("parse_vset", None, None, target(case.next), vset))
                continue
            combos = [(0, 0)]  # (value, mask) of the keys so far; a range key multiplies them
            for ks, w in zip(case.keysets, widths):
                padded = (w + 7) // 8 * 8
                combos = [((v << padded) | kv, (mk << padded) | km) for v, mk in combos for kv, km in _keyset_masks(ks, w)]
            if all(mk == 0 for _, mk in combos):
                transitions.append(m.Transition("default", None, None, target(case.next)))
                break
            for value, mask in combos:
                full = mask == all_ones(total)
                transitions.append(m.Transition("hexstr", value, None if full else mask, target(case.next)))
        return keys, transitions

    def deparser(self, c: ir.Control) -> m.Deparser:
        order: list[str] = []
        for s in flat_stmts(c.body.stmts):
            if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternMethodCall) and s.call.method == "emit":
                for h in headers_of(self.v.store_of(s.call.args[0])):
                    assert h.name is not None
                    order.append(h.name)
                continue
            raise fail("only packet.emit() calls are lowered in a deparser", s.loc)
        return m.Deparser("deparser", 0, order)
