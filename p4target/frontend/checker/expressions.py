"""Expressions typed bottom-up, constants folded as they are built.

An untyped literal (InfInt) takes the type of the other operand / the assigned l-value / the
parameter it is passed to (`coerce`).
"""
from __future__ import annotations

from typing import cast

from lark import Token, Tree

from .. import ir
from ..typing import (
    BIT32,
    BOOL,
    COMPARE,
    ERROR,
    INFINT,
    MATCH_KIND,
    STRING,
    as_underlying,
    fold_binary,
    is_numeric,
    is_serializable_as,
    same_type,
    wrap,
)
from .constants import INT_LITERAL, relocate, unquote
from .names import Checking, Names, Node, Scope


class Expressions:
    """Expression trees -> typed ir.Expr; l-values."""

    def __init__(self, n: Names, up: Checking):
        self.n, self.up = n, up

    def int_literal(self, node: Node) -> ir.Constant:
        tok = node.children[0] if isinstance(node, Tree) else node
        m = INT_LITERAL.match(str(tok))
        if m is None:  # the grammar's integer token has this form
            raise self.n.error(tok, f"{tok}: not an integer literal")
        width, sign, digits = m.group(1), m.group(2), m.group(3).replace("_", "")
        has_prefix = len(digits) > 1 and digits[0] == "0" and digits[1].isalpha()
        base = {"x": 16, "b": 2, "o": 8, "d": 10}.get(digits[1:2].lower(), 10) if has_prefix else 10
        value = int(digits[2:], base) if base != 10 or (len(digits) > 1 and digits[1] in "dD") else int(digits)
        loc = self.n.loc(tok)
        if width is None:
            return ir.Constant(INFINT, loc, value, base)
        w = int(width)
        t = ir.BitsType(w) if sign == "w" else ir.IntType(w)
        if sign == "s" and w < 1:  # bit<0> holds 0 (p4c takes 0w0)
            raise self.n.error(tok, f"{tok}: invalid width")
        if (sign == "w" and value >= (1 << w)) or (sign == "s" and value >= (1 << w)):
            raise self.n.error(tok, f"{tok}: value does not fit in {t}")
        return ir.Constant(t, loc, wrap(value, t), base)

    def tuple_element(self, node: Tree, base: ir.Expr, scope: Scope) -> ir.Expr:
        """`t[i]` of a tuple (a struct field's, or a variable's, stored as the struct of fields f0, f1, ...):
        the index must be a compile-time constant, as p4c requires."""
        elements = base.type.elements if isinstance(base.type, ir.TupleType) else [f.type for f in cast(ir.StructType, base.type).fields]
        idx = self.expr(node.children[1], scope)
        if not isinstance(idx, ir.Constant) or not 0 <= idx.value < len(elements):
            raise self.n.error(node.children[1], f"{self.n.text(node.children[1])}: a tuple index must be a constant "
                                                 f"below {len(elements)}")
        return ir.Member(elements[idx.value], self.n.loc(node), base, f"f{idx.value}")

    def expr(self, node: Tree, scope: Scope, expected: ir.Type | None = None) -> ir.Expr:
        """Type an expression tree. `expected` only guides `{...}` initializers."""
        kind = node.data
        loc = self.n.loc(node)
        if kind == "int_lit":
            return self.int_literal(node)
        if kind == "true_lit":
            return ir.BoolLiteral(BOOL, loc, True)
        if kind == "false_lit":
            return ir.BoolLiteral(BOOL, loc, False)
        if kind == "string_lit":
            return ir.StringLiteral(STRING, loc, unquote(str(node.children[0])))
        if kind == "name_ref":
            return self.name_ref(node, scope)
        if kind == "member":
            return self.member(node, scope)
        if kind == "index":
            base = self.expr(node.children[0], scope)
            if isinstance(base.type, ir.TupleType) or any(base.type is t for t in self.n.tuple_structs.values()):
                return self.tuple_element(node, base, scope)
            if not isinstance(base.type, ir.StackType):
                raise self.n.error(node, f"{self.n.text(node.children[0])} has type {base.type}; only header stacks can be indexed")
            idx = self.expr(node.children[1], scope)
            if isinstance(idx.type, ir.EnumType) and idx.type.underlying is not None:
                idx = as_underlying(idx, idx.type.underlying)
            if isinstance(idx, ir.Constant):
                if not 0 <= idx.value < base.type.size:
                    raise self.n.error(node.children[1], f"index {idx.value} out of bounds of {base.type}")
            elif not (is_numeric(idx.type) or isinstance(idx.type, ir.InfIntType)):
                raise self.n.error(node.children[1], f"stack index must be bit<W> or int<W>, not {idx.type}")
            return ir.ArrayIndex(base.type.element, loc, base, idx)
        if kind == "slice":
            return self.slice(node, scope)
        if kind == "binop":
            return self.binary(node, str(node.children[1]), node.children[0], node.children[2], scope)
        if kind == "shr_op":
            a, b = node.children[1], node.children[2]
            if not (isinstance(a, Token) and isinstance(b, Token) and a.end_pos == b.start_pos):
                raise self.n.error(b, "syntax error, unexpected '>'")
            return self.binary(node, ">>", node.children[0], node.children[3], scope)
        if kind == "unop":
            return self.unary(node, scope)
        if kind == "mux":
            return self.mux(node, scope)
        if kind == "cast":
            return self.cast(node, scope)
        if kind == "call":
            return self.up.call(node.children[0], node.children[1], scope, node)
        if kind == "lookahead_call":
            base = self.expr(node.children[0], scope)
            if not (isinstance(base.type, ir.ExternType) and base.type.name == "packet_in"):
                raise self.n.error(node, "lookahead is a method of packet_in")
            targs = [self.up.resolve_type(t, scope) for t in node.children[1].children]
            if len(targs) != 1:
                raise self.n.error(node, "lookahead takes one type argument")
            if isinstance(targs[0], (ir.HeaderUnionType, ir.VarbitType)):  # as p4c refuses them
                raise self.n.error(node.children[1], f"{targs[0]}: type argument must be a fixed-width type")
            method = base.type.decl.methods["lookahead"][0]
            return ir.ExternMethodCall(targs[0], loc, base, "lookahead", [], targs, method)
        if kind == "list_expr":
            given = [c for c in node.children if c is not None]
            types = [f.type for f in expected.fields] if isinstance(expected, ir.StructLikeType) else []
            # a nested initializer takes its field's type
            items = [self.expr(c, scope, types[i] if i < len(types) else None) for i, c in enumerate(given)]
            if isinstance(expected, ir.StructLikeType):
                return self.struct_init(node, expected, [(f.name, i) for f, i in zip(expected.fields, items)], len(items))
            return ir.ListExpr(ir.TupleType(tuple(i.type for i in items)), loc, items)
        if kind == "struct_expr":
            if not isinstance(expected, ir.StructLikeType):
                raise self.n.error(node, "unsupported: struct initializer whose type is not known from context")
            pairs = []
            for kv in node.children:
                fname = self.n.name_of(kv.children[0])
                f = expected.field(fname)  # a nested initializer takes its field's type
                pairs.append((fname, self.expr(kv.children[1], scope, f.type if f is not None else None)))
            return self.struct_init(node, expected, pairs, len(pairs))
        if kind == "error_member":
            name = self.n.name_of(node.children[0])
            if name not in self.n.program.errors:
                raise self.n.error(node, f"error.{name}: no such error")
            return ir.ErrorMember(ERROR, loc, name)
        if kind == "type_member":
            return self.type_member(node, scope)
        if kind == "dontcare":
            return ir.DontCare(ir.DontCareType(), loc)
        if kind == "ctor_call":
            raise self.n.error(node, f"unsupported: instantiation {self.n.text(node)} inside an expression")
        raise self.n.error(node, f"unsupported: expression {self.n.text(node)}")

    def struct_init(self, node: Node, t: ir.StructLikeType, pairs: list, count: int) -> ir.StructExpr:
        if count != len(t.fields):
            raise self.n.error(node, f"{t.name} has {len(t.fields)} fields, initializer has {count}")
        fields: dict[str, ir.Expr] = {}
        for fname, value in pairs:
            f = t.field(fname)
            if f is None:
                raise self.n.error(node, f"{t.name} has no field {fname}")
            if fname in fields:
                raise self.n.error(node, f"field {fname} initialized twice")
            fields[fname] = self.coerce(value, f.type, node)
        return ir.StructExpr(t, self.n.loc(node), {f.name: fields[f.name] for f in t.fields})

    def name_ref(self, node: Tree, scope: Scope) -> ir.Expr:
        tok = node.children[0].children[0] if isinstance(node.children[0], Tree) else node.children[0]
        name = str(tok)
        loc = self.n.loc(tok)
        decl = scope.lookup(name)
        if decl is None and name in self.n.program.match_kinds:  # `exact` as a value (a tuple of match kinds)
            return ir.EnumMember(MATCH_KIND, loc, name)
        if decl is None:
            raise self.n.error(tok, f"{name}: declaration not found")
        if isinstance(decl, (ir.Param, ir.VarDecl)):
            return ir.VarRef(decl.type, loc, name, decl)
        if isinstance(decl, ir.ConstDecl):
            return relocate(decl.value, loc)
        if isinstance(decl, ir.ExternInstance):
            return ir.InstanceRef(decl.type, loc, name, decl)
        kind = {ir.Action: "action", ir.Table: "table"}.get(type(decl), "declaration")
        raise self.n.error(tok, f"{name}: {kind} cannot be used as a value")

    def type_member(self, node: Tree, scope: Scope) -> ir.Expr:
        tname = self.n.name_of(node.children[0])
        member = self.n.name_of(node.children[1])
        t = scope.lookup(tname)
        if isinstance(t, ir.EnumType):
            if member not in t.members:
                raise self.n.error(node.children[1], f"{tname}.{member}: no such enum member")
            return ir.EnumMember(t, self.n.loc(node), member, t.values.get(member))
        if isinstance(t, ir.Type) and member in ("minSizeInBits", "maxSizeInBits"):
            raise self.n.error(node, f"unsupported: {tname}.{member}")
        raise self.n.error(node, f"{tname}.{member}: {tname} is not an enum")

    def member(self, node: Tree, scope: Scope) -> ir.Expr:
        base_node, name_node = node.children
        name = self.n.name_of(name_node)
        loc = self.n.loc(node)
        base = self.expr(base_node, scope)
        t = base.type
        if isinstance(base, ir.TableApply):
            if name in ("hit", "miss"):
                return ir.TableHitMiss(BOOL, loc, base.table, name)
            if name == "action_run":
                return ir.ActionRun(ir.ActionRunType(base.table.name), loc, base.table)
            raise self.n.error(name_node, f"apply result has no member {name} (hit, miss, action_run)")
        if isinstance(t, ir.StructLikeType):
            f = t.field(name)
            if f is None:
                raise self.n.error(name_node, f"{self.n.text(base_node)}: {t.name} has no field {name}")
            return ir.Member(f.type, loc, base, name)
        if isinstance(t, ir.StackType):
            if name in ("next", "last"):
                if self.n.ctx.kind != "state":
                    raise self.n.error(name_node, f"{name} can only be used in a parser")
                return ir.Member(t.element, loc, base, name)
            if name == "lastIndex":
                if self.n.ctx.kind != "state":
                    raise self.n.error(node, f"{self.n.text(node)}: 'lastIndex' for stacks can only be used in a parser")
                return ir.Member(BIT32, loc, base, name)
            if name == "size":
                return ir.Constant(BIT32, loc, t.size)
            raise self.n.error(name_node, f"header stack has no member {name}")
        raise self.n.error(name_node, f"{self.n.text(base_node)} has type {t}, which has no field {name}")

    def slice(self, node: Tree, scope: Scope) -> ir.Expr:
        base = self.expr(node.children[0], scope)
        hi, lo = (self.expr(n, scope) for n in node.children[1:])
        bt = base.type
        if not is_numeric(bt):
            raise self.n.error(node, f"{self.n.text(node.children[0])}: cannot slice a value of type {bt}")
        if not (isinstance(hi, ir.Constant) and isinstance(lo, ir.Constant)):
            raise self.n.error(node, "slice bounds must be compile-time constants")
        if not (0 <= lo.value <= hi.value < bt.width):
            raise self.n.error(node, f"slice [{hi.value}:{lo.value}] out of range for {bt}")
        t = ir.BitsType(hi.value - lo.value + 1)
        if isinstance(base, ir.Slice):  # x[a:b][c:d] is x[b+c:b+d]
            return ir.Slice(t, self.n.loc(node), base.expr, base.lo + hi.value, base.lo + lo.value)
        if isinstance(base, ir.Constant):
            return ir.Constant(t, self.n.loc(node), (wrap(base.value, ir.BitsType(bt.width)) >> lo.value) & ((1 << t.width) - 1))
        return ir.Slice(t, self.n.loc(node), base, hi.value, lo.value)

    def coerce(self, e: ir.Expr, t: ir.Type, node: Node, stmt: Node | None = None) -> ir.Expr:
        """Give an untyped literal the type `t`; check that `e` has type `t` otherwise."""
        if isinstance(e.type, ir.InfIntType) and isinstance(e, ir.Constant):
            if is_numeric(t):
                return ir.Constant(t, e.loc, wrap(e.value, t), e.base)
            if isinstance(t, ir.NewType) and is_numeric(t.underlying):  # `T x = 5;` is allowed
                return ir.Constant(t, e.loc, wrap(e.value, t.underlying), e.base)
            if isinstance(t, ir.InfIntType):
                return e
            if isinstance(t, ir.EnumType) and t.underlying is not None:
                raise self.n.error(node, f"{self.n.text(node)}: Cannot unify int to {t}")
        if isinstance(e.type, ir.InfIntType) and is_numeric(t):
            return ir.Cast(t, e.loc, e)  # an int known once blocks are inlined, or (int)x (passes/int_values.py)
        if isinstance(t, (ir.TypeVar, ir.DontCareType)) or isinstance(e, ir.DontCare):
            return e
        if is_serializable_as(e.type, t):
            return as_underlying(e, t)
        if isinstance(t, ir.StructLikeType) and isinstance(e, ir.ListExpr):
            return self.struct_init(node, t, [(f.name, i) for f, i in zip(t.fields, e.items)], len(e.items))
        if isinstance(t, ir.InfIntType) and is_numeric(e.type):
            return e
        if not same_type(e.type, t):
            where = self.n.text(stmt if stmt is not None else node)
            raise self.n.error(stmt if stmt is not None else node, f"{where}: Cannot unify {e.type} to {t}")
        return e

    def binary(self, node: Tree, op: str, lnode: Tree, rnode: Tree, scope: Scope) -> ir.Expr:
        loc = self.n.loc(node)
        left, right = self.expr(lnode, scope), self.expr(rnode, scope)
        what = self.n.text(node)
        if op in ("&&", "||"):
            for e, n in ((left, lnode), (right, rnode)):
                if not isinstance(e.type, ir.BoolType):
                    raise self.n.error(n, f"{what}: {op} needs bool operands, {self.n.text(n)} has type {e.type}")
            if isinstance(left, ir.BoolLiteral) and isinstance(right, ir.BoolLiteral):
                return ir.BoolLiteral(BOOL, loc, (left.value and right.value) if op == "&&" else (left.value or right.value))
            return ir.Binary(BOOL, loc, op, left, right)
        if op in ("<<", ">>"):
            if not (is_numeric(left.type) or isinstance(left.type, ir.InfIntType)):
                raise self.n.error(lnode, f"{what}: cannot shift a value of type {left.type}")
            if isinstance(right, ir.Constant) and right.value < 0:
                raise self.n.error(node, f"{what}: Shifts with negative amounts are not permitted")
            if isinstance(right, ir.Constant) and isinstance(right.type, ir.IntType):
                right = ir.Constant(ir.BitsType(right.type.width), right.loc, right.value)
            if not isinstance(right.type, (ir.BitsType, ir.InfIntType)):
                raise self.n.error(rnode, f"{self.n.text(rnode)}: Shift amount must be an unsigned number")
            if isinstance(left.type, ir.InfIntType) and not isinstance(right, ir.Constant):
                raise self.n.error(node, f"{what}: shift of an untyped constant by a non-constant amount; give it a width")
            if isinstance(right.type, ir.InfIntType):
                if not isinstance(right, ir.Constant):
                    raise self.n.error(rnode, f"{self.n.text(rnode)}: Shift amount must be an unsigned number")
                right = ir.Constant(ir.BitsType(max(right.value.bit_length(), 1)), right.loc, right.value)
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                return ir.Constant(left.type, loc, fold_binary(op, left.value, right.value, left.type))
            return ir.Binary(left.type, loc, op, left, right)
        if op == "++":
            lt, rt = (self.concat_operand(e, n, what) for e, n in ((left, lnode), (right, rnode)))
            joined = type(lt)(lt.width + rt.width)
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                lv = wrap(left.value, ir.BitsType(lt.width))
                rv = wrap(right.value, ir.BitsType(rt.width))
                return ir.Constant(joined, loc, wrap((lv << rt.width) | rv, joined))
            return ir.Binary(joined, loc, op, left, right)
        # the remaining operators need equal operand types; an untyped literal adapts
        if isinstance(left.type, ir.InfIntType) and not isinstance(right.type, ir.InfIntType):
            left = self.coerce_operand(left, right.type, lnode, what)
        elif isinstance(right.type, ir.InfIntType) and not isinstance(left.type, ir.InfIntType):
            right = self.coerce_operand(right, left.type, rnode, what)
        if is_serializable_as(left.type, right.type):
            left = as_underlying(left, right.type)
        elif is_serializable_as(right.type, left.type):
            right = as_underlying(right, left.type)
        if not same_type(left.type, right.type):
            raise self.n.error(node, f"{what}: Cannot unify {right.type} to {left.type}")
        t = left.type
        if op in ("==", "!="):
            if isinstance(t, (ir.ExternType, ir.StringType, ir.VoidType)):
                raise self.n.error(node, f"{what}: cannot compare values of type {t}")
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                return ir.BoolLiteral(BOOL, loc, COMPARE[op](left.value, right.value))
            if isinstance(left, ir.BoolLiteral) and isinstance(right, ir.BoolLiteral):
                return ir.BoolLiteral(BOOL, loc, COMPARE[op](left.value, right.value))
            return ir.Binary(BOOL, loc, op, left, right)
        if not (is_numeric(t) or isinstance(t, ir.InfIntType)):
            raise self.n.error(node, f"{what}: operator {op} needs bit<W> or int<W> operands, not {t}")
        if op in ("<", "<=", ">", ">="):
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
                return ir.BoolLiteral(BOOL, loc, COMPARE[op](left.value, right.value))
            return ir.Binary(BOOL, loc, op, left, right)
        if op in ("/", "%"):  # run-time operands: see passes/strength.py and passes/bmv2_limits.py
            constants = isinstance(left, ir.Constant) and isinstance(right, ir.Constant)
            if isinstance(t, ir.IntType) and not constants:
                raise self.n.error(node, f"{what}: Cannot operate on signed values")
            if isinstance(right, ir.Constant) and right.value == 0:
                raise self.n.error(node, f"{what}: Division by zero")
            if isinstance(left, ir.Constant) and isinstance(right, ir.Constant) and (left.value < 0 or right.value < 0):
                raise self.n.error(node, f"{what}: Division is not defined for negative numbers")
        if isinstance(t, ir.InfIntType) and op in ("|+|", "|-|"):
            raise self.n.error(node, f"{what}: saturating arithmetic needs a width")
        if isinstance(left, ir.Constant) and isinstance(right, ir.Constant):
            return ir.Constant(t, loc, fold_binary(op, left.value, right.value, t))
        return ir.Binary(t, loc, op, left, right)

    def concat_operand(self, e: ir.Expr, node: Node, what: str) -> ir.BitsType | ir.IntType:
        """The type of an operand of `++`, which must have a width."""
        if not is_numeric(e.type):
            raise self.n.error(node, f"{what}: concatenation needs bit<W>/int<W> operands, {self.n.text(node)} has type {e.type}")
        return e.type

    def coerce_operand(self, e: ir.Expr, t: ir.Type, node: Node, what: str) -> ir.Expr:
        if is_numeric(t) and isinstance(e, ir.Constant):
            return ir.Constant(t, e.loc, wrap(e.value, t), e.base)
        if is_numeric(t):
            return ir.Cast(t, e.loc, e)  # as in coerce
        raise self.n.error(node, f"{what}: Cannot unify int to {t}")

    def unary(self, node: Tree, scope: Scope) -> ir.Expr:
        op = str(node.children[0])
        e = self.expr(node.children[1], scope)
        loc = self.n.loc(node)
        what = self.n.text(node)
        if op == "!":
            if not isinstance(e.type, ir.BoolType):
                raise self.n.error(node, f"{what}: ! needs a bool operand, not {e.type}")
            return ir.BoolLiteral(BOOL, loc, not e.value) if isinstance(e, ir.BoolLiteral) else ir.Unary(BOOL, loc, "!", e)
        if not (is_numeric(e.type) or isinstance(e.type, ir.InfIntType)):
            raise self.n.error(node, f"{what}: {op} needs a bit<W> or int<W> operand, not {e.type}")
        if op == "+":
            return e
        if op == "~" and isinstance(e.type, ir.InfIntType):
            raise self.n.error(node, f"{what}: ~ of an untyped constant; give it a width")
        if isinstance(e, ir.Constant):
            return ir.Constant(e.type, loc, wrap(-e.value if op == "-" else ~e.value, e.type))
        return ir.Unary(e.type, loc, op, e)

    def mux(self, node: Tree, scope: Scope) -> ir.Expr:
        cnode, anode, bnode = node.children
        cond = self.expr(cnode, scope)
        if not isinstance(cond.type, ir.BoolType):
            raise self.n.error(cnode, f"{self.n.text(cnode)}: condition of ?: must be bool, not {cond.type}")
        a, b = self.expr(anode, scope), self.expr(bnode, scope)
        if isinstance(a.type, ir.InfIntType) and not isinstance(b.type, ir.InfIntType):
            a = self.coerce(a, b.type, anode)
        elif isinstance(b.type, ir.InfIntType) and not isinstance(a.type, ir.InfIntType):
            b = self.coerce(b, a.type, bnode)
        elif isinstance(a.type, ir.InfIntType) and not isinstance(cond, ir.BoolLiteral):
            raise self.n.error(node, f"{self.n.text(node)}: ?: with untyped constants in both branches; give them a width")
        if not same_type(a.type, b.type):
            raise self.n.error(node, f"{self.n.text(node)}: Cannot unify {b.type} to {a.type}")
        if isinstance(cond, ir.BoolLiteral):
            return a if cond.value else b
        return ir.Mux(a.type, self.n.loc(node), cond, a, b)

    def runtime_to_int(self, node: Tree, loc: ir.Loc, e: ir.Expr) -> ir.Expr:
        """`(int)x` of a run-time x: the spec has no run-time `int`, yet p4c 1.2.5.16 accepts it and its BMv2
        back end writes `x & 0` (a mask of int's zero bits), so BMv2 computes 0. A drop-in computes the same 0
        (passes/int_values.py), and says so, since the program's author meant something else. The cast stays in
        the IR until then: p4c's parser unroller takes `(int)x` as x's value (passes/unroll.py)."""
        self.n.program.warnings.append(
            f"{loc}: warning: {self.n.text(node)}: a run-time value cast to int; p4c's BMv2 back end computes "
            "0 for it (p4c writes `x & 0`), and so does this target")
        return ir.Cast(INFINT, loc, e)

    def cast(self, node: Tree, scope: Scope) -> ir.Expr:
        t = self.up.resolve_type(node.children[0], scope)
        e = self.expr(node.children[1], scope, t)  # `(S){ f = 1 }`: the initializer takes the cast's type
        loc = self.n.loc(node)
        src = e.type
        ok = False
        if isinstance(src, ir.NewType) and not isinstance(t, ir.NewType):
            ok = same_type(src.underlying, t)  # only back to what it is made of
        elif isinstance(t, (ir.BitsType, ir.IntType)):
            ok = (is_numeric(src) or isinstance(src, ir.InfIntType)
                  or (isinstance(src, ir.BoolType) and isinstance(t, ir.BitsType) and t.width == 1)
                  or (isinstance(src, ir.EnumType) and src.underlying is not None))
            if is_numeric(src) and type(src) is not type(t) and src.width != t.width:
                ok = False  # p4c: change sign and width in separate casts
        elif isinstance(t, ir.BoolType):
            ok = isinstance(src, ir.BoolType) or (isinstance(src, ir.BitsType) and src.width == 1) or isinstance(src, ir.InfIntType)
        elif isinstance(t, ir.EnumType) and t.underlying is not None:
            ok = same_type(src, t.underlying) or isinstance(src, ir.InfIntType) or same_type(src, t)
        elif isinstance(t, ir.NewType):
            ok = same_type(src, t.underlying) or same_type(src, t) or (
                isinstance(src, ir.InfIntType) and is_numeric(t.underlying))
        elif isinstance(t, ir.InfIntType) and is_numeric(src):  # a constant's value (int<W>'s signed), else 0
            return ir.Constant(INFINT, loc, e.value) if isinstance(e, ir.Constant) else self.runtime_to_int(node, loc, e)
        else:
            ok = same_type(src, t)
        if not ok:
            raise self.n.error(node, f"{self.n.text(node)}: cannot cast {src} to {t}")
        if isinstance(e, ir.Constant) and isinstance(t, (ir.BitsType, ir.IntType)):
            return ir.Constant(t, loc, wrap(e.value, t), e.base)
        if isinstance(e, ir.Constant) and isinstance(t, ir.NewType) and is_numeric(t.underlying):
            return ir.Constant(t, loc, wrap(e.value, t.underlying), e.base)
        if isinstance(e, ir.Constant) and isinstance(t, ir.BoolType):
            if e.value not in (0, 1):
                raise self.n.error(node, f"{self.n.text(node)}: only 0 and 1 can be cast to bool")
            return ir.BoolLiteral(BOOL, loc, bool(e.value))
        if isinstance(e, ir.BoolLiteral) and isinstance(t, ir.BitsType):
            return ir.Constant(t, loc, int(e.value))
        if isinstance(e, ir.EnumMember) and e.value is not None and isinstance(t, (ir.BitsType, ir.IntType)):
            return ir.Constant(t, loc, wrap(e.value, t))  # a serializable enum's member is a constant
        if same_type(src, t):
            return e
        return ir.Cast(t, loc, e)

    def lvalue(self, node: Tree, scope: Scope) -> ir.Expr:
        e = self.expr(node, scope)
        self.check_writable(e, node)
        return e

    def check_writable(self, e: ir.Expr, node: Node) -> None:
        root = e
        while isinstance(root, (ir.Member, ir.ArrayIndex, ir.Slice)):
            root = root.expr
        if isinstance(root, ir.DontCare):
            return
        if not isinstance(root, ir.VarRef):
            raise self.n.error(node, f"{self.n.text(node)} cannot be assigned to (not an l-value)")
        if isinstance(root.decl, ir.Param) and root.decl.direction in ("in", ""):
            what = "an 'in' parameter" if root.decl.direction == "in" else "a directionless parameter"
            raise self.n.error(node, f"{self.n.text(node)}: cannot assign to {what} ({root.decl.name})")
        if isinstance(e, ir.Member) and e.member in ("last", "lastIndex"):
            raise self.n.error(node, f"{self.n.text(node)} is read-only")
