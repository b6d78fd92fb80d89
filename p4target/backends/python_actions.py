"""The Python printer's actions: an action's function, p4c's jumps printed back as if/else where they nest (else, and
for loops, as a state machine), and the stores a rerolled or later primitive makes dead left out (see
p4target/backends/python.py)."""
from __future__ import annotations

from p4target.backends.layout import Unsupported
from p4target.backends.primitives import has_backward_jump
from p4target.backends.python_module import PyModule
from p4target.backends.python_primitives import PyPrimitives
from p4target.backends.python_values import PyValues
from p4target.backends.vectorize import VECTOR_OP, Vectorizer
from p4target.lowered import model as m


class PyActions:
    """Action functions."""

    def __init__(self, o: PyModule, v: PyValues, s: PyPrimitives, vec: Vectorizer | None):
        self.o, self.v, self.s, self.vec = o, v, s, vec
        self.dead: set[int] = set()  # the primitives of the action being printed left out (dead_stores)

    def action_fn(self, a: m.Action) -> str:
        return self.o.names("ac", a.id, a.name)

    def gen_action(self, a: m.Action) -> None:
        if self.vec is not None:
            a = self.vec.reroll(a)
        args = "".join(f", a{i}" for i in range(len(a.runtime_data)))
        self.o.param_widths = [width for _, width in a.runtime_data]
        self.o.emit(f"def {self.action_fn(a)}(F{args}):", 0)
        # p4c lowers `if` inside an action to jumps; printed back as if/else where they nest as an `if` does
        printed = len(self.o.out)
        self.dead = self.dead_stores(a.primitives)
        done = self.structured(a.primitives, 0, len(a.primitives), 1)
        self.dead = set()
        if done:
            self.o.emit("return", 1)
            return
        del self.o.out[printed:]
        # other jumps (loops among them): a little state machine over primitive indexes, one flat `if pc == I` per
        # primitive falling through to the next (an elif chain nests too deep for Python's compiler); a jump sets
        # pc and starts over, one back also counts in nback (MAX_BACKWARD_JUMPS)
        self.o.emit("pc = nback = 0" if has_backward_jump(a) else "pc = 0", 1)
        self.o.emit("while True:", 1)
        self.s.action_body(a, 2)
        self.o.emit("return", 3)
        self.o.emit("return", 2)

    def structured(self, prims: list[m.Primitive], lo: int, hi: int, ind: int) -> bool:
        """Print prims[lo:hi] with p4c's jump patterns as if/else: `_jump_if_zero(c, T)` then-part
        [`_jump(E)`] else-part up to E; a jump to the action's end is `return`. False if a jump does not nest."""
        i = lo
        while i < hi:
            prim = prims[i]
            if prim.op == "_jump":
                if _target(prim, 0) != len(prims):
                    return False
                self.o.emit("return", ind)
            elif prim.op == "_jump_if_zero":
                t = _target(prim, 1)
                if not i < t <= hi:
                    return False
                then_end, end = t, t
                if t - 1 > i and prims[t - 1].op == "_jump":
                    e = _target(prims[t - 1], 0)
                    if t <= e <= hi:
                        then_end, end = t - 1, e
                cond: m.Value | None = prim.parameters[0]
                if isinstance(cond, m.Expr) and cond.op == "b2d":  # p4c's jump tests a bool made data
                    cond = cond.right
                self.o.emit(f"if {self.v.rv(cond)}:", ind)
                if not self.branch(prims, i + 1, then_end, ind + 1):
                    return False
                if end > t:
                    self.o.emit("else:", ind)
                    if not self.branch(prims, t, end, ind + 1):
                        return False
                i = end
                continue
            elif i not in self.dead:
                self.s.primitive(prim, ind)
            i += 1
        return True

    def dead_stores(self, prims: list[m.Primitive]) -> set[int]:
        """Indexes of field assignments that the primitives after them, before any jump, overwrite before they
        read the field (the lowering's zeroing of locals an action sets next): left out of the printed code."""
        effects = [self.slot_effects(prim) for prim in prims]
        dead = set()
        for i, effect in enumerate(effects):
            if effect is None or prims[i].op == VECTOR_OP:
                continue
            (slot,) = effect[1]
            for later in effects[i + 1:]:
                if later is None or slot in later[0]:
                    break
                if slot in later[1]:
                    dead.add(i)
                    break
        return dead

    def slot_effects(self, prim: m.Primitive) -> tuple[set[int], set[int]] | None:
        """(slots read, slots written first) of an assignment, register read or vector run; None for the rest."""
        if prim.op == VECTOR_OP:
            assert self.vec is not None and isinstance(prim.parameters[0], m.Const)
            run = self.vec.runs[prim.parameters[0].value]
            written, reads = run.written - set(run.reductions), m.field_reads(run.prims)
        elif prim.op in ("assign", "modify_field", "register_read") and isinstance(prim.parameters[0], m.Field):
            written, reads = {self.o.L.field_slot(prim.parameters[0])[0]}, m.field_reads(prim)
        else:
            return None
        if any(f.field == "*" for f in reads):
            return None  # a whole header: its slots are not told apart here
        read = {self.o.L.field_slot(f)[0] for f in reads}
        return (read - written if prim.op == VECTOR_OP else read), written

    def branch(self, prims: list[m.Primitive], lo: int, hi: int, ind: int) -> bool:
        printed = len(self.o.out)
        if not self.structured(prims, lo, hi, ind):
            return False
        if len(self.o.out) == printed:
            self.o.emit("pass", ind)
        return True


def _target(prim: m.Primitive, k: int) -> int:
    """The primitive index a jump's parameter k names."""
    target = prim.parameters[k]
    if not isinstance(target, m.Const):
        raise Unsupported(f"a {prim.op} whose target is not a constant")
    return target.value
