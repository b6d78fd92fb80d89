"""Loop rerolling for the Python back end: unrolled lane code in an action becomes a few numpy operations.

P4 has no loops, so per-lane work (add N int32 lanes into N register cells) is written, and lowered,
as N copies of the same primitives. Printed one by one that costs several Python statements per lane.
`Vectorizer.reroll` finds, in an action's primitive list, a run of G >= MIN_GROUPS consecutive groups of
L primitives where group k equals group 0 except for integer constants (literals and field slots) that
vary affinely, c_k = c_0 + d * k, and replaces it by one `_vector` pseudo-primitive printed as

    <register index bases>
    if <every lane's register index is in bounds>:
        <numpy code for all G lanes, one primitive at a time>
    else:
        <the unchanged scalar code>

What a run may contain (anything else leaves it scalar):
- primitives: assign / modify_field into a field, register_read, register_write;
- values: fields, constants, action parameters, register cells, and the operators + - * & | ^ ~ neg,
  comparisons, and / or / not, d2b / b2d, ?:, two_comp_mod, sat_cast and usat_cast, each value's range
  known and within int64 (so numpy never overflows where Python's ints would not);
- per-lane storage: fields whose slot steps (d > 0) through the frame, register cells at `E + c_k`
  (or `(E + c_k) & mask`) with E invariant and d > 0, and fixed slots each group writes before it
  reads them (lowered locals);
- one kind of scalar result: `f = (f | e) & mask` where f is touched by nothing else in the run:
  OR is associative, commutative and idempotent, so f |= OR-reduce(e).

Why it is exact: the vector code runs primitive by primitive for all lanes at once, the scalar code lane
by lane. The two orders agree when no lane touches storage another lane writes. A written field steps
through slots no other access of the run touches; a written register is accessed with one index mapping
only (d != 0, so each lane has its own cell); fixed slots the run writes are per-lane temporaries or the
reduction; everything else the run reads, it does not write. Out-of-bounds or wrapping register indices
(the scalar code reads 0 and skips the write) take the scalar branch. The vector code never raises (no
division, no shifts), so a packet error cannot leave the two paths with different partial state. After
the vector code each temporary slot holds its last lane's value, as after the scalar code.
"""
from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING

import numpy as np

from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.python_module import PyModule
    from p4target.backends.python_primitives import PyPrimitives
    from p4target.backends.python_values import PyValues

MIN_GROUPS = 4
MAX_REFUSED = 64  # candidate runs an action may have refused before the rest of it stays scalar: each costs a
# pass over the run, and p4c's JSON of a wide aggnet.p4 offers thousands that fail (its lanes_add)
VECTOR_OP = "_vector"  # the pseudo-primitive standing for a run: its parameter is the run's number
_LIMIT = 1 << 62  # every value's range stays inside int64
_PRIMITIVES = {"assign", "modify_field", "register_read", "register_write"}
_JUMPS = {"_jump": 0, "_jump_if_zero": 1}  # jump primitive -> index of its target parameter
_BOOL_OPS = {"==", "!=", "<", "<=", ">", ">=", "and", "or", "not", "d2b"}
_NUMPY_BOOL = {"and": "&", "or": "|"}


class _Reject(Exception):
    """The run is outside what vector mode can prove equivalent; it stays scalar."""


def _sig(v: m.Value | None, p: PyModule, consts: list[tuple[object, int]]) -> tuple:
    """Structural key of a value without its integer constants (appended to `consts` as (node, value))."""
    if v is None:
        return ("-",)
    if isinstance(v, m.Field):
        slot, ftype = p.L.field_slot(v)
        if ftype is None:
            return ("valid", v.header)
        if ftype.width is None:
            raise _Reject("a varbit field")
        consts.append((v, slot))
        return ("F", ftype.width, ftype.signed)
    if isinstance(v, m.Const):
        consts.append((v, v.value))
        return ("C", v.width)
    if isinstance(v, (m.BoolConst, m.ActionParam, m.Named)):
        return (v,)
    if isinstance(v, m.RegisterCell):
        return ("R", v.name, _sig(v.index, p, consts))
    if isinstance(v, m.Expr):
        return ("E", v.op, _sig(v.left, p, consts), _sig(v.right, p, consts), _sig(v.cond, p, consts))
    raise _Reject(type(v).__name__)


