"""The C printer's actions: an action's function, its jumps as labels and gotos, the slots only printed code
names held in C locals (see p4target/backends/c.py)."""
from __future__ import annotations

import collections
import re

from p4target.backends.c_module import MAX_BITS, CModule
from p4target.backends.c_primitives import CPrimitives
from p4target.backends.primitives import has_backward_jump
from p4target.constants import MAX_BACKWARD_JUMPS
from p4target.errors import JumpLimit
from p4target.lowered import model as m


class CActions:
    """Action functions."""

    def __init__(self, o: CModule, s: CPrimitives):
        self.o, self.s = o, s
        self._local_slots: set[int] | None = None  # see local_slots

    def action_fn(self, a: m.Action) -> str:
        return self.o.names("ac", a.id, a.name)

    def gen_action(self, a: m.Action) -> None:
        self.o.ctx = "action"
        self.o.param_widths = [width for _, width in a.runtime_data]
        self.o.param_offsets = [sum(-(-w // MAX_BITS) for w in self.o.param_widths[:i]) for i in range(len(a.runtime_data))]
        self.o.emit(f"static void {self.action_fn(a)}(pk_t *p, const u64 *A) {{", 0)
        self.o.emit("u64 *F = p->F; (void)F; (void)A;", 1)
        if has_backward_jump(a):  # it loops: count the jumps back (jump_back)
            self.o.jump_limits.append(str(JumpLimit(a.name, MAX_BACKWARD_JUMPS)))
            self.o.emit("u32 nback = 0;", 1)
        at, self.o.reg_locals = len(self.o.out), set()
        self.s.action_body(a, 0)
        self.o.emit(f"L{len(a.primitives)}: ;", 0)
        self.hold_in_locals(at)
        self.o.out[at:at] = [f"    u64 *const R{rid} = p->E->reg[{rid}];" for rid in sorted(self.o.reg_locals)]
        self.o.emit("}", 0)

    def hold_in_locals(self, at: int) -> None:
        """In the action printed from self.o.out[at:], the slots it names more than once that only printed code
        names (`local_slots`) become C locals: loaded on entry, stored back on every way out. The compiler
        cannot keep a slot in a register across a register-array store (both are u64 arrays that may
        alias); a local it can: aggnet's lanes_add runs its four temporaries through 32 lanes."""
        body = "\n".join(self.o.out[at:])
        if '"' in body:
            return  # a string (log_msg's format) could hold text like a slot or `return;`: the text is not rewritten
        names = collections.Counter(int(n) for n in re.findall(r"(?<![&\w])F\[(\d+)\]", body))
        held = sorted(slot for slot, n in names.items() if n > 1 and slot in self.local_slots()
                      and f"&F[{slot}]" not in body)
        if not held:
            return
        store = " ".join(f"F[{slot}] = l{slot};" for slot in held)
        pattern = re.compile(r"(?<![&\w])F\[(" + "|".join(map(str, held)) + r")\]")
        self.o.out[at:] = [pattern.sub(r"l\1", line).replace("return;", f"{{ {store} return; }}") for line in self.o.out[at:]]
        self.o.out.insert(at, "    u64 " + ", ".join(f"l{slot} = F[{slot}]" for slot in held) + ";")
        self.o.emit(store, 1)

    def local_slots(self) -> set[int]:
        """Slots no engine helper reads or writes behind the printed code: user metadata of at most 64 bits
        that no calculation, field list, learn list, checksum or extern instance names, in a header never
        named whole."""
        if self._local_slots is None:
            elsewhere = m.field_reads([self.o.p.calculations, self.o.p.learn_lists, self.o.p.field_lists, self.o.p.checksums,
                                       self.o.p.extern_instances, self.o.p.meter_arrays, self.o.p.counter_arrays,
                                       self.o.p.register_arrays, self.o.p.field_aliases, self.o.p.parse_vsets])
            whole = {f.header for f in m.field_reads(self.o.p) if f.field == "*"}
            self._local_slots = {
                self.o.L.field_slot(m.Field(h.name, f.name))[0] for h in self.o.p.headers
                if h.metadata and h.name != "standard_metadata" and h.name not in whole
                for f in self.o.L.header_type(h.name).fields
                if f.width is not None and f.width <= MAX_BITS and m.Field(h.name, f.name) not in elsewhere}
        return self._local_slots
