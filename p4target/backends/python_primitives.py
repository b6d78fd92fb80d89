"""The Python printer's primitives: assignments, header and stack operations, logging, checks and an action's
jumps printed as Python statements (an extern's primitives: its module, handed this part)."""
from __future__ import annotations

from p4target.backends.primitives import Primitives
from p4target.backends.python_module import PyModule
from p4target.backends.python_values import PyValues
from p4target.constants import MAX_BACKWARD_JUMPS
from p4target.extern_registry import Extern
from p4target.lowered import model as m

_BOOL_OPS = frozenset({"==", "!=", ">", ">=", "<", "<=", "and", "or", "not", "d2b", "valid", "valid_union"})


class PyPrimitives(Primitives):
    """Primitives printed as Python statements."""

    NOT_SET, NO_FIELD_LIST, CLONE = "None", "0", {"I2E": "'I2E'", "E2E": "'E2E'"}

    def __init__(self, o: PyModule, v: PyValues):
        super().__init__(o, v)
        self.o: PyModule = o
        self.v: PyValues = v

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        slot, ftype, width = self.v.target(dst)
        if ftype.signed:
            self.o.emit(f"F[{slot}] = _sx({code}, {width})", ind)
        else:
            self.o.emit(f"F[{slot}] = ({code}) & {(1 << width) - 1:#x}", ind)

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        if isinstance(ps[1], m.BoolConst) and not self.v.target(ps[0])[1].signed:
            self.o.emit(f"F[{self.v.target(ps[0])[0]}] = {int(ps[1].value)}", ind)
        elif isinstance(ps[1], m.Expr) and ps[1].op in _BOOL_OPS:
            self.store(ps[0], f"(1 if {self.v.rv(ps[1])} else 0)", ind)
        elif isinstance(ps[0], m.Field) and self.v.unchanged(ps[1], *self.v.target(ps[0])[1:]):
            self.o.emit(f"F[{self.v.target(ps[0])[0]}] = {self.v.rv(ps[1])}", ind)
        else:
            self.store(ps[0], self.v.rv(ps[1]), ind)

    p_modify_field = p_assign

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        ext.python(self, op, ps, ind)

    def bind(self, code: str, ind: int) -> str:
        return code

    def log(self, msg: str, values: list[str], ind: int) -> None:
        self.o.emit(f"_LOG.append(_logf({self.o.text(msg)}, ({''.join(v + ', ' for v in values)})))", ind)

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        self.o.emit(f"_copy(F, {dst}, {src}, {n})", ind)

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        self.o.emit(f"if F[{base}]: " + "; ".join(f"F[{o}] = False" for o in others), ind)

    def add_header(self, base: str, n: int, ind: int) -> str:
        self.o.emit(f"_b = {base}", ind)
        self.o.emit(f"if not F[_b]: F[_b:_b + {n}] = [True] + [0] * {n - 1}", ind)
        return "_b"

    def _stack_shift(self, ps: list[m.Value], ind: int, push: bool) -> None:
        stack, count = ps
        assert isinstance(stack, m.StackRef)
        headers = self.o.L.stacks[stack.name]
        size = self.o.L.size[headers[0]]
        bases = [self.o.L.base[h] for h in headers]
        n = self.v.rv(count)
        t = self.o.tmp()
        self.o.emit(f"{t} = {n}", ind)
        nxt = self.o.L.next_index[stack.name]
        arr = self.o.stack_bases(stack.name)
        if push:
            self.o.emit(f"for _i in range({len(bases) - 1}, -1, -1):", ind)
            self.o.emit(f"if _i >= {t}: _copy(F, {arr}[_i], {arr}[_i - {t}], {size})", ind + 1)
            self.o.emit(f"else: F[{arr}[_i]] = False", ind + 1)
            self.o.emit(f"F[{nxt}] = min(F[{nxt}] + {t}, {len(bases)})", ind)
        else:
            self.o.emit(f"for _i in range({len(bases)}):", ind)
            self.o.emit(f"if _i + {t} < {len(bases)}: _copy(F, {arr}[_i], {arr}[_i + {t}], {size})", ind + 1)
            self.o.emit(f"else: F[{arr}[_i]] = False", ind + 1)
            self.o.emit(f"F[{nxt}] = max(F[{nxt}] - {t}, 0)", ind)

    def p_push(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=True)

    def p_pop(self, ps: list[m.Value], ind: int) -> None:
        self._stack_shift(ps, ind, push=False)

    def p_exit(self, ps: list[m.Value], ind: int) -> None:
        self.o.emit(f"F[{self.o.L.hidden['exit']}] = True; return", ind)

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        self.o.emit(f"if not {cond}: raise _PacketError({self.o.text(what + ' failed' + self.o.where())})", ind)

    def meter_amount(self, kind: str) -> str:
        return "1" if kind == "packets" else f"F[{self.o.L.sm['packet_length']}]"

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        self.o.emit("; ".join(f"F[{slot}] = {value}" for slot, value in assignments), ind)

    def label(self, index: int, ind: int) -> int:
        if index:
            self.o.emit(f"pc = {index}", ind + 1)  # the primitive before falls through to this one
        self.o.emit(f"if pc == {index}:", ind)
        return ind + 1

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        self.o.emit(f"{'' if cond is None else f'if not {cond}: '}pc = {self.v.rv(target)}; continue", ind)

    def jump_back(self, a: m.Action, cond: str | None, target: m.Value, ind: int) -> None:
        if cond is not None:
            self.o.emit(f"if not {cond}:", ind)
            ind += 1
        self.o.emit("nback += 1", ind)
        self.o.emit(f"if nback > {MAX_BACKWARD_JUMPS}: raise _JumpLimit({self.o.text(a.name)}, {MAX_BACKWARD_JUMPS})", ind)
        self.o.emit(f"pc = {self.v.rv(target)}; continue", ind)
