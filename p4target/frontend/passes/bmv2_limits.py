"""BMv2's back-end limits, checked on the lowered program: what `p4c --target bmv2` refuses
(`[--Werror=overlimit]`, `[--Werror=unsupported]`, target errors) is refused here too, with
p4c's wording, so a program written against the embedded target moves to BMv2 unchanged.

- widths of bit<W>/int<W>/varbit<W> up to 2048 (types declared or computed, e.g. by ++);
- constant shift amounts up to 256, including the shift p4c generates for a write to a slice
  `x[hi:lo] = v` (`(bit<W>)v << lo`);
- no run-time division or modulo (p4c only strength-reduces powers of two, see strength.py);
- a table applied at most once on any path through a control; at most one lpm key in a table;
- a direct counter or meter attached to one table only; a table with a direct meter has an action
  that reads it (`meter.read(...)`);
- headers of a whole number of bytes;
- no switch statement in an action; a parser that reaches accept or reject;
- each extern's own rules, in its module (found through p4target.extern_registry: `check_instance`, `check_call`), e.g.
  registers of bit<W>/int<W> cells only, no Checksum16 (p4c cannot translate it for BMv2), mark_to_drop
  takes standard_metadata (the deprecated zero-argument form is refused), no clone3/resubmit/recirculate
  with a data argument (deprecated in v1model.p4, unknown to p4c's BMv2 back end: the
  `*_preserving_field_list` forms replace them).

Code rules apply to what runs: the blocks and the actions tables list or code calls, as p4c's
back end sees only those.
"""
from __future__ import annotations

import os

from ...errors import P4Error
from ...extern_registry import for_call, for_type
from .. import ir
from ..preprocess import INCLUDE_DIR
from ..typing import is_numeric
from .walk import walk

MAX_WIDTH = 2048
MAX_SHIFT = 256


def _fail(message: str, loc: ir.Loc) -> P4Error:
    return P4Error(message, loc.file, loc.line, loc.col)


def check_bmv2_limits(program: ir.Program) -> None:
    """What p4c's mid end and BMv2 back end reject is rejected here too (P4Error at the first one, checked in
    p4c's order where it matters: the mid end's rules first; the code before the extern instances)."""
    blocks = list(program.parsers.values()) + list(program.controls.values())
    m = program.main
    assert m is not None, "the checker guarantees a V1Switch main"
    checksums = {id(m.verify_checksum), id(m.compute_checksum)}  # checked last, by _checksum_control
    code: list = [b.body if isinstance(b, ir.Control) else list(b.states.values()) for b in blocks
                  if id(b) not in checksums]
    code += [t.keys for t in program.all_tables()]
    actions = used_actions(program.all_tables(), code)
    code += [a.body for a in actions]
    for n in walk(code):
        if isinstance(n, (ir.ExternFunctionCall, ir.ExternMethodCall)):
            _no_struct_written(n)
    for t in program.types.values():
        if isinstance(t, ir.StructLikeType):
            for f in t.fields:
                _width(f.type, f.loc)
    for t in _used_headers(blocks):
        if t.width() % 8:
            raise _fail(f"header {t.name}: Found header with fields totaling {t.width()} bits.  BMv2 target only "
                        f"supports headers with fields totaling a multiple of 8 bits.", t.loc)
    for a in program.all_actions():
        for p in a.params:
            _width(p.type, p.loc)
    attached: dict[int, ir.Table] = {}  # id of a direct counter/meter -> the table it is attached to
    for b in blocks:
        for d in b.locals:
            if isinstance(d, ir.VarDecl):
                _width(d.type, d.loc)
        if isinstance(b, ir.Control):
            for table in b.tables.values():
                _table_limits(table, attached)
            _table_paths(b.body.stmts, frozenset())
        else:
            _parser_ends(b)
    for n in walk([a.body for a in actions]):
        if isinstance(n, ir.Switch):
            raise _fail("SwitchStatement: switch statements not supported in actions on this target", n.loc)
    for n in walk(code):
        _check_node(n)
    for c, verify in ((m.verify_checksum, True), (m.compute_checksum, False)):
        _checksum_control(c.body.stmts, verify)
    for d in (d for b in blocks for d in b.locals if isinstance(d, ir.ExternInstance)):
        ext = for_type(d.extern)
        if ext is not None:
            ext.check_instance(d)


