"""Loop rerolling + vectorisation: unrolled lane code becomes a few numpy operations.

P4 has no loops, so per-lane work (sum N int32 lanes into N registers) is written as N
copies of the same statements. Compiled one by one that costs ~8 Python statements per
lane. This pass, called by the code generator for every statement list, finds a run of
G >= MIN_GROUPS consecutive groups of L statements where group k equals group 0 except
for integer constants (literals, slice bounds, the position of a field in its header or
struct) that vary affinely, c_k = c_0 + d * k, and emits

    <index temporaries>
    if <every lane's register index is in bounds>:
        <numpy code for all G lanes, one statement at a time>
    else:
        <the unchanged scalar code>

What a run may contain (anything else leaves it scalar):
- statements: assignments, local declarations, register.read / register.write;
- per-lane values of type bit<W> / int<W> (W <= 32) or bool, held in np.int64 (np.bool_)
  arrays: lane-varying literals, 32-bit chunks of a wide field (`v[hi:lo]` exactly one
  chunk), fields that step through a header or struct (`h.v0`, `h.v1`, ...: aggnet.p4's
  lanes), register reads, and block locals that each group writes before it reads them;
- operators + - & | ^ ~ ! && || == != < <= > >= |+| |-| ?: and casts among those types,
  with the scalar code's wrap-around masks (int64 cannot overflow on 32-bit operands);
- lane-invariant subexpressions (no varying literal, reading nothing the run writes),
  computed once by the scalar code generator;
- register indices `E + c_k`, `E - c_k`, `c_k - E` or `c_k` with E invariant and d != 0;
- one kind of scalar result: `f = f | e` (`f = f || e`) where f is touched by nothing else
  in the run: OR is associative, commutative and idempotent, so f |= OR-reduce(e).

Why it is exact: the vector code runs statement by statement for all lanes at once, the
scalar code lane by lane. The two orders agree when no lane touches storage another lane
writes. Per-lane storage is lane-disjoint by construction: each lane's register cells and
wide-field chunks are distinct (d != 0, and a written register or field is accessed with
one index mapping only), per-lane locals are written before being read in the group, and
everything else a run reads is not written in it. Chunks and stepping fields are frame slots
in arithmetic progression, so all lanes are one list slice `F[first:stop:stride]`. Out-of-bounds or wrapping register
indices (scalar code reads 0 and skips the write) take the scalar branch. The vector code
never raises (no division, no shifts of lane values), so a packet error cannot leave the
two paths with different partial state. After the vector code, each local holds its last
lane's value, as it would after the scalar code.
"""
from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from p4target.frontend import ir
from p4target.interp.layout import CHUNK_BITS, WIDE_BITS, HeaderLayout, Local, StructLayout, WideLayout, span

if TYPE_CHECKING:
    from p4target.interp.codegen import Compiler

MIN_GROUPS = 4
FIELD = "field"  # the pseudo-attribute of a Member whose varying constant is its field's position
_TEMP = re.compile(r"(_t\d+) = ")
LANE_BITS = 32
_INVARIANT_OPS = {"==", "!=", "<", "<=", ">", ">=", "&&", "||", "+", "-", "*", "&", "|", "^", "|+|", "|-|",
                  "++", "<<", ">>"}  # not / and %: they can raise, and must raise where the scalar code does


class _Reject(Exception):
    """The run is outside what vector mode can prove equivalent; it stays scalar."""


def _lane_type(t: ir.Type) -> bool:
    return isinstance(t, ir.BoolType) or isinstance(t, (ir.BitsType, ir.IntType)) and t.width <= LANE_BITS


def _mask(w: int) -> int:
    return (1 << w) - 1