def _prim_sig(prim: m.Primitive, p: PyModule, consts: list[tuple[object, int]]) -> tuple:
    if prim.op not in _PRIMITIVES:
        raise _Reject(prim.op)
    return (prim.op, *(_sig(v, p, consts) for v in prim.parameters))


@dataclasses.dataclass
class _Val:
    """A value in vector code: `code` is an int64/bool array when `lane`, else a scalar expression."""

    code: str
    lane: bool
    lo: int
    hi: int
    boolean: bool = False
    affine: tuple[str, int, int, int | None] | None = None  # (E, c_0, d, mask): lane k is (E + c_0 + d*k) & mask


def _ranged(code: str, lane: bool, lo: int, hi: int, boolean: bool = False) -> _Val:
    if lo < -_LIMIT or hi > _LIMIT:
        raise _Reject("a value that may not fit int64")
    return _Val(code, lane, lo, hi, boolean)


def _signed(val: _Val, width: int) -> str:
    """Code of `val` truncated to a signed `width`-bit value (no mask when it is already within `width` bits)."""
    code = val.code if 0 <= val.lo and val.hi < 1 << width else f"({val.code}) & {(1 << width) - 1:#x}"
    return f"(({code}) ^ {1 << (width - 1):#x}) - {1 << (width - 1):#x}"


def _width_range(width: int, signed: bool) -> tuple[int, int]:
    return (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)


