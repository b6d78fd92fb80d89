"""The primitives of the lowered form (an action's, a parser state's or the deparser's) as either back end prints
them: the language-neutral walk (an extern's primitive printed by its module, the header and stack operations,
an action's jumps), over the language's own statements (python_primitives.py, c_primitives.py). An extern
module's hooks are handed this part (`pr`): its values are `pr.v`, the lines and names `pr.o`."""
from __future__ import annotations

from collections.abc import Callable

from p4target.backends.code import Code
from p4target.backends.values import Values
from p4target.extern_registry import Extern, for_primitive
from p4target.lowered import model as m


class Primitives:
    """Primitives printed as statements; a back end's subclass defines the class attributes and the methods that
    raise NotImplementedError here."""

    NOT_SET = ""  # a hidden slot's "not set" (a clone without a field list)
    NO_FIELD_LIST = ""  # resubmit/recirculate without a field list
    CLONE = {"I2E": "", "E2E": ""}  # the hidden clone_type slot's values

    def __init__(self, o: Code, v: Values):
        self.o, self.v = o, v
        self.pseudo: dict[str, Callable[[list[m.Value], int], None]] = {}  # a printer's own primitives, by op

    def set_slots(self, assignments: list[tuple[int | str, str]], ind: int) -> None:
        """Print slot = value for each pair."""
        raise NotImplementedError

    def bind(self, code: str, ind: int) -> str:
        """A name for the value of `code`, computed once here (or `code` itself where that is as cheap)."""
        raise NotImplementedError

    def log(self, msg: str, values: list[str], ind: int) -> None:
        """Print log_msg's line: `msg` with its `{}`s filled by values."""
        raise NotImplementedError

    def store(self, dst: m.Value, code: str, ind: int) -> None:
        """Print a write of `code` into a field, truncated to its width."""
        raise NotImplementedError

    def label(self, index: int, ind: int) -> int:
        """Print the place primitive `index` of an action starts (a jump's target); the body's indentation."""
        raise NotImplementedError

    def jump(self, cond: str | None, target: m.Value, ind: int) -> None:
        """Print a jump to primitive `target`, when `cond` is zero (always when None)."""
        raise NotImplementedError

    def fail_unless(self, cond: str, what: str, ind: int) -> None:
        """Print: the packet is dropped with an error ("`what` failed") unless `cond`."""
        raise NotImplementedError

    def copy(self, dst: str, src: str, n: int, ind: int) -> None:
        """Print a copy of `n` slots from `src` to `dst`."""
        raise NotImplementedError

    def invalidate_if_valid(self, base: str, others: list[int], ind: int) -> None:
        """Print: when header `base` is valid, the headers at `others` become invalid."""
        raise NotImplementedError

    def add_header(self, base: str, n: int, ind: int) -> str:
        """Print: header `base` (of `n` slots), unless valid, becomes valid with zero fields; a name for base."""
        raise NotImplementedError

    def p_assign(self, ps: list[m.Value], ind: int) -> None:
        raise NotImplementedError

    def primitive(self, prim: m.Primitive, ind: int) -> None:
        """An extern's primitive as its module (p4target.externs) prints it; the language's own (assign, header
        and stack operations, exit) as the `p_<op>` method here or in the back end prints it; a printer's own
        pseudo-primitive (`pseudo`) as it says."""
        self.o.current = prim
        ext = for_primitive(prim.op)
        if ext is not None:
            self.extern_primitive(ext, prim.op, prim.parameters, ind)
            return
        fn = getattr(self, "p_" + prim.op, None) or self.pseudo.get(prim.op)
        if fn is None:
            raise self.o.fail(f"primitive {prim.op} is not supported")
        fn(prim.parameters, ind)

    def extern_primitive(self, ext: Extern, op: str, ps: list[m.Value], ind: int) -> None:
        """Print extern primitive `op` in this back end's language (the module's `python` or `c`)."""
        raise NotImplementedError

    def p_assign_VL(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        assert isinstance(dst, m.Field) and isinstance(src, m.Field)
        dt, st = self.o.L.header_type(dst.header), self.o.L.header_type(src.header)
        (d, dtype), (s, stype) = self.v.field_lv(dst), self.v.field_lv(src)
        assert dtype is not None and stype is not None
        self.copy(d, s, min(self.o.L.chunks(dt, dtype), self.o.L.chunks(st, stype)), ind)
        self.set_slots([(self.o.L.base[dst.header] + self.o.L.offsets[dt.name][-1],
                         f"F[{self.o.L.base[src.header] + self.o.L.offsets[st.name][-1]}]")], ind)

    def p_assign_header(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        d = self.bind(self.v.header_base(dst), ind)
        self.copy(d, self.v.header_base(src), self.o.L.slots(self.o.L.header_type_of(src)), ind)
        self.after_valid_change(dst, d, ind)

    def p_assign_union(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        if not isinstance(dst, m.UnionRef):
            raise self.o.fail("assign_union needs header unions")
        for k, (_, tname) in enumerate(self.o.L.union_type[dst.name].headers):
            self.copy(self.v.union_members(dst)[k], self.v.union_members(src)[k], self.o.L.slots(self.o.L.types[tname]), ind)

    def p_assign_header_stack(self, ps: list[m.Value], ind: int) -> None:
        dst, src = ps
        assert isinstance(dst, m.StackRef) and isinstance(src, m.StackRef)
        size = self.o.L.size[self.o.L.stacks[dst.name][0]]
        for d, s in zip(self.o.L.stacks[dst.name], self.o.L.stacks[src.name]):
            self.copy(str(self.o.L.base[d]), str(self.o.L.base[s]), size, ind)
        self.set_slots([(self.o.L.next_index[dst.name], f"F[{self.o.L.next_index[src.name]}]")], ind)

    def after_valid_change(self, dst: m.Value, base: str, ind: int) -> None:
        """A union member made valid invalidates the union's other members, as BMv2 does."""
        if isinstance(dst, m.HeaderRef) and dst.name in self.o.L.member_of:
            others = [self.o.L.base[h] for h in self.o.L.unions[self.o.L.member_of[dst.name]] if h != dst.name]
            if others:
                self.invalidate_if_valid(base, others, ind)

    def p_add_header(self, ps: list[m.Value], ind: int) -> None:
        b = self.add_header(self.v.header_base(ps[0]), self.o.L.slots(self.o.L.header_type_of(ps[0])), ind)
        self.after_valid_change(ps[0], b, ind)

    def p_remove_header(self, ps: list[m.Value], ind: int) -> None:
        self.set_slots([(self.v.header_base(ps[0]), self.v.FALSE)], ind)

    def action_body(self, a: m.Action, ind: int) -> None:
        """An action's primitives, with p4c's jumps (its lowering of `if` and of loops inside an action) by index; a
        jump back counts against MAX_BACKWARD_JUMPS (jump_back)."""
        for i, prim in enumerate(a.primitives):
            body = self.label(i, ind)
            if prim.op in ("_jump", "_jump_if_zero"):
                cond = self.v.rv(prim.parameters[0]) if prim.op == "_jump_if_zero" else None
                target = prim.parameters[-1]
                if is_backward(prim, i):
                    self.jump_back(a, cond, target, body)
                else:
                    self.jump(cond, target, body)
            else:
                self.primitive(prim, body)

    def jump_back(self, a: m.Action, cond: str | None, target: m.Value, ind: int) -> None:
        """Print a jump back (unless `cond`) that drops the packet as a JumpLimit past MAX_BACKWARD_JUMPS of them in
        this run of action `a`."""
        raise NotImplementedError


def is_backward(prim: m.Primitive, index: int) -> bool:
    """Whether primitive `index` of an action is a jump to itself or an earlier primitive (a loop)."""
    target = prim.parameters[-1] if prim.op in ("_jump", "_jump_if_zero") else None
    return isinstance(target, m.Const) and target.value <= index


def has_backward_jump(a: m.Action) -> bool:
    return any(is_backward(prim, i) for i, prim in enumerate(a.primitives))