def _flatten(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    """Nested blocks inlined, as the scalar code generator runs them."""
    out: list[ir.Stmt] = []
    for s in stmts:
        out.extend(_flatten(s.stmts) if isinstance(s, ir.Block) else [s])
    return out


def _field_index(node: ir.Member) -> int | None:
    """Position of a lane-typed field among its header's or struct's fields, else None."""
    t = node.expr.type
    if isinstance(t, (ir.HeaderType, ir.StructType)) and _lane_type(node.type):
        for i, f in enumerate(t.fields):
            if f.name == node.member:
                return i
    return None


def _value(node: object, attr: str) -> int:
    """The integer constant `attr` of `node` (FIELD: a Member's field position)."""
    return _field_index(node) if attr == FIELD else getattr(node, attr)


def _tkey(t: ir.Type) -> object:
    try:
        hash(t)
        return t
    except TypeError:
        return id(t)


def _sig(node: object, token: Callable[[object], object], consts: list) -> tuple:
    """Structural key of a statement or expression, without its integer constants
    (appended to `consts` as (node, attribute)); declarations are named by `token`."""
    def sub(x: object) -> tuple:
        return _sig(x, token, consts)

    if isinstance(node, ir.Constant):
        consts.append((node, "value"))
        return ("C", _tkey(node.type))
    if isinstance(node, ir.Slice):
        consts.extend([(node, "hi"), (node, "lo")])
        return ("S", sub(node.expr))
    if isinstance(node, ir.VarRef):
        return ("V", token(node.decl))
    if isinstance(node, ir.InstanceRef):
        return ("I", id(node.decl))
    if isinstance(node, (ir.BoolLiteral, ir.EnumMember, ir.ErrorMember)):
        return (type(node).__name__, _tkey(node.type), getattr(node, "value", None), getattr(node, "member", None))
    if isinstance(node, ir.Member):
        if _field_index(node) is not None:
            consts.append((node, FIELD))
            return ("F", _tkey(node.type), sub(node.expr))
        return ("M", node.member, sub(node.expr))
    if isinstance(node, ir.ArrayIndex):
        return ("A", sub(node.expr), sub(node.index))
    if isinstance(node, ir.Unary):
        return ("U", node.op, _tkey(node.type), sub(node.expr))
    if isinstance(node, ir.Binary):
        return ("B", node.op, _tkey(node.type), sub(node.left), sub(node.right))
    if isinstance(node, ir.Mux):
        return ("X", _tkey(node.type), sub(node.cond), sub(node.then), sub(node.else_))
    if isinstance(node, ir.Cast):
        return ("T", _tkey(node.type), sub(node.expr))
    if isinstance(node, ir.HeaderMethodCall) and not node.args:
        return ("H", node.method, sub(node.header))
    if isinstance(node, ir.Assign):
        return ("=", sub(node.lhs), sub(node.rhs))
    if isinstance(node, ir.VarDeclStmt):
        return ("D", _tkey(node.decl.type), None if node.decl.init is None else sub(node.decl.init))
    if isinstance(node, ir.MethodCallStmt) and isinstance(node.call, ir.ExternMethodCall):
        c = node.call
        return ("E", sub(c.target), c.method, tuple(sub(a) for a in c.args))
    raise _Reject(type(node).__name__)


class Vectorizer:
    """Emits statement lists for one Compiler, vectorising the runs it can (module docstring)."""

    def __init__(self, compiler: Compiler):
        self.c = compiler
        compiler.ns["_np"] = np

    def block(self, stmts: list[ir.Stmt], ind: int) -> None:
        stmts = _flatten(stmts)
        keys = self._coarse_keys(stmts)
        i = 0
        while i < len(stmts):
            run = self._run_at(stmts, keys, i)
            if run is None:
                self.c.stmt(stmts[i], ind)
                i += 1
            else:
                run.emit(ind)
                i += len(run.stmts)

    @staticmethod
    def _coarse_keys(stmts: list[ir.Stmt]) -> list[int]:
        """Per statement, an int equal for statements that may differ only in constants and
        in which declaration of the list they name (negative: not vectorisable)."""
        declared = {id(s.decl) for s in stmts if isinstance(s, ir.VarDeclStmt)}
        token = lambda d: "d" if id(d) in declared else id(d)  # noqa: E731
        interned: dict[tuple, int] = {}
        keys = []
        for n, s in enumerate(stmts):
            try:
                keys.append(interned.setdefault(_sig(s, token, []), len(interned)))
            except _Reject:
                keys.append(-1 - n)
        return keys

    def _run_at(self, stmts: list[ir.Stmt], keys: list[int], i: int) -> _Run | None:
        """The longest vectorisable run starting at statement i, if any."""
        n = len(stmts)
        if keys[i] < 0 or n - i < MIN_GROUPS:
            return None
        best: tuple[int, int, dict] | None = None
        for length in range(1, (n - i) // MIN_GROUPS + 1):
            if keys[i + length] != keys[i]:
                continue
            first = keys[i:i + length]
            if min(first) < 0:
                break  # every longer group contains this unsupported statement too
            groups = 1
            while i + (groups + 1) * length <= n and keys[i + groups * length:i + (groups + 1) * length] == first:
                groups += 1
            if groups < MIN_GROUPS or best is not None and groups * length <= best[0] * best[1]:
                continue
            groups, steps = self._affine_groups(stmts, i, length, groups)
            if groups >= MIN_GROUPS and (best is None or groups * length > best[0] * best[1]):
                best = (length, groups, steps)
        if best is None:
            return None
        length, groups, steps = best
        end = i + length * groups
        declared = {id(s.decl) for s in stmts[:end] if isinstance(s, ir.VarDeclStmt)}
        later: set[int] = set()
        for s in stmts[end:]:
            _refs(s, later)
        try:
            return _Run(self.c, stmts[i:end], length, groups, steps,
                        lambda decls: any(d in later or d not in declared for d in decls))
        except _Reject:
            return None

    @staticmethod
    def _affine_groups(stmts: list[ir.Stmt], i: int, length: int, most: int) -> tuple[int, dict]:
        """How many groups from i are group 0 with affinely varying constants, and each
        constant's step d: {(id(node), attribute): d} for group 0's nodes."""
        base: tuple | None = None
        nodes: list = []
        values0: list[int] = []
        steps: list[int] = []
        count = 0
        for k in range(most):
            group = stmts[i + k * length:i + (k + 1) * length]
            mine = {id(s.decl): ("g", j) for j, s in enumerate(group) if isinstance(s, ir.VarDeclStmt)}
            consts: list = []
            shape = tuple(_sig(s, lambda d, mine=mine: mine.get(id(d), id(d)), consts) for s in group)
            values = [_value(node, attr) for node, attr in consts]
            if k == 0:
                base, nodes, values0 = shape, consts, values
            elif shape != base:
                break
            elif k == 1:
                steps = [v - v0 for v, v0 in zip(values, values0)]
            elif any(v != v0 + d * k for v, v0, d in zip(values, values0, steps)):
                break
            count = k + 1
        table = {(id(node), attr): d for (node, attr), d in zip(nodes, steps)}
        if len(table) < len(set(zip(((id(n), a) for n, a in nodes), steps))):
            return 0, {}  # one constant node in two places that step differently
        return count, table


class _Run:
    """One candidate run: analysed (raises _Reject) and turned into vector code on creation."""

    def __init__(self, compiler: Compiler, stmts: list[ir.Stmt], length: int, groups: int, steps: dict,
                 live: Callable[[list[int]], bool]):
        self.c = compiler
        self.live = live  # whether code after the run may read any of these declarations
        self.stmts = stmts
        self.length = length
        self.G = groups
        self.steps = steps
        self.template = stmts[:length]
        self.run_decls = {id(s.decl) for s in stmts if isinstance(s, ir.VarDeclStmt)}
        self.pre: list[str] = []  # before the `if`: register index temporaries
        self.conds: list[str] = []  # all must hold for the vector branch
        self.body: list[str] = []  # the vector branch
        self.consts: dict[str, np.ndarray] = {}  # module globals the vector code uses
        self.lanes: dict[object, str] = {}  # storage key of a per-lane local -> its current array
        self.memo: dict[str, str] = {}  # pure vector expression -> the temporary holding it
        self.lists: dict[str, str] = {}  # array temporary -> a list temporary of the same lanes
        self.types: dict[object, ir.Type] = {}  # per-lane local -> its type
        self.cells: dict[tuple, str] = {}  # (register or chunks, mapping) -> current array of its lanes
        self.indices: dict[str, str] = {}  # lane-0 register index code -> its temporary
        self.maps: dict[tuple, set] = {}  # storage keys of a register / wide field -> index mappings used
        self.reads: dict[object, int] = {}
        self.writes: dict[object, int] = {}
        self.reductions: dict[object, int] = {}
        for s in self.template:
            self._survey(s)
        for s in self.template:
            self._stmt(s)
        for target, mappings in self.maps.items():
            if len(mappings) > 1 and any(k in self.writes for k in target) and self._overlap(target, mappings):
                raise _Reject("a written register or field accessed with two index mappings")

    # ------------------------------------------------------------------ analysis helpers

    def _overlap(self, target: tuple, mappings: set) -> bool:
        """Whether two of the index mappings used on `target` may share a written cell: always for
        a register (its indices are run-time values), exactly for frame slots (static)."""
        if not isinstance(target[0], int):
            return True
        seen: set[int] = set()
        for first, stride in mappings:
            cells = set(range(first, first + stride * self.G, stride))
            if any(c in seen and c in self.writes for c in cells):
                return True
            seen |= cells
        return False

    def step(self, node: object, attr: str) -> int:
        return self.steps.get((id(node), attr), 0)

    def _varies(self, e: ir.Expr) -> bool:
        if isinstance(e, ir.Constant):
            return self.step(e, "value") != 0
        if isinstance(e, ir.Slice) and (self.step(e, "hi") or self.step(e, "lo")):
            return True
        if isinstance(e, ir.Member) and self.step(e, FIELD):
            return True
        return any(self._varies(x) for x in _children(e))

    def _storage(self, e: ir.Expr) -> object:
        """Storage key of a scalar l-value: ('v', id(decl)) for a local, its slots' frozenset
        for frame storage, None for an action parameter (a constant for the action)."""
        if isinstance(e, ir.VarRef):
            if id(e.decl) in self.c.pynames:
                return None
            if id(e.decl) in self.run_decls:
                return ("v", id(e.decl))
            lay = self.c.layouts.get(id(e.decl))
            if lay is None:
                raise _Reject("a variable the scalar code has not declared yet")
            if isinstance(lay, Local):
                return ("v", id(e.decl))
            return frozenset(range(*span(lay)))
        root = e
        while isinstance(root, (ir.Member, ir.ArrayIndex)):
            if isinstance(root, ir.ArrayIndex) and not isinstance(root.index, ir.Constant):
                raise _Reject("dynamic stack index")
            if isinstance(root, ir.Member) and isinstance(root.expr.type, ir.StackType):
                raise _Reject("stack cursor")
            root = root.expr
        if not isinstance(root, ir.VarRef) or id(root.decl) in self.run_decls or id(root.decl) not in self.c.layouts:
            raise _Reject("storage the run cannot locate")
        lay, off = self.c.lv(e)
        if off:
            raise _Reject("dynamic offset")
        return frozenset(range(*span(lay)))

    def _lane_bounds(self, e: ir.Slice) -> list[tuple[int, int]]:
        dh, dl = self.step(e, "hi"), self.step(e, "lo")
        return [(e.hi + dh * k, e.lo + dl * k) for k in range(self.G)]

    def _wide(self, e: ir.Expr) -> WideLayout | None:
        if isinstance(e.type, ir.BitsType) and e.type.width > WIDE_BITS:
            self._storage(e)  # checks it is static frame storage
            lay, _ = self.c.lv(e)
            if isinstance(lay, WideLayout):
                return lay
        return None

    def _field_lanes(self, e: ir.Expr) -> tuple[int, int, tuple] | None:
        """(lane 0's slot, slot stride, the record's slots) of a field that steps through its
        header or struct from lane to lane; None for anything else."""
        if not (isinstance(e, ir.Member) and self.step(e, FIELD)):
            return None
        self._storage(e)  # checks it is static frame storage
        record, _ = self.c.lv(e.expr)
        if not isinstance(record, (HeaderLayout, StructLayout)):
            raise _Reject("a stepping field outside a header or struct")
        fields, i0, d = e.expr.type.fields, _field_index(e), self.step(e, FIELD)
        if not 0 <= i0 + d * (self.G - 1) < len(fields):
            raise _Reject("a stepping field past the end of its record")
        slots = [record.fields[fields[i0 + d * k].name] for k in range(self.G)]
        stride = slots[1] - slots[0]
        if not all(isinstance(x, int) for x in slots) or stride == 0 or slots != list(range(slots[0], slots[0] + stride * self.G, stride)):
            raise _Reject("stepping fields that are not evenly spaced slots")
        return slots[0], stride, tuple(range(record.first, record.end))

    def _touch(self, e: ir.Expr) -> set:
        """Storage keys `e` reads, for all lanes (frame slots as ints)."""
        lanes = self._field_lanes(e)
        if lanes is not None:
            first, stride, _ = lanes
            return set(range(first, first + stride * self.G, stride))
        if isinstance(e, (ir.VarRef, ir.Member, ir.ArrayIndex)):
            key = self._storage(e)
            return set() if key is None else set(key) if isinstance(key, frozenset) else {key}
        if isinstance(e, ir.Slice):
            lay = self._wide(e.expr)
            if lay is not None and self._varies(e):
                return {slot for hi, lo in self._lane_bounds(e) for slot in range(lay.chunk_slot(hi), lay.chunk_slot(lo) + 1)}
        if isinstance(e, ir.HeaderMethodCall):
            if e.method != "isValid":
                raise _Reject("header method in an expression")
            return set(self._storage(e.header))
        out: set = set()
        for x in _children(e):
            out |= self._touch(x)
        return out

    def _count(self, table: dict, keys: set) -> None:
        for k in keys:
            table[k] = table.get(k, 0) + 1

    def _reduction(self, s: ir.Assign) -> tuple[object, ir.Expr] | None:
        """(target key, per-lane operand) if `s` is `f = f | e`, `f = e | f` (or ||)."""
        rhs, t = s.rhs, s.lhs.type
        if not (isinstance(rhs, ir.Binary) and isinstance(s.lhs, (ir.VarRef, ir.Member))
                and (rhs.op == "|" and isinstance(t, ir.BitsType) or rhs.op == "||" and isinstance(t, ir.BoolType))
                and t.__class__ is rhs.type.__class__ and _lane_type(t)):
            return None
        key = self._storage(s.lhs)
        if key is None or isinstance(key, tuple) and key[1] in self.run_decls:
            return None
        if self._varies(s.lhs):
            return None
        for mine, other in ((rhs.left, rhs.right), (rhs.right, rhs.left)):
            if isinstance(mine, (ir.VarRef, ir.Member)) and self._storage(mine) == key:
                return (next(iter(key)) if isinstance(key, frozenset) else key), other
        return None

    def _survey(self, s: ir.Stmt) -> None:
        """Count what the template reads and writes (keys of all lanes)."""
        reads, writes = self.reads, self.writes
        if isinstance(s, ir.VarDeclStmt):
            if s.decl.init is not None:
                self._count(reads, self._touch(s.decl.init))
            self._count(writes, {("v", id(s.decl))})
        elif isinstance(s, ir.Assign):
            self._count(reads, self._touch(s.rhs))
            lhs = s.lhs
            if isinstance(lhs, ir.Slice):
                lay = self._wide(lhs.expr)
                if lay is not None and self._varies(lhs):
                    self._count(writes, self._touch(lhs))
                else:  # read-modify-write of the sliced value
                    self._count(reads, self._touch(lhs.expr))
                    self._count(writes, self._touch(lhs.expr))
            else:
                self._count(writes, self._touch(lhs))
            red = self._reduction(s)
            if red is not None:
                self._count(self.reductions, {red[0]})
        else:
            call = s.call
            inst = call.target.decl if isinstance(call.target, ir.InstanceRef) else None
            if getattr(call.target.type, "name", "") != "register" or inst is None or call.method not in ("read", "write"):
                raise _Reject("a call other than register.read/write")
            reg = ("r", inst.control_plane_name)
            if call.method == "read":
                self._count(reads, self._touch(call.args[1]) | {reg})
                self._count(writes, self._touch(call.args[0]))
            else:
                self._count(reads, self._touch(call.args[0]) | self._touch(call.args[1]))
                self._count(writes, {reg})

    def _invariant(self, e: ir.Expr) -> bool:
        """Same value in every lane, computable once by the scalar code generator."""
        return _plain(e) and not self._varies(e) and not any(k in self.writes for k in self._touch(e))

    # ------------------------------------------------------------------ vector code

    def _val(self, code: str) -> str:
        """A temporary holding the pure vector expression `code` (computed once per run)."""
        name = self.memo.get(code)
        if name is None:
            name = self.memo[code] = self.c.tmp()
            self.body.append(f"{name} = {code}")
        return name

    def _load(self, where: str, flip: str) -> str:
        """The lanes held by the list slice `where` (reversed when `flip`), as a list temporary
        (what a copy or write-back uses) and an array temporary; never shared, storage changes."""
        lst, arr = self.c.tmp(), self.c.tmp()
        self.body.append(f"{lst} = {where}{flip}")
        self.body.append(f"{arr} = _np.array({lst}, dtype=_np.int64)")
        self.lists[arr] = lst
        return arr

    def _list(self, arr: str) -> str:
        """A list of the lanes of `arr` (Python ints/bools, as scalar code stores them)."""
        lst = self.lists.get(arr)
        if lst is None:
            lst = self.lists[arr] = self._val(f"{arr}.tolist()")
        return lst

    def _vector(self, code: str, t: ir.Type, vec: bool) -> str:
        """`code` as an array of G lanes (an invariant value is repeated)."""
        if vec:
            return code
        dtype = "_np.bool_" if isinstance(t, ir.BoolType) else "_np.int64"
        return self._val(f"_np.full({self.G}, {code}, dtype={dtype})")

    def _const(self, values: list[int]) -> str:
        name = self.c.tmp()
        self.consts[name] = np.array(values, dtype=np.int64)
        return name

    def gen(self, e: ir.Expr) -> tuple[str, bool]:
        """(code, is_vector): invariant values as scalar code, per-lane values as arrays."""
        if self._invariant(e):
            if not _lane_type(e.type):
                raise _Reject("a wide invariant value")
            return self.c.expr(e), False
        t = e.type
        if not _lane_type(t):
            raise _Reject(f"lane values of type {t}")
        if isinstance(e, ir.Constant):
            values = [e.value + self.step(e, "value") * k for k in range(self.G)]
            lo, hi = (0, _mask(t.width)) if isinstance(t, ir.BitsType) else (-(1 << t.width - 1), _mask(t.width - 1))
            if isinstance(t, ir.BoolType) or not all(lo <= v <= hi for v in values):
                raise _Reject("a varying constant out of its type's range")
            return self._const(values), True
        lanes = self._field_lanes(e)
        if lanes is not None:
            return self._frame_lanes(*lanes, None), True
        if isinstance(e, (ir.VarRef, ir.Member, ir.ArrayIndex)):
            key = self._storage(e)
            if key in self.lanes:
                return self.lanes[key], True
            raise _Reject("reads a value the run writes before this lane writes it")
        if isinstance(e, ir.Slice):
            lay = self._wide(e.expr)
            if lay is not None:
                return self._chunks(e, lay, None), True
            if self._varies(e):
                raise _Reject("varying bit slice of a narrow value")
            a, _ = self.gen(e.expr)
            return self._val(f"(({a} >> {e.lo}) & {_mask(e.hi - e.lo + 1)})"), True
        if isinstance(e, ir.Unary):
            return self._unary(e), True
        if isinstance(e, ir.Binary):
            return self._binary(e), True
        if isinstance(e, ir.Mux):
            c, t_, f = self.gen(e.cond), self.gen(e.then), self.gen(e.else_)
            return self._val(f"_np.where({c[0]}, {t_[0]}, {f[0]})"), True
        if isinstance(e, ir.Cast):
            return self._cast(e), True
        raise _Reject(f"{type(e).__name__} per lane")

    def _operand(self, e: ir.Expr) -> str:
        if not _lane_type(e.type):
            raise _Reject(f"operand of type {e.type}")
        return self.gen(e)[0]

    def _unary(self, e: ir.Unary) -> str:
        a, t = self._operand(e.expr), e.type
        if e.op == "!":
            return self._val(f"_np.logical_not({a})")
        if e.op == "-" and not isinstance(t, ir.BoolType):
            return self._val(self.c.wrap(t, f"-{a}"))
        if e.op == "~" and not isinstance(t, ir.BoolType):
            return self._val(f"({a} ^ {_mask(t.width)})" if isinstance(t, ir.BitsType) else f"(~{a})")
        raise _Reject(f"unary {e.op}")

    def _binary(self, e: ir.Binary) -> str:
        op, t = e.op, e.type
        a, b = self._operand(e.left), self._operand(e.right)
        if op in ("&&", "||"):
            return self._val(f"_np.logical_{'and' if op == '&&' else 'or'}({a}, {b})")
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return self._val(f"({a} {op} {b})")
        if isinstance(t, ir.BoolType):
            raise _Reject(f"bool {op}")
        if op in ("+", "-"):
            return self._val(self.c.wrap(t, self._val(f"({a} {op} {b})")))
        if op in ("&", "|", "^"):
            return self._val(f"({a} {op} {b})")
        if op in ("|+|", "|-|"):
            raw = self._val(f"({a} {op[1]} {b})")
            if isinstance(t, ir.BitsType):
                return self._val(f"_np.minimum({raw}, {_mask(t.width)})" if op == "|+|" else f"_np.maximum({raw}, 0)")
            half = 1 << (t.width - 1)
            return self._val(f"_np.minimum(_np.maximum({raw}, {-half}), {half - 1})")
        raise _Reject(f"operator {op} per lane")

    def _cast(self, e: ir.Cast) -> str:
        src, dst = e.expr.type, e.type
        a = self._operand(e.expr)
        if src == dst:
            return a
        if isinstance(dst, ir.BoolType):
            return self._val(f"({a} != 0)")
        if isinstance(src, ir.BoolType):
            a = self._val(f"{a}.astype(_np.int64)")
            return a if isinstance(dst, ir.BitsType) else self._val(self.c.wrap(dst, a))
        if isinstance(dst, ir.BitsType):
            if isinstance(src, ir.BitsType) and src.width <= dst.width:
                return a
            return self._val(f"({a} & {_mask(dst.width)})")
        if isinstance(src, ir.BitsType) and src.width == dst.width:
            return self._val(self.c.signed(dst, a))
        return self._val(self.c.wrap(dst, a))

    # ------------------------------------------------------------------ lane storage

    def _chunks(self, e: ir.Slice, lay: WideLayout, value: str | None) -> str:
        """Read (value None) or write the chunk each lane's slice names; the lanes' array."""
        bounds = self._lane_bounds(e)
        if any(lo % CHUNK_BITS or hi != lo + CHUNK_BITS - 1 for hi, lo in bounds):
            raise _Reject("a lane slice that is not exactly one chunk")
        stride = -self.step(e, "lo") // CHUNK_BITS
        if stride == 0:
            raise _Reject("the same chunk in every lane")
        return self._frame_lanes(lay.chunk_slot(e.lo), stride, tuple(range(lay.first, lay.end)), value)

    def _frame_lanes(self, first: int, stride: int, target: tuple, value: str | None) -> str:
        """Read (value None) or write the frame slots first, first + stride, ... (one a lane),
        which lie in the storage `target`; the lanes' array."""
        self.maps.setdefault(target, set()).add((first, stride))
        stop = first + stride * (self.G - 1) + (1 if stride > 0 else -1)
        where = f"F[{first}:{'' if stop < 0 else stop}{'' if stride == 1 else f':{stride}'}]"
        cell = ("F", first, stride)
        if value is None:
            if cell not in self.cells:
                self.cells[cell] = self._load(where, "")
            return self.cells[cell]
        self.body.append(f"{where} = {self._list(value)}")
        self.cells[cell] = value
        return value

    def _register(self, call: ir.ExternMethodCall, value: str | None) -> str:
        """Read (value None) or write every lane's register cell; the lanes' array."""
        inst = call.target.decl
        reg = self.c.state.registers[inst.control_plane_name]
        t = inst.type_args[0]
        if not isinstance(t, (ir.BitsType, ir.IntType)) or t.width > LANE_BITS:
            raise _Reject(f"register of {t}")
        idx = call.args[1] if value is None else call.args[0]
        first, d = self._index(idx)
        self.maps.setdefault((("r", inst.control_plane_name),), set()).add((first, d))
        var = self.indices.get(first)
        if var is None:
            var = self.indices[first] = self.c.tmp()
            self.pre.append(f"{var} = {first}")
        bound = min(reg.schema.size, 1 << idx.type.width)
        n = abs(d) * (self.G - 1)
        if d > 0:
            self.conds.append(f"{var} + {n} < {bound}")
            where = f"{var}:{var} + {n + 1}" + ("" if d == 1 else f":{d}")
        else:
            self.conds.append(f"{n} <= {var} < {bound}")
            where = f"{var} - {n}:{var} + 1:{-d}"
        name = self.c.bind("_R", reg.values)
        flip = "" if d > 0 else "[::-1]"
        cell = ("R", name, first, d)
        if value is None:
            if cell not in self.cells:
                raw = self._load(f"{name}[{where}]", flip)
                self.cells[cell] = self._val(self.c.signed(t, raw)) if isinstance(t, ir.IntType) else raw
            return self.cells[cell]
        bits = self._val(f"({value} & {_mask(t.width)})") if isinstance(t, ir.IntType) else value
        self.body.append(f"{name}[{where}] = {self._list(bits)}{flip}")
        self.cells[cell] = value
        return value

    def _index(self, e: ir.Expr) -> tuple[str, int]:
        """(scalar code of lane 0's index, per-lane step) of `E + c_k`, `E - c_k`, `c_k - E`, `c_k`."""
        if not isinstance(e.type, ir.BitsType):
            raise _Reject("register index type")
        d = 0
        if isinstance(e, ir.Constant):
            d = self.step(e, "value")
        elif isinstance(e, ir.Binary) and e.op in ("+", "-"):
            if isinstance(e.right, ir.Constant) and self._invariant(e.left):
                d = self.step(e.right, "value") * (1 if e.op == "+" else -1)
            elif isinstance(e.left, ir.Constant) and self._invariant(e.right):
                d = self.step(e.left, "value")
        if d == 0:
            raise _Reject("a register index that is not lane-invariant + k * d, d != 0")
        return self.c.expr(e), d

    # ------------------------------------------------------------------ statements

    def _set_lane(self, lhs: ir.Expr, code: str, vec: bool) -> None:
        lanes = self._field_lanes(lhs)
        if lanes is not None:
            self._frame_lanes(*lanes, self._vector(code, lhs.type, vec))
            return
        key = self._storage(lhs)
        if not (isinstance(key, tuple) and key[0] == "v") or not _lane_type(lhs.type):
            raise _Reject("a lane value stored outside a local")
        self.lanes[key], self.types[key] = self._vector(code, lhs.type, vec), lhs.type

    def _stmt(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.VarDeclStmt):
            d = s.decl
            if not _lane_type(d.type):
                raise _Reject(f"local of type {d.type}")
            init = self.gen(d.init) if d.init is not None else ("False" if isinstance(d.type, ir.BoolType) else "0", False)
            key = ("v", id(d))
            self.lanes[key], self.types[key] = self._vector(init[0], d.type, init[1]), d.type
        elif isinstance(s, ir.Assign):
            self._assign(s)
        elif s.call.method == "read":
            out = s.call.args[0]
            if out.type != s.call.target.decl.type_args[0]:
                raise _Reject("register read into another type")
            self._set_lane(out, self._register(s.call, None), True)
        else:
            t = s.call.target.decl.type_args[0]
            code, vec = self.gen(s.call.args[1])
            self._register(s.call, self._vector(code, t, vec))

    def _assign(self, s: ir.Assign) -> None:
        lhs = s.lhs
        red = self._reduction(s)
        if red is not None and self.reads.get(red[0]) == self.writes.get(red[0]) == self.reductions.get(red[0]):
            e = red[1]
            if isinstance(e, ir.Cast) and isinstance(e.expr.type, ir.BoolType) and not self._invariant(e):
                code = f"int({self.gen(e.expr)[0]}.any())"  # OR of bools as 0/1: any()
            else:
                code, vec = self.gen(e)
                if vec:
                    code = (f"int(_np.bitwise_or.reduce({code}))" if isinstance(lhs.type, ir.BitsType)
                            else f"bool({code}.any())")
            lay, _ = self.c.lv(lhs)
            cur = self.c.read(lay, "")
            self.body.append(self.c.write(lay, "", f"({cur} | {code})" if s.rhs.op == "|" else f"({cur} or {code})"))
            return
        if isinstance(lhs, ir.Slice):
            lay = self._wide(lhs.expr)
            if lay is None or not self._varies(lhs) or s.rhs.type != ir.BitsType(CHUNK_BITS):
                raise _Reject("a slice assignment other than one chunk per lane")
            code, vec = self.gen(s.rhs)
            self._chunks(lhs, lay, self._vector(code, s.rhs.type, vec))
            return
        code, vec = self.gen(s.rhs)
        self._set_lane(lhs, code, vec)

    # ------------------------------------------------------------------ output

    def emit(self, ind: int) -> None:
        """The vector branch, and (when a runtime precondition guards it) the scalar one."""
        c = self.c
        guarded = bool(self.conds)
        saved, c.lines = c.lines, []
        for s in self.stmts:  # also declares the run's locals, which the write-back needs
            c.stmt(s, ind + 1)
        scalar, c.lines = c.lines, saved
        c.ns.update(self.consts)
        c.emit(f"# vectorised: {self.G} lanes of {self.length} statements", ind)
        for line in self.pre:
            c.emit(line, ind)
        if guarded:
            c.emit(f"if {' and '.join(dict.fromkeys(self.conds))}:", ind)
        inner = ind + 1 if guarded else ind
        for line in self._prune(self.body + self._write_back()):
            c.emit(line, inner)
        if guarded:
            c.emit("else:", ind)
            c.lines.extend(scalar)

    def _write_back(self) -> list[str]:
        """Locals that code after the run may read get their scalar-code values: the last
        lane's, or lane k's for a local group k declares."""
        out = []
        by_decl = {id(s.decl): j for j, s in enumerate(self.template) if isinstance(s, ir.VarDeclStmt)}
        for key, arr in self.lanes.items():
            j = by_decl.get(key[1])
            if j is not None:
                decls = [id(self.stmts[k * self.length + j].decl) for k in range(self.G)]
                if self.live(decls):
                    names = ", ".join(self.c.layouts[d] for d in decls)
                    out.append(f"{names}, = {self._list(arr)}")
            elif self.live([key[1]]):
                lst = self.lists.get(arr)
                last = f"{lst}[-1]" if lst else f"{'bool' if isinstance(self.types[key], ir.BoolType) else 'int'}({arr}[-1])"
                out.append(f"{self.c.layouts[key[1]]} = {last}")
        return out

    def _prune(self, lines: list[str]) -> list[str]:
        """`lines` without assignments to temporaries nothing reads (all are pure)."""
        while True:
            text = "\n".join(lines)
            dead = [line for line in lines if (m := _TEMP.match(line)) and len(re.findall(rf"\b{m[1]}\b", text)) == 1]
            if not dead:
                return lines
            lines = [line for line in lines if line not in dead]


def _children(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Unary):
        return [e.expr]
    if isinstance(e, ir.Binary):
        return [e.left, e.right]
    if isinstance(e, ir.Mux):
        return [e.cond, e.then, e.else_]
    if isinstance(e, (ir.Cast, ir.Slice, ir.Member)):
        return [e.expr]
    if isinstance(e, ir.ArrayIndex):
        return [e.expr, e.index]
    if isinstance(e, ir.HeaderMethodCall):
        return [e.header]
    return []


def _plain(e: ir.Expr) -> bool:
    """Made only of things the scalar code computes without side effects or exceptions."""
    if isinstance(e, (ir.Constant, ir.BoolLiteral, ir.EnumMember, ir.ErrorMember, ir.VarRef, ir.Member,
                      ir.ArrayIndex)):
        return True
    if isinstance(e, ir.HeaderMethodCall):
        return e.method == "isValid"
    if isinstance(e, ir.Binary) and e.op not in _INVARIANT_OPS:
        return False
    if isinstance(e, (ir.Unary, ir.Binary, ir.Mux, ir.Cast, ir.Slice)):
        return all(_plain(x) for x in _children(e))
    return False


_NOT_NAMES = {"loc", "type", "decl", "action", "table", "type_args", "annotations"}


def _refs(node: object, out: set[int]) -> None:
    """Add the ids of the declarations `node` (a statement or expression) names."""
    if isinstance(node, ir.VarRef):
        out.add(id(node.decl))
    elif isinstance(node, ir.VarDeclStmt):
        _refs(node.decl.init, out)
    elif isinstance(node, (list, tuple)):
        for x in node:
            _refs(x, out)
    elif isinstance(node, dict):
        _refs(list(node.values()), out)
    elif dataclasses.is_dataclass(node) and isinstance(node, (ir.Stmt, ir.Expr, ir.SwitchCase)):
        for f in dataclasses.fields(node):
            if f.name not in _NOT_NAMES:
                _refs(getattr(node, f.name), out)
