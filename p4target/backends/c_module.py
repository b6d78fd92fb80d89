"""The C program of one printing: the ids the control plane addresses it by (CProgram), the engine's arrays it
numbers, the C arrays of its stacks, and where code is printed (how it leaves on an error). Every part of the
C printer writes through it (p4target/backends/c.py composes them)."""
from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from p4target.backends.code import Code
from p4target.extern_registry import registered
from p4target.lowered import model as m
from p4target.lowered.schema import value_set_widths

MAX_BITS = 64
# how code leaves on an error, by where it is printed (the function's return type)
_LEAVE = {"parser": "L_PARSE_CHECK();", "action": "if (p->rc) return;", "node": "if (p->rc) return;",
          "table": "if (p->rc) return -1;", "deparser": "if (p->rc) return 0;"}


def value_set_cells(size: int, widths: Sequence[int]) -> int:
    """u64 cells of a value set in native memory: the member count, then each member's values of
    `widths` bits (one word each; a value wider than 64 bits one per 64-bit chunk, least significant first)."""
    return 1 + size * sum(max(1, -(-w // 64)) for w in widths)


@dataclass
class CProgram:
    """The generated C and what the Python side needs to address the engine's state."""

    source: str
    tables: dict[str, int] = field(default_factory=dict)  # control-plane name -> id
    actions: dict[str, int] = field(default_factory=dict)
    registers: dict[str, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    meters: dict[str, int] = field(default_factory=dict)
    digests: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)  # (name, field widths) by id: a field
    # wider than 64 bits comes as one word per 64-bit chunk, least significant first
    value_sets: dict[str, int] = field(default_factory=dict)  # -> register id (see value_set_cells)


def lookaheads(values: list[m.Value]) -> list[m.Lookahead]:
    """The lookaheads in `values` and their operands."""
    found: list[m.Lookahead] = []

    def walk(v: m.Value | None) -> None:
        if isinstance(v, m.Lookahead):
            found.append(v)
        elif isinstance(v, m.Expr):
            for x in (v.left, v.right, v.cond):
                walk(x)

    for v in values:
        walk(v)
    return found


class CModule(Code):
    """The program's ids, engine arrays and C arrays; the context code is printed in (see the module docstring)."""

    CHUNK_BITS = MAX_BITS

    def __init__(self, p: m.Program):
        super().__init__(p)
        self.ctx = "action"  # where code is printed: a key of _LEAVE
        self.reg_locals: set[int] = set()  # the registers the current action reads or writes (reg_cells)
        self.cp = CProgram("")
        for a in p.actions:
            self.cp.actions.setdefault(a.name, len(self.cp.actions))
        for pl in p.pipelines:
            for table in pl.tables:
                self.cp.tables[table.name] = len(self.cp.tables)
        self.reg_size = {r.name: r for r in p.register_arrays}
        for r in p.register_arrays:
            self.cp.registers[r.name] = len(self.cp.registers)
        self.extern_cells: list[int] = []  # then those an extern's own instances keep (see Extern.cells), in order
        self.extern_code: dict[Path, str] = {}  # the C of the externs whose primitives are printed (Extern.c_source)
        for ext in registered():
            for name, cells in ext.cells(p):
                self.cp.registers[name] = len(self.cp.registers)
                self.extern_cells.append(cells)
        self.vset_keys = {vs.name: value_set_widths(p, vs) for vs in p.parse_vsets}  # after the registers, as cells
        for vs in p.parse_vsets:
            self.cp.value_sets[vs.name] = self.cp.registers.setdefault(f"value_set {vs.name}", len(self.cp.registers))
        self.counter_size = {c.name: c.size for c in p.counter_arrays if not (c.is_direct and c.binding)}
        for name in self.counter_size:
            self.cp.counters[name] = len(self.cp.counters)
        self.meters = {mt.name: mt for mt in p.meter_arrays if not (mt.is_direct and mt.binding)}
        for name in self.meters:
            self.cp.meters[name] = len(self.cp.meters)
        self.cp.digests = [(ll.name, tuple(self.L.width(f) for f in ll.elements)) for ll in p.learn_lists]
        self.stack_arrays: dict[str, list[int]] = {}
        self.jump_limits: list[str] = []  # per action with a jump back (its loop index): its JumpLimit message
        self.may_fail = False  # code printed since the last check() can set p->rc
        self.param_widths: list[int] = []  # the current action's parameters
        self.param_offsets: list[int] = []  # ... and where each starts in its engine words A[]
        widths = [f.width or 0 for t in p.header_types for f in t.fields]
        widths += [width for a in p.actions for _, width in a.runtime_data]
        widths += [look.width for parser in p.parsers for s in parser.parse_states
                   for look in lookaheads(s.transition_key + [x for op in s.parser_ops for x in op.parameters])]
        self.w_words = 2 * -(-max(widths + [MAX_BITS]) // MAX_BITS) + 1

    def check(self, ind: int) -> None:
        """After code that can set p->rc: leave the way the current context does."""
        if self.may_fail:
            self.emit(_LEAVE[self.ctx], ind)
        self.may_fail = False

    def stack(self, key: Hashable, name: str, headers: list[int]) -> str:
        """The C array of a stack's (or a union stack's member's: `key`) header bases."""
        arr = self.names("STK", key, name)
        self.stack_arrays[arr] = headers
        return arr

    def header_stack(self, name: str) -> str:
        """The C array of a header stack's bases and, one past its end, its scratch header (every user of a
        stack's array writes the same one: the last write would otherwise decide its length)."""
        return self.stack(name, name, [self.L.base[h] for h in self.L.stacks[name]] + [self.L.scratch[name]])

    def union_member_stack(self, stack: str, k: int) -> str:
        """The C array of the header bases of member `k` of each union of a union stack."""
        bases = [self.L.base[self.L.unions[un][k]] for un in self.L.union_stacks[stack]]
        return self.stack((stack, k), stack, bases)

    def field_slots(self, f: m.Field) -> range:
        """Every slot of a field (one per 64-bit chunk)."""
        slot, ftype = self.L.field_slot(f)
        t = self.L.header_type(f.header)
        return range(slot, slot + (1 if ftype is None else self.L.chunks(t, ftype)))
