"""A control's body as a graph of tables, conditionals and synthesized action tables; checksum controls."""
from __future__ import annotations

import copy
import functools

from p4target.errors import P4Error
from p4target.extern_registry import for_call
from p4target.frontend import ir
from p4target.lowered import model as m
from p4target.lowered.from_ir.common import all_ones, fail, flat_stmts, hash_algorithm, table_actions
from p4target.lowered.from_ir.externs import Externs
from p4target.lowered.from_ir.statements import Statements
from p4target.lowered.from_ir.storage import Scalar, Storage
from p4target.lowered.from_ir.values import Values


def _match_value(kind: str, ks: ir.KeySet, w: int) -> m.MatchValue:
    full = all_ones(w)
    if isinstance(ks, ir.KsDefault):
        return {"exact": m.MatchValue(kind, key=0), "lpm": m.MatchValue(kind, key=0, prefix_length=0),
                "ternary": m.MatchValue(kind, key=0, mask=0), "optional": m.MatchValue(kind, key=0, mask=0),
                "range": m.MatchValue(kind, start=0, end=full)}.get(kind, m.MatchValue(kind, key=0))
    if isinstance(ks, ir.KsValue):
        v = ir.constant_value(ks.value) & full
        if kind == "lpm":
            return m.MatchValue(kind, key=v, prefix_length=w)
        if kind in ("ternary", "optional"):
            return m.MatchValue(kind, key=v, mask=full)
        if kind == "range":
            return m.MatchValue(kind, start=v, end=v)
        return m.MatchValue(kind, key=v)
    if isinstance(ks, ir.KsMask):
        mask = ir.constant_value(ks.mask) & full
        v = ir.constant_value(ks.value) & mask
        if kind == "lpm":
            return m.MatchValue(kind, key=v, prefix_length=bin(mask).count("1"))
        return m.MatchValue(kind, key=v, mask=mask)
    if isinstance(ks, ir.KsRange):
        return m.MatchValue(kind, start=ir.constant_value(ks.lo) & full, end=ir.constant_value(ks.hi) & full)
    raise P4Error(f"keyset {type(ks).__name__}")