def _parser_ends(parser: ir.Parser) -> None:
    """Some path from the start state reaches accept or reject (p4c refuses a parser that loops forever)."""
    seen, pending = set(), ["start"]
    while pending:
        name = pending.pop()
        if name in ("accept", "reject"):
            return
        if name in seen or name not in parser.states:
            continue
        seen.add(name)
        tr = parser.states[name].transition
        if isinstance(tr, ir.SelectTransition) and not any(all(isinstance(k, ir.KsDefault) for k in c.keysets)
                                                           for c in tr.cases):
            return  # no case matching: the select rejects
        pending += [target for target, _ in tr.targets()]
    raise _fail(f"parser {parser.name}: Parser never reaches accept or reject state", parser.loc)


def used_actions(tables: list[ir.Table], code: list) -> list[ir.Action]:
    """The actions `tables` list or `code` calls, and those they call: p4c's back end never sees
    the others (an unused action may, say, call the old mark_to_drop())."""
    pending = [ref.action for t in tables for ref in t.actions]
    pending += [n.action for n in walk(code) if isinstance(n, ir.ActionCall)]
    found: dict[int, ir.Action] = {}
    while pending:
        action = pending.pop()
        if id(action) not in found:
            found[id(action)] = action
            pending += [n.action for n in walk(action.body) if isinstance(n, ir.ActionCall)]
    return list(found.values())


def _used_headers(blocks: list) -> list[ir.HeaderType]:
    """Header types the blocks' parameters and variables hold (p4c ignores unused ones)."""
    found: dict[int, ir.HeaderType] = {}
    todo: list[ir.Type] = [p.type for b in blocks for p in b.params]
    todo += [d.type for b in blocks for d in b.locals if isinstance(d, ir.VarDecl)]
    todo += [n.decl.type for b in blocks for n in walk(b.body if isinstance(b, ir.Control) else list(b.states.values()))
             if isinstance(n, ir.VarDeclStmt)]
    while todo:
        t = todo.pop()
        if isinstance(t, ir.StackType):
            todo.append(t.element)
        elif isinstance(t, ir.StructLikeType) and id(t) not in found:
            if isinstance(t, ir.HeaderType):
                found[id(t)] = t
            todo.extend(f.type for f in t.fields)
    return list(found.values())


def _width(t: ir.Type, loc: ir.Loc) -> None:
    if isinstance(t, (ir.BitsType, ir.IntType)) and t.width > MAX_WIDTH:
        raise _fail(f"{t}: Compiler only supports widths up to {MAX_WIDTH}", loc)
    if isinstance(t, ir.VarbitType) and t.max_width > MAX_WIDTH:
        raise _fail(f"{t}: Compiler only supports widths up to {MAX_WIDTH}", loc)


def _table_limits(table: ir.Table, attached: dict[int, ir.Table]) -> None:
    """One lpm key; entries' keysets BMv2 can match; a direct counter/meter on one table only; a direct meter some
    action reads."""
    for entry in table.entries:
        for ks, key in zip(entry.keys, table.keys):
            _entry_key(table, ks, key)
    lpm = [k for k in table.keys if k.match_kind == "lpm"]
    if len(lpm) > 1:
        raise _fail(f"multiple LPM keys in table {table.control_plane_name} not supported", table.loc)
    for direct in (table.direct_counter, table.direct_meter):
        if direct is None:
            continue
        other = attached.setdefault(id(direct), table)
        if other is not table:
            raise _fail(f"{direct.extern} {direct.name} is attached to tables {other.name} and {table.name}: "
                        f"a direct {direct.extern.split('_')[1]} belongs to one table", table.loc)
    meter = table.direct_meter
    if meter is not None and not any(
            isinstance(n, ir.ExternMethodCall) and n.method == "read" and isinstance(n.target, ir.InstanceRef)
            and n.target.decl is meter for n in walk([ref.action.body for ref in table.actions])):
        raise _fail(f"{table.control_plane_name}: table with direct meter {meter.name} must have at least one "
                    f"action with a read method call", table.loc)


def _checksum_control(stmts: list[ir.Stmt], verify: bool) -> None:
    """A checksum control holds only verify_checksum calls (update_checksum in the other one), and blocks of them:
    p4c's back end turns nothing else there into BMv2's JSON."""
    allowed = ("verify_checksum", "verify_checksum_with_payload") if verify else \
        ("update_checksum", "update_checksum_with_payload")
    for s in stmts:
        if isinstance(s, ir.Block):
            _checksum_control(s.stmts, verify)
        elif isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternFunctionCall) and s.call.name in allowed:
            for n in walk(s):
                _check_node(n)
        else:
            raise _fail(f"{_statement_text(s)}: Only calls to {allowed[0]} or {allowed[1]} allowed", s.loc)


