"""The parser of the lowered form (its parse states' operations and transitions) as either back end prints it:
the language-neutral walk, over the language's own (python_parser.py, c_parser.py, which also print the
checksums and the deparser)."""
from __future__ import annotations

from p4target.backends.code import Code
from p4target.backends.primitives import Primitives
from p4target.backends.values import Values
from p4target.lowered import model as m

MAX_PARSER_STATES = 1000  # states a packet may pass through before error.ParserTimeout, on both engines


class Parsing:
    """Parse states printed; a back end's subclass defines the methods that raise NotImplementedError here."""

    def __init__(self, o: Code, v: Values, s: Primitives):
        self.o, self.v, self.s = o, v, s

    def extract(self, target: m.Value, vl: str, ind: int) -> None:
        raise NotImplementedError

    def verify(self, cond: str, code: str, ind: int) -> None:
        """The parser rejects with error `code` unless `cond`."""
        raise NotImplementedError

    def advance(self, amount: str, bits: bool, ind: int) -> None:
        """The parser's cursor moves `amount` bits (`bits`) or bytes on."""
        raise NotImplementedError

    def set_key(self, parts: list[tuple[m.Value, int, int]], ind: int) -> None:
        """Print the transition key from its parts: (value, width, bit position)."""
        raise NotImplementedError

    def goto(self, state: str | None) -> str:
        """A statement going to parse state `state` (None: accept)."""
        raise NotImplementedError

    def case(self, value: int, mask: int | None, then: str) -> str:
        """A statement running `then` when the transition key matches value (under mask)."""
        raise NotImplementedError

    def reject(self, code: int) -> str:
        """A statement rejecting with error `code`."""
        raise NotImplementedError

    def vset_case(self, vset: str, parts: list[tuple[int, int]], then: str, ind: int) -> None:
        """Print: run `then` when the key's parts ((width, bit position) each) are a member of value set `vset`."""
        raise NotImplementedError

    def parser_op(self, op: m.ParserOp, ind: int) -> None:
        ps = op.parameters
        if op.op == "extract":
            self.extract(ps[0], "0", ind)
        elif op.op == "extract_VL":
            self.extract(ps[0], self.v.rv(ps[1]), ind)
        elif op.op == "set":
            self.s.p_assign(ps, ind)
        elif op.op == "verify":
            self.verify(self.v.rv(ps[0]), self.v.rv(ps[1]), ind)
        elif op.op in ("advance", "shift"):
            self.advance(self.v.rv(ps[0]), op.op == "advance", ind)
        elif op.op == "primitive":
            name = ps[0]
            assert isinstance(name, m.Named)
            self.s.primitive(m.Primitive(name.name, ps[1:]), ind)
        else:
            raise self.o.fail(f"parser operation {op.op} is not supported")

    def union_stack_member(self, target: m.UnionStackField) -> tuple[int, m.HeaderType]:
        """(index, header type) of the member a union stack's extract fills."""
        ut = self.o.L.union_stack_type[target.stack]
        k = next((i for i, (name, _) in enumerate(ut.headers) if name == target.member), None)
        if k is None:
            raise self.o.fail(f"header union stack {target.stack} has no member {target.member}")
        return k, self.o.L.types[ut.headers[k][1]]

    def transitions(self, s: m.ParseState, ind: int) -> None:
        """A parse state's select: its key (each part padded to whole bytes, first part most significant)."""
        parts = []
        if s.transition_key:
            widths = [self.o.L.key_part_width(v) for v in s.transition_key]
            pos = sum((w + 7) // 8 * 8 for w in widths)
            for v, w in zip(s.transition_key, widths):
                pos -= (w + 7) // 8 * 8
                parts.append((v, w, pos))
            self.set_key(parts, ind)
        for tr in s.transitions:
            if tr.kind == "default":
                self.o.emit(self.goto(tr.next_state), ind)
                return
            if tr.kind == "parse_vset":
                assert tr.vset is not None
                self.vset_case(tr.vset, [(w, pos) for _, w, pos in parts], self.goto(tr.next_state), ind)
                continue
            self.o.emit(self.case(tr.value or 0, tr.mask, self.goto(tr.next_state)), ind)
        self.o.emit(self.reject(self.o.error_code("NoMatch")), ind)