def _simple(s: ir.Stmt) -> bool:
    """A statement with no table application or return in it: it can be primitives of one action."""
    if isinstance(s, ir.Return):
        return False
    if isinstance(s, ir.MethodCallStmt):
        return not isinstance(s.call, (ir.TableApply, ir.TableHitMiss))
    if isinstance(s, ir.Assign):
        return not _has_table(s.rhs)
    if isinstance(s, ir.VarDeclStmt):
        return s.decl is None or not _has_table(s.decl.init)
    if isinstance(s, ir.Block):
        return all(_simple(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return not _has_table(s.cond) and all(_simple(x) for x in (s.then, s.else_) if x is not None)
    if isinstance(s, ir.Switch):
        return not isinstance(s.subject, ir.ActionRun) and all(
            case.body is None or _simple(case.body) for case in s.cases)
    return True


def _has_table(e: ir.Expr | None) -> bool:
    if e is None:
        return False
    if isinstance(e, (ir.TableHitMiss, ir.ActionRun, ir.TableApply)):
        return True
    return any(_has_table(getattr(e, name, None)) for name in ("left", "right", "expr", "cond", "then", "else_")
               if isinstance(getattr(e, name, None), ir.Expr))


def _is_hit_miss(e: ir.Expr) -> bool:
    return isinstance(e, ir.TableHitMiss) or (isinstance(e, ir.Unary) and e.op == "!" and e.expr is not None
                                              and _is_hit_miss(e.expr))


def _hit_miss(e: ir.Expr) -> tuple[ir.Table, bool] | None:
    """(table, whether `e` is true on a hit) for `t.apply().hit`, `.miss` and their negations."""
    if isinstance(e, ir.TableHitMiss):
        assert e.table is not None
        return e.table, e.which == "hit"
    if isinstance(e, ir.Unary) and e.op == "!" and e.expr is not None:
        inner = _hit_miss(e.expr)
        return (inner[0], not inner[1]) if inner else None
    if _has_table(e):
        raise fail("a table application inside a larger condition", e.loc)
    return None


def _walk_calls(stmts: list[ir.Stmt]) -> list[ir.Expr]:
    out: list[ir.Expr] = []
    for s in stmts:
        if isinstance(s, ir.Block):
            out += _walk_calls(s.stmts)
        elif isinstance(s, ir.MethodCallStmt) and s.call is not None:
            out.append(s.call)
        elif isinstance(s, ir.If):
            out += _walk_calls([x for x in (s.then, s.else_) if x is not None])
    return out


def _switch_as_ifs(s: ir.Switch, subject: ir.VarDecl) -> list[ir.Stmt]:
    """A switch on a value that applies tables, as BMv2 runs it (conditionals): the subject into
    `subject` once, then an `if` per case with a body, testing its labels and those falling through
    to it; the case with `default` (P4 puts it last) is the final `else`."""
    loc = s.loc

    def ref() -> ir.Expr:
        return ir.VarRef(subject.type, loc, subject.name, subject)

    branches: list[tuple[list, ir.Block]] = []
    labels: list = []
    for case in s.cases:
        labels += case.labels
        if case.body is not None:
            branches.append((labels, case.body))
            labels = []
    chain: ir.Stmt | None = None
    for labels, body in reversed(branches):
        if any(label is None for label in labels):
            chain = body
            continue
        tests = [ir.Binary(ir.BoolType(), loc, "==", ref(), label) for label in labels]
        cond = functools.reduce(lambda a, b: ir.Binary(ir.BoolType(), loc, "||", a, b), tests)
        chain = ir.If(loc, cond, body, chain)
    return [ir.Assign(loc, ref(), s.subject)] + ([chain] if chain is not None else [])


class Controls:
    """Pipelines, tables and what runs between them."""

    pl: m.Pipeline
    applied: dict[int, str]  # id of a table applied already -> its node

    def __init__(self, storage: Storage, values: Values, statements: Statements, externs: Externs):
        self.s, self.v, self.st, self.x = storage, values, statements, externs

    def control(self, name: str, c: ir.Control) -> m.Pipeline:
        self.pl = m.Pipeline(name, len(self.s.p.pipelines), None, [], [], [])
        self.applied = {}
        init: list[m.Primitive] = []
        for d in c.locals:
            if isinstance(d, ir.VarDecl):
                self.st.reset(init, self.s.storage(d, d.loc))
        self.pl.init_table = self.block(c.body.stmts, None)
        if init:
            self.pl.init_table = self.act_table(init, self.pl.init_table, c.loc)
        return self.pl

    def block(self, stmts: list[ir.Stmt], nxt: str | None) -> str | None:
        """The node running `stmts` then going to `nxt`."""
        node = nxt
        pending: list[ir.Stmt] = []
        for s in reversed(stmts):
            if isinstance(s, ir.Return):
                node, pending = None, []
                continue
            if _simple(s):
                pending.insert(0, s)
                continue
            if pending:
                node = self.simple_node(pending, node)
                pending = []
            node = self.complex_node(s, node)
        if pending:
            node = self.simple_node(pending, node)
        return node

    def simple_node(self, stmts: list[ir.Stmt], nxt: str | None) -> str | None:
        prims: list[m.Primitive] = []
        ends: list[int] = []
        self.v.params, self.v.bound = {}, None
        self.st.prims(stmts, prims, ends)
        if ends:
            raise fail("return inside a statement lowered as an action", stmts[0].loc)
        if not prims:
            return nxt
        return self.act_table(prims, nxt, stmts[0].loc)

    def act_table(self, prims: list[m.Primitive], nxt: str | None, loc: ir.Loc) -> str:
        action = self.st.synthesized_action(f"act{loc.line or ''}", prims)
        name = self.s.unique(f"tbl_{action.name}")
        self.pl.tables.append(m.Table(
            name, self.s.next_id("table"), "exact", "simple", 1024, False, False, [], [action.id], [action.name],
            {action.name: nxt}, nxt, m.DefaultEntry(action.id, True, [], True), []))
        return name

    def complex_node(self, s: ir.Stmt, nxt: str | None) -> str | None:
        if isinstance(s, ir.Block):
            return self.block(s.stmts, nxt)
        hoisted = self.hoist_tables(s)
        if hoisted is not None:
            return self.block(hoisted, nxt)
        if isinstance(s, ir.MethodCallStmt):
            c = s.call
            if isinstance(c, ir.TableApply):
                assert c.table is not None
                return self.table(c.table, {}, nxt)
            if isinstance(c, ir.TableHitMiss):
                assert c.table is not None
                return self.table(c.table, {}, nxt)
        if isinstance(s, ir.If):
            assert s.cond is not None
            then = self.block([s.then], nxt) if s.then is not None else nxt
            else_ = self.block([s.else_], nxt) if s.else_ is not None else nxt
            hitmiss = _hit_miss(s.cond)
            if hitmiss is not None:
                table, hit_if_true = hitmiss
                hit, miss = (then, else_) if hit_if_true else (else_, then)
                return self.table(table, {"__HIT__": hit, "__MISS__": miss}, nxt)
            name = self.s.unique(f"node_{self.s.next_id('cond')}")
            self.pl.conditionals.append(m.Conditional(name, len(self.pl.conditionals) + 1000 * self.pl.id,
                                                      self.v.cond(s.cond), then, else_))
            return name
        if isinstance(s, ir.Switch) and isinstance(s.subject, ir.ActionRun):
            applied = s.subject.table
            assert applied is not None
            targets: dict[str, str | None] = {}
            pending: list[str] = []
            default: str | None = nxt  # where actions without a case go (no default case: on)
            for case in s.cases:
                labels = [lab.control_plane_name if isinstance(lab, ir.Action) else None for lab in case.labels]
                if case.body is None:
                    pending += [x for x in labels if x is not None]
                    continue
                node = self.block(case.body.stmts, nxt)
                for lab in pending + labels:
                    if lab is None:
                        default = node
                    else:
                        targets[lab] = node
                pending = []
            if applied.implementation is not None:  # as p4c: a miss there runs no action, and no case either
                targets = {a.control_plane_name: targets.get(a.control_plane_name, default)
                           for a, _ in table_actions(self.s.ir, applied)}
                return self.table(applied, targets, nxt)
            return self.table(applied, targets, default)
        if isinstance(s, ir.Switch):
            subject = ir.VarDecl(f"switch{self.s.next_id('cond')}", s.subject.type)
            return self.block(_switch_as_ifs(s, subject), nxt)
        raise fail(f"{type(s).__name__} between tables is not lowered", s.loc)

    def hoist_tables(self, s: ir.Stmt) -> list[ir.Stmt] | None:
        """`s` with the tables its expressions apply moved into statements of their own (None when it has
        none there): `x = a || t.apply().hit` becomes `if (a) tmp = true; else if (t.apply().hit) tmp = true;
        else tmp = false; x = tmp`, keeping P4's short-circuit evaluation."""
        if isinstance(s, ir.If) and s.cond is not None and _has_table(s.cond) and not _is_hit_miss(s.cond):
            pre, cond = self.hoist(s.cond)
            return pre + [ir.If(s.loc, cond=cond, then=s.then or ir.Block(s.loc), else_=s.else_ or ir.Block(s.loc))]
        if isinstance(s, ir.Assign) and s.lhs is not None and s.rhs is not None and _has_table(s.rhs):
            pre, rhs = self.hoist(s.rhs)
            return pre + [ir.Assign(s.loc, lhs=s.lhs, rhs=rhs)]
        if isinstance(s, ir.VarDeclStmt) and s.decl is not None and _has_table(s.decl.init):
            assert s.decl.init is not None
            pre, init = self.hoist(s.decl.init)
            return pre + [ir.Assign(s.loc, ir.VarRef(s.decl.type, s.loc, s.decl.name, s.decl), init)]
        return None

    def hoist(self, e: ir.Expr) -> tuple[list[ir.Stmt], ir.Expr]:
        """(statements, expression) computing `e` where the expression applies no table."""
        if not _has_table(e):
            return [], e
        loc = e.loc
        tmp = ir.VarDecl(f"hoisted{self.s.next_id('cond')}", e.type)
        ref = ir.VarRef(e.type, loc, tmp.name, tmp)

        def put(value: ir.Expr) -> ir.Stmt:
            return ir.Assign(loc, ref, value)

        def true(flag: bool) -> ir.Expr:
            return ir.BoolLiteral(ir.BoolType(), loc, flag)

        if isinstance(e, ir.TableHitMiss):
            return [ir.If(loc, e, put(true(True)), put(true(False)))], ref
        if isinstance(e, ir.Binary) and e.op in ("&&", "||"):
            assert e.left is not None and e.right is not None
            pre, left = self.hoist(e.left)
            rest, right = self.hoist(e.right)
            evaluate = ir.Block(loc, rest + [put(right)])
            branch = ir.If(loc, left, evaluate, put(true(False))) if e.op == "&&" else \
                ir.If(loc, left, put(true(True)), evaluate)
            return pre + [branch], ref
        if isinstance(e, ir.Mux):
            assert e.cond is not None and e.then is not None and e.else_ is not None
            pre, cond = self.hoist(e.cond)
            then_pre, then = self.hoist(e.then)
            else_pre, else_ = self.hoist(e.else_)
            return pre + [ir.If(loc, cond, ir.Block(loc, then_pre + [put(then)]),
                                ir.Block(loc, else_pre + [put(else_)]))], ref
        pre_all: list[ir.Stmt] = []
        changes = {}
        for name in ("left", "right", "expr"):  # other operators evaluate every operand, left to right
            sub = getattr(e, name, None)
            if isinstance(sub, ir.Expr):
                pre, changes[name] = self.hoist(sub)
                pre_all += pre
        rebuilt = copy.copy(e)
        for name, sub in changes.items():
            setattr(rebuilt, name, sub)
        return pre_all, rebuilt

    def table(self, t: ir.Table, targets: dict[str, str | None], nxt: str | None) -> str:
        """Table `t`'s node: `targets` maps actions (or __HIT__/__MISS__) to next nodes, others go to `nxt`."""
        if id(t) in self.applied:
            return self.reapplied(t, targets, nxt)
        pre: list[m.Primitive] = []
        keys: list[m.KeyElement] = []
        selector_inputs: list[m.Value] = []
        for k in t.keys:
            if k.match_kind == "selector":
                selector_inputs += self.v.calc_inputs(k.expr, k.loc)
                continue
            keys.append(self.key(k, pre))
        refs = table_actions(self.s.ir, t)
        actions = [self.st.table_action(a) for a, _ in refs]
        if "__HIT__" in targets:
            next_tables = dict(targets)
        else:
            next_tables = {a.name: targets.get(a.name, nxt) for a in actions}
        default_entry = None
        if t.default_action is not None:
            da = self.st.table_action(t.default_action.action)
            data = [ir.constant_value(x) & all_ones(w) for x, (_, w) in
                    zip(t.default_action.args[len(t.default_action.args) - len(da.runtime_data):], da.runtime_data)]
            default_entry = m.DefaultEntry(da.id, t.default_action_const, data, t.default_action_const)
        else:
            noaction = next((a for a in actions if a.name == "NoAction"), None)
            if noaction is not None:
                default_entry = m.DefaultEntry(noaction.id, False, [], False)
        entries = [self.const_entry(t, e, keys) for e in t.entries]
        kinds = {k.match_type for k in keys}
        match_type = "range" if "range" in kinds else "ternary" if kinds & {"ternary", "optional"} else (
            "lpm" if "lpm" in kinds else "exact")
        name = t.control_plane_name
        profile = None
        kind = "simple"
        if t.implementation is not None:
            inst = t.implementation
            profile = inst.control_plane_name
            selector = None
            if inst.extern == "action_selector":
                algo = hash_algorithm(inst.args[0])
                selector = m.Selector(algo, selector_inputs)
                kind = "indirect_ws"
            else:
                kind = "indirect"
            if all(ap.name != profile for ap in self.pl.action_profiles):
                self.pl.action_profiles.append(m.ActionProfile(
                    profile, len(self.pl.action_profiles), inst.size or 0, selector,
                    (inst.annotations.get_int("max_group_size") or 0) if selector else 0))
        if t.direct_counter is not None:
            self.s.p.counter_arrays.append(m.CounterArray(t.direct_counter.control_plane_name,
                                                        len(self.s.p.counter_arrays), 0, True, name,
                                                        t.direct_counter.kind or "packets_and_bytes"))
        direct_meter = None
        if t.direct_meter is not None:
            direct_meter = t.direct_meter.control_plane_name
            target = self.direct_meter_target(t)
            self.s.p.meter_arrays.append(m.MeterArray(direct_meter, len(self.s.p.meter_arrays), 0,
                                                    t.direct_meter.kind or "bytes", 2, True, name, target))
        table = m.Table(name, self.s.next_id("table"), match_type, kind, t.size if t.size is not None else 1024,
                        t.direct_counter is not None, ir.supports_timeout(t), keys, [a.id for a in actions],
                        [a.name for a in actions], next_tables, nxt,
                        default_entry, entries, profile, direct_meter,
                        frozenset(a.name for a, (_, an) in zip(actions, refs) if an.has("defaultonly")),
                        frozenset(a.name for a, (_, an) in zip(actions, refs) if an.has("tableonly")))
        self.pl.tables.append(table)
        self.applied[id(t)] = self.act_table(pre, name, t.loc) if pre else name
        return self.applied[id(t)]

    def reapplied(self, t: ir.Table, targets: dict[str, str | None], nxt: str | None) -> str:
        """A table applied in two branches (`if (c) { t.apply(); } else { t.apply(); }`) is one node, as in
        p4c's JSON: BMv2's graph allows it only when both places go on to the same nodes."""
        table = next(x for x in self.pl.tables if x.name == t.control_plane_name)
        next_tables = dict(targets) if "__HIT__" in targets else {a: targets.get(a, nxt) for a in table.actions}
        if next_tables != table.next_tables or nxt != table.base_default_next:
            raise fail(f"Program is not supported by this target, because table {table.name} has multiple successors",
                       t.loc)
        return self.applied[id(t)]

    def key(self, k: ir.KeyElement, pre: list[m.Primitive]) -> m.KeyElement:
        v = self.v.data(k.expr)
        if isinstance(v, m.Expr) and v.op == "b2d" and isinstance(v.right, m.Expr) and v.right.op == "d2b" \
                and isinstance(v.right.right, m.Field):
            v = v.right.right  # a bool field or isValid(): its bit
        if isinstance(v, m.Field):
            return m.KeyElement(k.match_kind, v, None, k.name)
        if isinstance(v, m.Expr) and v.op == "&" and isinstance(v.left, m.Field) and isinstance(v.right, m.Const) \
                and not isinstance(k.expr, ir.Slice):
            return m.KeyElement(k.match_kind, v.left, v.right.value, k.name)
        t = self.s.tmp(ir.BitsType(max(k.width, 1)), k.loc)
        pre.append(m.Primitive("assign", [t.ref, v]))
        assert isinstance(t.ref, m.Field)
        return m.KeyElement(k.match_kind, t.ref, None, k.name)

    def const_entry(self, t: ir.Table, e: ir.TableEntry, keys: list[m.KeyElement]) -> m.TableEntry:
        values = []
        match_keys = [k for k in t.keys if k.match_kind != "selector"]
        for k, lk, ks in zip(match_keys, keys, [ks for k2, ks in zip(t.keys, e.keys) if k2.match_kind != "selector"]):
            w = k.width or 32
            values.append(_match_value(lk.match_type, ks, w))
        action = self.st.table_action(e.action.action)
        args = e.action.args[len(e.action.args) - len(action.runtime_data):]
        data = [ir.constant_value(x) & all_ones(w) for x, (_, w) in zip(args, action.runtime_data)]
        # the lowered form orders priorities as BMv2's JSON does: smaller wins
        return m.TableEntry(values, m.ActionEntry(action.id, data), -(e.priority or 0))

    def direct_meter_target(self, t: ir.Table) -> m.Field | None:
        """Where the table's direct meter color goes: the argument of its `read` in the table's actions."""
        for ref in t.actions:
            for s in _walk_calls(ref.action.body.stmts):
                if isinstance(s, ir.ExternMethodCall) and s.method == "read" and isinstance(s.target, ir.InstanceRef) \
                        and s.target.decl is t.direct_meter:
                    dst = self.v.store_of(s.args[0])
                    if isinstance(dst, Scalar) and isinstance(dst.ref, m.Field):
                        return dst.ref
        return None

    def checksums(self, c: ir.Control) -> None:
        for s in flat_stmts(c.body.stmts):
            if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternFunctionCall):
                ext = for_call(s.call)
                if ext is not None and ext.checksum(self.x, s.call):
                    continue
            raise fail("only verify_checksum/update_checksum calls are lowered in checksum controls", s.loc)