class Vectorizer:
    """Rerolls the actions of one Python printer (module docstring)."""

    def __init__(self, o: PyModule, v: PyValues, s: PyPrimitives):
        self.o, self.v, self.s = o, v, s
        self.runs: list[_Run] = []
        self._sigs: dict[int, tuple[tuple, list[tuple[object, int]]]] = {}  # id(primitive) -> its shape, constants
        self._refused = 0
        self.reads: dict[m.Field, int] | None = None
        self.rerolled: dict[int, m.Action] = {}  # action id -> the action rerolled
        o.ns["_np"] = np

    def reroll(self, a: m.Action) -> m.Action:
        """`a` with each vectorisable run replaced by one `_vector` primitive (jump targets renumbered); once per
        action, however often it is printed (an action-only table prints its action's primitives in place)."""
        done = self.rerolled.get(a.id)
        if done is None:
            done = self.rerolled[a.id] = self._reroll(a)
        return done

    def _reroll(self, a: m.Action) -> m.Action:
        prims = a.primitives
        self._sigs = {}  # a primitive's shape is computed once per action, not once per candidate run
        self._refused = 0  # candidate runs analysed and refused in this action (see MAX_REFUSED)
        targets = {int(t.value) for prim in prims if prim.op in _JUMPS
                   for t in [prim.parameters[_JUMPS[prim.op]]] if isinstance(t, m.Const)}
        keys = self._coarse_keys(prims)
        out: list[m.Primitive] = []
        new_index: dict[int, int] = {}
        i = 0
        while i < len(prims):
            new_index[i] = len(out)
            stop = min([t for t in targets if t > i] + [len(prims)])  # a run never spans a jump target
            run = self._run_at(a, prims, keys, i, stop)
            if run is None:
                out.append(prims[i])
                i += 1
            else:
                out.append(m.Primitive(VECTOR_OP, [m.Const(len(self.runs))]))
                self.runs.append(run)
                i += len(run.prims)
        if len(out) == len(prims):
            return a
        new_index[len(prims)] = len(out)
        for k, prim in enumerate(out):
            if prim.op in _JUMPS:
                params = list(prim.parameters)
                target = params[_JUMPS[prim.op]]
                assert isinstance(target, m.Const)
                params[_JUMPS[prim.op]] = m.Const(new_index[target.value])
                out[k] = m.Primitive(prim.op, params)
        return dataclasses.replace(a, primitives=out)

    def emit(self, run: int, ind: int) -> None:
        """Print run number `run` (the `_vector` primitive's parameter)."""
        self.runs[run].emit(ind)

    def _coarse_keys(self, prims: list[m.Primitive]) -> list[int]:
        """Per primitive, an int equal for primitives that may differ only in constants (negative: not vectorisable)."""
        interned: dict[tuple, int] = {}
        keys = []
        for n, prim in enumerate(prims):
            try:
                keys.append(interned.setdefault(_prim_sig(prim, self.o, []), len(interned)))
            except _Reject:
                keys.append(-1 - n)
        return keys

    def _run_at(self, a: m.Action, prims: list[m.Primitive], keys: list[int], i: int, n: int) -> _Run | None:
        """The longest vectorisable run in prims[i:n] starting at i, if any."""
        if keys[i] < 0 or n - i < MIN_GROUPS or self._refused >= MAX_REFUSED:
            return None
        best: _Run | None = None
        for length in range(1, (n - i) // MIN_GROUPS + 1):
            if keys[i + length] != keys[i]:
                continue
            first = keys[i:i + length]
            if min(first) < 0:
                break  # every longer group contains this unsupported primitive too
            groups = 1
            while i + (groups + 1) * length <= n and keys[i + groups * length:i + (groups + 1) * length] == first:
                groups += 1
            if groups < MIN_GROUPS or best is not None and groups * length <= len(best.prims):
                continue
            groups, steps = self._affine_groups(prims, i, length, groups)
            if groups < MIN_GROUPS or best is not None and groups * length <= len(best.prims):
                continue
            try:
                best = _Run(self.o, self.v, self.s, a, prims[i:i + groups * length], length, groups, steps, self._reads())
            except _Reject:
                self._refused += 1
                continue
        return best

    def _reads(self) -> dict[m.Field, int]:
        """The program's field_reads, counted at the first run analysed."""
        if self.reads is None:
            self.reads = m.field_reads(self.o.p)
        return self.reads

    def _sig(self, prim: m.Primitive) -> tuple[tuple, list[tuple[object, int]]]:
        """A primitive's shape and its constants (_prim_sig), computed once per action."""
        got = self._sigs.get(id(prim))
        if got is None:
            consts: list[tuple[object, int]] = []
            got = self._sigs[id(prim)] = (_prim_sig(prim, self.o, consts), consts)
        return got

    def _affine_groups(self, prims: list[m.Primitive], i: int, length: int, most: int) -> tuple[int, dict[int, int]]:
        """How many groups from i are group 0 with affinely varying constants, and each constant's step
        {id(node of group 0): d}."""
        base: tuple | None = None
        nodes: list[object] = []
        values0: list[int] = []
        steps: list[int] = []
        count = 0
        for k in range(most):
            sigs = [self._sig(prim) for prim in prims[i + k * length:i + (k + 1) * length]]
            shape = tuple(sig for sig, _ in sigs)
            consts = [c for _, cs in sigs for c in cs]
            values = [v for _, v in consts]
            if k == 0:
                base, nodes, values0 = shape, [node for node, _ in consts], values
            elif shape != base:
                break
            elif k == 1:
                steps = [v - v0 for v, v0 in zip(values, values0)]
            elif any(v != v0 + d * k for v, v0, d in zip(values, values0, steps)):
                break
            count = k + 1
        table = {id(node): d for node, d in zip(nodes, steps)}
        if len(table) < len({(id(node), d) for node, d in zip(nodes, steps)}):
            return 0, {}  # one value object in two places that step differently
        return count, table


def _without_round_trips(body: list[str]) -> list[str]:
    """`body` where `X = _np.array(S, dtype=_np.int64)` then `Y = X.tolist()`, X read nowhere else, is
    `Y = S`: a plain copy of lanes (a list slice is already a new list of ints)."""
    out: list[str] = []
    for line in body:
        name, _, code = line.partition(" = ")
        if out and code.endswith(".tolist()"):
            array = code[:-len(".tolist()")]
            prev_name, _, prev_code = out[-1].partition(" = ")
            if prev_name == array and prev_code.startswith("_np.array(") and prev_code.endswith(", dtype=_np.int64)") \
                    and sum(len(re.findall(rf"\b{array}\b", x)) for x in body) == 2:
                out[-1] = f"{name} = {prev_code[len('_np.array('):-len(', dtype=_np.int64)')]}"
                continue
        out.append(line)
    return out


class _Run:
    """One candidate run: analysed (raises _Reject) and its vector code printed on creation."""

    def __init__(self, o: PyModule, v: PyValues, s: PyPrimitives, action: m.Action, prims: list[m.Primitive],
                 length: int, groups: int, steps: dict[int, int], reads: dict[m.Field, int]):
        self.o, self.v, self.s = o, v, s
        self.action = action
        self.prims = prims
        self.G = groups
        self.steps = steps
        self.template = prims[:length]
        self.pre: list[str] = []  # before the `if`: register index bases
        self.conds: list[str] = []  # all must hold for the vector branch
        self.body: list[str] = []  # the vector branch
        self.bases: dict[str, str] = {}  # index base code -> its temporary
        self.cache: dict[object, _Val] = {}  # storage key -> its lanes' current value
        self.temps: dict[int, _Val] = {}  # fixed slot written per lane -> its current value
        self.memo: dict[str, str] = {}  # code reading no storage -> the temporary holding it
        self.quiet = False  # while only a value's range and affine form matter: print nothing
        self._survey()
        for prim in self.template:
            self._primitive(prim)
        mine = m.field_reads(self.prims)
        for slot, val in self.temps.items():
            if self._read_elsewhere(self.slot_fields[slot], reads, mine):
                self.body.append(f"F[{slot}] = {f'int({val.code}[-1])' if val.lane else val.code}")
        self.body = _without_round_trips(self.body)

    def step(self, node: object) -> int:
        return self.steps.get(id(node), 0)

    def _read_elsewhere(self, f: m.Field, reads: dict[m.Field, int], mine: dict[m.Field, int]) -> bool:
        """Whether anything outside the run may read field `f` (`reads`, `mine`: the program's and the run's
        field_reads): after the vector code a temporary needs its last lane's value only then. A local of the
        lowering (user metadata) that only this run names is dead after it; standard metadata and headers are
        read by the flow itself."""
        header = self.o.p.header(f.header)
        if not header.metadata or f.header == "standard_metadata" or reads.get(m.Field(f.header, "*")):
            return True
        return reads.get(f, 0) > mine.get(f, 0)

    # ------------------------------------------------------------------ which storage the run touches

    def _survey(self) -> None:
        """Classify the slots and registers the template touches, or reject the run (module docstring)."""
        self.reductions: dict[int, m.Value] = {}  # fixed slot -> the per-lane operand ORed into it
        first: dict[int, str] = {}  # fixed slot -> "r" or "w", its first access
        fixed: dict[int, int] = {}  # fixed slot -> accesses
        written: set[int] = set()
        lanes: dict[tuple[int, int], bool] = {}  # per-lane field (lane 0's slot, d) -> whether written
        registers: dict[str, set[tuple]] = {}  # register -> mappings (code-free: node ids of the index consts)
        written_registers: set[str] = set()

        self.slot_fields: dict[int, m.Field] = {}  # fixed slot -> the field it holds

        def touch(v: m.Value | None, write: bool = False) -> None:
            if isinstance(v, m.Field):
                slot, _ = self.o.L.field_slot(v)
                d = self.step(v)
                if d < 0:
                    raise _Reject("a field stepping backwards")
                if d:
                    lanes[(slot, d)] = lanes.get((slot, d), False) or write
                    return
                first.setdefault(slot, "w" if write else "r")
                self.slot_fields[slot] = v
                fixed[slot] = fixed.get(slot, 0) + 1
                if write:
                    written.add(slot)
            elif isinstance(v, m.RegisterCell):
                registers.setdefault(v.name, set()).add(self._mapping_key(v.index))
                touch(v.index)
            elif isinstance(v, m.Expr):
                for x in (v.left, v.right, v.cond):
                    touch(x)

        for prim in self.template:
            ps = prim.parameters
            if prim.op in ("assign", "modify_field"):
                red = self._reduction(ps[0], ps[1])
                if red is not None:
                    self.reductions[red[0]] = red[1]
                touch(ps[1])
                touch(ps[0], write=True)
            elif prim.op == "register_read":
                reg = self.v.named(ps[1], "register_array")
                registers.setdefault(reg, set()).add(self._mapping_key(ps[2]))
                touch(ps[2])
                touch(ps[0], write=True)
            else:  # register_write
                reg = self.v.named(ps[0], "register_array")
                registers.setdefault(reg, set()).add(self._mapping_key(ps[1]))
                written_registers.add(reg)
                touch(ps[1])
                touch(ps[2])
        for reg in written_registers:
            if len(registers[reg]) > 1:
                raise _Reject("a written register accessed with two index mappings")
        for slot in written:
            if slot in self.reductions:
                if fixed[slot] != 2:
                    raise _Reject("a reduction target touched elsewhere in the run")
            elif first[slot] != "w":
                raise _Reject("a slot read before the run writes it")
        lane_slots = {key: set(range(key[0], key[0] + key[1] * self.G, key[1])) for key in lanes}
        for key, write in lanes.items():
            others = set(fixed).union(*(slots for k, slots in lane_slots.items() if k != key))
            if (write or lane_slots[key] & written) and lane_slots[key] & others:
                raise _Reject("a per-lane field that other accesses overlap")
        self.written = written

    def _mapping_key(self, index: m.Value | None) -> tuple:
        consts: list[tuple[object, int]] = []
        return (_sig(index, self.o, consts), tuple((v, self.step(node)) for node, v in consts))

    def _reduction(self, dst: m.Value, src: m.Value | None) -> tuple[int, m.Value] | None:
        """(slot, per-lane operand) if `dst = (dst | e) & mask` (or without the mask) into a fixed unsigned slot."""
        if not isinstance(dst, m.Field) or self.step(dst):
            return None
        slot, ftype = self.o.L.field_slot(dst)
        if ftype is None or ftype.signed:
            return None
        if isinstance(src, m.Expr) and src.op == "&" and isinstance(src.right, m.Const) and not self.step(src.right):
            src = src.left
        if not (isinstance(src, m.Expr) and src.op == "|"):
            return None
        for mine, other in ((src.left, src.right), (src.right, src.left)):
            if isinstance(mine, m.Field) and not self.step(mine) and self.o.L.field_slot(mine)[0] == slot:
                assert other is not None
                return slot, other
        return None

    # ------------------------------------------------------------------ vector code

    def _tmp(self, code: str) -> str:
        """A temporary holding `code`; computed once when `code` reads no storage (arrays are never changed)."""
        if self.quiet:
            return f"({code})"
        name = self.memo.get(code)
        if name is None:
            name = self.o.tmp("v")
            self.body.append(f"{name} = {code}")
            if "_np.array(" not in code:
                self.memo[code] = name
        return name

    def _const(self, node: m.Const) -> _Val:
        d = self.step(node)
        if not d:
            return _ranged(str(node.value), False, node.value, node.value)
        values = [node.value + d * k for k in range(self.G)]
        name = self.o.tmp("V")
        self.o.ns[name] = np.array(values, dtype=np.int64)
        val = _ranged(name, True, min(values), max(values))
        val.affine = ("0", node.value, d, None)
        return val

    def _slice(self, first: int, d: int) -> str:
        return f"{first}:{first + d * self.G}" + (f":{d}" if d != 1 else "")

    def value(self, v: m.Value | None) -> _Val:
        """The vector code of a value (module docstring: what may appear)."""
        if isinstance(v, m.Field):
            slot, ftype = self.o.L.field_slot(v)
            if ftype is None:
                return _ranged(f"F[{slot}]", False, 0, 1, boolean=True)
            assert ftype.width is not None
            lo, hi = _width_range(ftype.width, ftype.signed)
            d = self.step(v)
            if not d:
                return self.temps.get(slot) or _ranged(f"F[{slot}]", False, lo, hi)
            key = ("F", slot, d)
            if key not in self.cache:
                self.cache[key] = _ranged(self._tmp(f"_np.array(F[{self._slice(slot, d)}], dtype=_np.int64)"),
                                          True, lo, hi)
            return self.cache[key]
        if isinstance(v, m.Const):
            return self._const(v)
        if isinstance(v, m.BoolConst):
            return _ranged(str(v.value), False, 0, 1, boolean=True)
        if isinstance(v, m.ActionParam):
            return _ranged(f"a{v.index}", False, 0, (1 << self.action.runtime_data[v.index][1]) - 1)
        if isinstance(v, m.RegisterCell):
            return self._register_read(v.name, v.index)
        if isinstance(v, m.Expr):
            val = self._expr(v)
            if val.lane and not val.code.isidentifier():  # computed once, however often the template names it
                val.code = self._tmp(val.code)
            return val
        raise _Reject(f"a {type(v).__name__} per lane")

    def _expr(self, e: m.Expr) -> _Val:
        op = e.op
        if op in ("two_comp_mod", "sat_cast", "usat_cast"):
            a = self.value(e.left)
            if not isinstance(e.right, m.Const) or self.step(e.right) or not 0 < e.right.value <= 62:
                raise _Reject(f"{op} to a varying or wide width")
            lo, hi = _width_range(e.right.value, op != "usat_cast")
            if lo <= a.lo and a.hi <= hi:
                return _ranged(a.code, a.lane, a.lo, a.hi)
            if op == "two_comp_mod":
                code = _signed(a, e.right.value)
            else:
                code = f"_np.minimum(_np.maximum({a.code}, {lo}), {hi})" if a.lane else f"min(max({a.code}, {lo}), {hi})"
            return _ranged(f"({code})", a.lane, lo, hi)
        if op == "?":
            c, a, b = self.value(e.cond), self.value(e.left), self.value(e.right)
            lane = c.lane or a.lane or b.lane
            code = f"_np.where({c.code}, {a.code}, {b.code})" if lane else f"({a.code} if {c.code} else {b.code})"
            return _ranged(code, lane, min(a.lo, b.lo), max(a.hi, b.hi), a.boolean and b.boolean)
        if e.left is None:  # unary
            a = self.value(e.right)
            if a.boolean != (op in ("not", "b2d")):
                raise _Reject(f"{op} of a {'boolean' if a.boolean else 'number'}")
            if op == "not" or op == "d2b":
                code = (f"(~{a.code})" if a.lane else f"(not {a.code})") if op == "not" else f"({a.code} != 0)"
                return _ranged(code, a.lane, 0, 1, boolean=True)
            if op == "b2d":
                return _ranged(f"{a.code}.astype(_np.int64)" if a.lane else f"int({a.code})", a.lane, 0, 1)
            if op == "~":
                return _ranged(f"(~{a.code})", a.lane, -a.hi - 1, -a.lo - 1)
            if op in ("-", "neg"):
                return _ranged(f"(-{a.code})", a.lane, -a.hi, -a.lo)
            raise _Reject(f"unary {op}")
        a, b = self.value(e.left), self.value(e.right)
        lane = a.lane or b.lane
        if op in ("and", "or") and not (a.boolean and b.boolean) or op in ("+", "-", "*") and (a.boolean or b.boolean):
            raise _Reject(f"{op} of these operand types")
        if op in _BOOL_OPS:
            return _ranged(f"({a.code} {_NUMPY_BOOL.get(op, op)} {b.code})", lane, 0, 1, boolean=True)
        if op == "+":
            val = _ranged(f"({a.code} + {b.code})", lane, a.lo + b.lo, a.hi + b.hi)
            if a.affine is not None and a.affine[3] is None and self._pure(e.right):  # E + c_k
                val.affine = (f"({a.affine[0]} + {b.code})", a.affine[1], a.affine[2], None)
            elif b.affine is not None and b.affine[3] is None and self._pure(e.left):
                val.affine = (f"({a.code} + {b.affine[0]})", b.affine[1], b.affine[2], None)
            return val
        if op == "-":
            return _ranged(f"({a.code} - {b.code})", lane, a.lo - b.hi, a.hi - b.lo)
        if op == "*":
            products = [x * y for x in (a.lo, a.hi) for y in (b.lo, b.hi)]
            return _ranged(f"({a.code} * {b.code})", lane, min(products), max(products))
        if op in ("&", "|", "^"):
            return self._bitwise(op, a, b, lane, e.right)
        if op == "<<" and self._pure(e) and isinstance(e.right, m.Const) and 0 <= e.right.value <= 32:
            return _ranged(f"({a.code} << {e.right.value})", False, a.lo << e.right.value, a.hi << e.right.value)
        raise _Reject(f"operator {op} per lane")

    def _pure(self, v: m.Value | None) -> bool:
        """The same in every lane and not written by the run: computable once before it."""
        if isinstance(v, m.Field):
            return not self.step(v) and self.o.L.field_slot(v)[0] not in self.written
        if isinstance(v, m.Const):
            return not self.step(v)
        if isinstance(v, m.Expr):
            return all(x is None or self._pure(x) for x in (v.left, v.right, v.cond))
        return isinstance(v, (m.BoolConst, m.ActionParam))

    def _bitwise(self, op: str, a: _Val, b: _Val, lane: bool, right: m.Value | None) -> _Val:
        if op == "&" and max(a.lo, b.lo) >= 0:  # ANDed with a non-negative value: within it
            lo, hi = 0, min(x.hi for x in (a, b) if x.lo >= 0)
        elif min(a.lo, b.lo) >= 0:
            lo, hi = 0, (1 << max(a.hi, b.hi).bit_length()) - 1
        else:
            bits = max(abs(a.lo), abs(b.lo), a.hi, b.hi).bit_length()
            lo, hi = -(1 << bits), (1 << bits) - 1
        if op == "&" and isinstance(right, m.Const) and not self.step(right) and 0 <= a.lo and a.hi <= right.value \
                and right.value & (right.value + 1) == 0:
            val = _ranged(a.code, a.lane, a.lo, a.hi, a.boolean)  # the mask keeps every value it can be
        else:
            val = _ranged(f"({a.code} {op} {b.code})", lane, lo, hi, a.boolean and b.boolean)
        if op == "&" and a.affine is not None and a.affine[3] is None and isinstance(right, m.Const) \
                and not self.step(right):
            val.affine = (*a.affine[:3], right.value)
        return val

    def _index(self, reg: str, index: m.Value | None) -> tuple[str, int, int]:
        """(list slice of the lanes' cells, base temporary, d) of a register index `E + c_k`; adds the bounds check."""
        self.quiet = True
        val = self.value(index)
        self.quiet = False
        if val.affine is None or val.affine[2] <= 0:
            raise _Reject("a register index that is not E + c_k with c stepping up")
        base_code, c0, d, mask = val.affine
        size = self.o.state.registers[reg].schema.size
        if mask is not None and (mask & (mask + 1) or size - 1 > mask):
            raise _Reject("a register index mask that could wrap inside the register")
        base = self.bases.get(base_code)
        if base is None:
            base = self.bases[base_code] = self.o.tmp("e")
            self.pre.append(f"{base} = {base_code}")
        first, last = c0, c0 + d * (self.G - 1)
        self.conds.append(f"0 <= {base} + {first} and {base} + {last} < {size}")
        stop = f"{base} + {c0 + d * self.G}"
        return f"{base} + {c0}:{stop}" + (f":{d}" if d != 1 else ""), first, d

    def _register_read(self, reg: str, index: m.Value | None) -> _Val:
        cells, c0, d = self._index(reg, index)
        key = ("R", reg, cells)
        if key not in self.cache:
            values = self.o.global_of("_R", self.o.state.registers[reg].values)
            width = self.o.state.registers[reg].schema.bitwidth
            self.cache[key] = _ranged(self._tmp(f"_np.array({values}[{cells}], dtype=_np.int64)"), True,
                                      0, (1 << width) - 1)
        return self.cache[key]

    def _lanes(self, val: _Val) -> str:
        """Python list code of a value's lanes (an invariant repeated)."""
        return self._tmp(f"{val.code}.tolist()") if val.lane else f"[{val.code}] * {self.G}"

    def _stored(self, val: _Val, width: int, signed: bool) -> _Val:
        """`val` as written into a field/cell of `width` bits (the scalar code's truncation)."""
        if val.boolean:
            val = _ranged(f"{val.code}.astype(_np.int64)" if val.lane else f"int({val.code})", val.lane, 0, 1)
        lo, hi = _width_range(width, signed)
        if lo <= val.lo and val.hi <= hi:
            code = val.code
            lo, hi = val.lo, val.hi
        elif signed:
            code = _signed(val, width)
        else:
            code = f"({val.code}) & {(1 << width) - 1:#x}"
        if val.lane and not code.isidentifier():
            code = self._tmp(code)
        elif code is not val.code:
            code = f"({code})"
        out = _ranged(code, val.lane, lo, hi)
        if val.affine is not None and not signed and val.affine[3] in (None, (1 << width) - 1):
            out.affine = (*val.affine[:3], (1 << width) - 1)  # an index p4c's JSON keeps in a field first
        return out

    def _store(self, dst: m.Value, val: _Val) -> None:
        if not isinstance(dst, m.Field):
            raise _Reject("a write to something other than a field")
        slot, ftype = self.o.L.field_slot(dst)
        if ftype is None or ftype.width is None:
            raise _Reject("a write to a validity or varbit field")
        val = self._stored(val, ftype.width, ftype.signed)
        d = self.step(dst)
        if d:
            self.body.append(f"F[{self._slice(slot, d)}] = {self._lanes(val)}")
            self.cache[("F", slot, d)] = val
        elif val.lane:
            self.temps[slot] = val
        else:
            self.temps[slot] = _ranged(self._tmp(val.code), False, val.lo, val.hi)

    def _primitive(self, prim: m.Primitive) -> None:
        ps = prim.parameters
        if prim.op in ("assign", "modify_field"):
            dst = ps[0]
            slot = self.o.L.field_slot(dst)[0] if isinstance(dst, m.Field) and not self.step(dst) else None
            if slot in self.reductions and isinstance(dst, m.Field):
                operand: m.Value | None = self.reductions[slot]
                while isinstance(operand, m.Expr) and operand.op == "&" and isinstance(operand.right, m.Const) \
                        and operand.right.value & 1 and isinstance(operand.left, m.Expr) and operand.left.op == "b2d":
                    operand = operand.left  # (b2d(c) & odd mask) is b2d(c): 0 or 1
                if isinstance(operand, m.Expr) and operand.op == "b2d":
                    operand = operand.right  # OR-reducing 0/1 is any() of the booleans
                e = self.value(operand)
                if e.lo < 0:
                    raise _Reject("an OR reduction of negative values")
                reduce = f"{e.code}.any()" if e.hi <= 1 else f"_np.bitwise_or.reduce({e.code})"
                term = f"int({reduce})" if e.lane else f"int({e.code})"
                width = self.o.L.width(dst)
                self.body.append(f"F[{slot}] = (F[{slot}] | {term}) & {(1 << width) - 1:#x}")
            else:
                self._store(ps[0], self.value(ps[1]))
        elif prim.op == "register_read":
            self._store(ps[0], self._register_read(self.v.named(ps[1], "register_array"), ps[2]))
        else:  # register_write
            reg = self.v.named(ps[0], "register_array")
            cells, _, _ = self._index(reg, ps[1])
            val = self._stored(self.value(ps[2]), self.o.state.registers[reg].schema.bitwidth, False)
            self.body.append(f"{self.o.global_of('_R', self.o.state.registers[reg].values)}[{cells}] = "
                             f"{self._lanes(val)}")
            self.cache[("R", reg, cells)] = val

    def emit(self, ind: int) -> None:
        """Print the run: the vector branch behind its bounds check, the scalar code as the fallback."""
        for line in self.pre:
            self.o.emit(line, ind)
        conds = list(dict.fromkeys(self.conds))
        if conds:
            self.o.emit(f"if {' and '.join(conds)}:", ind)
        for line in self.body:
            self.o.emit(line, ind + bool(conds))
        if conds:
            self.o.emit("else:", ind)
            for prim in self.prims:
                self.s.primitive(prim, ind + 1)