def _statement_text(s: ir.Stmt) -> str:
    """A statement in a message: its target and what it calls or assigns, shortened."""
    if isinstance(s, ir.Assign):
        return f"{describe(s.lhs)} = {describe(s.rhs)}"
    if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternMethodCall):
        return f"{describe(s.call.target)}.{s.call.method}(...)"
    if isinstance(s, ir.MethodCallStmt) and isinstance(s.call, ir.ExternFunctionCall):
        return f"{s.call.name}(...)"
    return type(s).__name__


def _no_struct_written(call: ir.ExternCall) -> None:
    """An extern does not write a struct inside a block's parameter (a register read into `meta.s`): p4c's mid end
    flattens such structs into their fields and cannot pass them as one out argument."""
    for p, a in zip(call.decl.params, call.args):
        root = a
        while isinstance(root, ir.Member):
            root = root.expr
        if (p.direction in ("out", "inout") and isinstance(a, ir.Member) and isinstance(a.type, ir.StructType)
                and isinstance(root, ir.VarRef) and isinstance(root.decl, ir.Param)):
            raise _fail(f"{describe(a)}: writing to a structure is not supported on this target", a.loc)


def _entry_key(table: ir.Table, ks: ir.KeySet, key: ir.KeyElement) -> None:
    """A keyset of a table entry that BMv2's JSON can hold for its key's match kind (p4c's back end checks it, once
    the program type-checks)."""
    if key.match_kind == "exact" and isinstance(ks, (ir.KsDefault, ir.KsMask, ir.KsRange)):
        raise _fail(f"table {table.name}: exact key {key.name} needs a plain value", ks.loc)
    if isinstance(ks, ir.KsRange) and key.match_kind != "range":
        raise _fail(f"table {table.name}: a range keyset needs a range key", ks.loc)
    if key.match_kind == "optional" and isinstance(ks, ir.KsMask):
        raise _fail(f"{_masked(ks)}: invalid key expression (an optional key takes a value or _)", ks.loc)
    if key.match_kind == "lpm" and isinstance(ks, ir.KsMask) and isinstance(ks.mask, ir.Constant) \
            and is_numeric(key.expr.type) and not _is_prefix_mask(ks.mask.value, key.expr.type.width):
        raise _fail(f"{_masked(ks)}: invalid mask for LPM key", ks.loc)


def _masked(ks: ir.KsMask) -> str:
    """`value &&& mask` with constants in hex, as masks are written."""
    return " &&& ".join(f"{e.value:#x}" if isinstance(e, ir.Constant) else describe(e) for e in (ks.value, ks.mask))


def _is_prefix_mask(mask: int, width: int) -> bool:
    """Ones from the top bit down, then zeros (what an lpm key's mask must be)."""
    free = ~mask & ((1 << width) - 1)
    return free & (free + 1) == 0


def _check_node(n: object) -> None:
    if isinstance(n, ir.Expr):
        _width(n.type, n.loc)
    value = n.rhs if isinstance(n, ir.Assign) else n.decl.init if isinstance(n, ir.VarDeclStmt) else None
    if isinstance(value, (ir.ExternFunctionCall, ir.ExternMethodCall)) and _unknown(value):
        raise _fail(f"{_call_text(value)}: not supported", value.loc)  # p4c: a value BMv2 cannot compute
    if isinstance(n, ir.VarDeclStmt):
        _width(n.decl.type, n.decl.loc)
    elif isinstance(n, ir.Binary):
        if n.op in ("<<", ">>") and isinstance(n.right, ir.Constant) and n.right.value > MAX_SHIFT:
            raise _fail(f"{describe(n)}: shift amount limited to {MAX_SHIFT} on this target", n.loc)
        if n.op in ("/", "%"):
            raise _fail(f"{describe(n)}: could not evaluate expression at compilation time", n.loc)
    elif isinstance(n, ir.Assign) and isinstance(n.lhs, ir.Slice):
        _slice_write(n.lhs, n.rhs)
    elif isinstance(n, (ir.ActionCall, ir.ExternFunctionCall, ir.ExternMethodCall)):
        params = n.action.params if isinstance(n, ir.ActionCall) else (n.decl.params if n.decl else [])
        for p, a in zip(params, n.args):
            if p.direction in ("out", "inout") and isinstance(a, ir.Slice):
                _slice_write(a, None)
        if not isinstance(n, ir.ActionCall):
            ext = for_call(n)
            if ext is not None:
                ext.check_call(n)
            elif _unknown(n):
                raise _unknown_extern(n)


def _unknown(call: ir.ExternCall) -> bool:
    """An extern of the program's own, which BMv2 does not have."""
    return for_call(call) is None and os.path.dirname(call.decl.loc.file) != INCLUDE_DIR


def _call_text(call: ir.ExternCall) -> str:
    name = call.name if isinstance(call, ir.ExternFunctionCall) else f"{describe(call.target)}.{call.method}"
    return f"{name}({', '.join(describe(a) for a in call.args)})"


def _unknown_extern(call: ir.ExternCall) -> P4Error:
    """p4c's BMv2 back end blames the declaration of an extern it does not know, called as a statement, not the
    call; one called for its value is blamed at the call, since p4c's back end fails there first."""
    if isinstance(call, ir.ExternFunctionCall):
        return _fail(f"{call.name}: unknown extern function", call.decl.loc)
    return _fail(f"Unknown extern method {call.method} from type {getattr(call.target.type, 'name', '?')}",
                 call.decl.loc)


def _slice_write(lhs: ir.Slice, rhs: ir.Expr | None) -> None:
    """p4c writes `x[hi:lo] = v` as a mask-and-or with `(bit<W>)v << lo`."""
    if lhs.lo > MAX_SHIFT:
        value = describe(rhs) if rhs is not None else "value"
        raise _fail(f"({lhs.expr.type}){value} << {lhs.lo}: shift amount limited to {MAX_SHIFT} on this target",
                    lhs.loc)


def _table_paths(stmts: list[ir.Stmt], applied: frozenset | None) -> frozenset | None:
    """Tables applied so far on some path (None: no path goes on); raises on a table applied
    twice along one path, which BMv2's pipeline graph cannot express."""
    for s in stmts:
        if applied is None:
            return None
        applied = _table_paths_stmt(s, applied)
    return applied


def _table_paths_stmt(s: ir.Stmt, applied: frozenset) -> frozenset | None:
    def apply_in(e: object) -> frozenset:
        out = applied
        for n in walk(e):
            if isinstance(n, (ir.TableApply, ir.TableHitMiss, ir.ActionRun)):
                if n.table in out:
                    raise _fail(f"Program can not be implemented on this target since it contains a path from "
                                f"table {n.table.control_plane_name} back to itself", n.table.loc)  # where p4c says it
                out = out | {n.table}
        return out

    if isinstance(s, ir.Block):
        return _table_paths(s.stmts, applied)
    if isinstance(s, ir.If):
        applied = apply_in(s.cond)
        return _union(_table_paths([s.then], applied), _table_paths([s.else_], applied) if s.else_ else applied)
    if isinstance(s, ir.Switch):
        applied = apply_in(s.subject)
        out = None if any(lab is None for c in s.cases for lab in c.labels) else applied
        for c in s.cases:
            if c.body is not None:
                out = _union(out, _table_paths(c.body.stmts, applied))
        return out
    if isinstance(s, (ir.Exit, ir.Return)):
        return None
    if isinstance(s, ir.Assign):
        return apply_in([s.lhs, s.rhs])
    if isinstance(s, ir.MethodCallStmt):
        return apply_in(s.call)
    if isinstance(s, ir.VarDeclStmt):
        return apply_in(s.decl.init) if s.decl.init is not None else applied
    return applied


def _union(a: frozenset | None, b: frozenset | None) -> frozenset | None:
    if a is None:
        return b
    return a if b is None else a | b


def describe(e: ir.Expr) -> str:
    """P4 text for an expression, for messages (p4c's spelling where it is simple)."""
    if isinstance(e, (ir.VarRef, ir.InstanceRef)):
        return e.name
    if isinstance(e, ir.Member):
        return f"{describe(e.expr)}.{e.member}"
    if isinstance(e, ir.ArrayIndex):
        return f"{describe(e.expr)}[{describe(e.index)}]"
    if isinstance(e, ir.Slice):
        return f"{describe(e.expr)}[{e.hi}:{e.lo}]"
    if isinstance(e, ir.Constant):
        return str(e.value)
    if isinstance(e, ir.BoolLiteral):
        return "true" if e.value else "false"
    if isinstance(e, ir.Binary):
        return f"{describe(e.left)} {e.op} {describe(e.right)}"
    if isinstance(e, ir.Unary):
        return f"{e.op}{describe(e.expr)}"
    if isinstance(e, ir.Cast):
        return f"({e.type}){describe(e.expr)}"
    if isinstance(e, ir.EnumMember):
        return e.member if isinstance(e.type, ir.MatchKindType) else f"{e.type}.{e.member}"
    if isinstance(e, (ir.ListExpr, ir.StructExpr)):
        return "{...}"
    return "expression"
