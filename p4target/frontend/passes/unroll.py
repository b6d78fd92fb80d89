"""Parser loops unrolled into states with constant stack indexes, as p4c's ParsersUnroll does under its
--loopsUnroll option (which p4c's samples give in the source: `@command_line("--loopsUnroll")`).

BMv2's parser has no extract at a run-time stack index (without the option p4c writes one, and
simple_switch aborts loading that JSON). With it, p4c runs the parser symbolically from `start`, knowing
the values of variables that were given constants, and writes one copy of a state per set of values it
is entered with, so that each stack index in a copy is a constant:

    state loop { pkt.extract(hdr.s[i]); i = i + 1; transition select(hdr.s[i - 1].last) { 0: loop; ... } }
becomes (i = 0 on entry, a stack of 2)
    state loop  { pkt.extract(hdr.s[0]); i = i + 1; transition select(hdr.s[0].last) { 0: loop1; ... } }
    state loop1 { pkt.extract(hdr.s[1]); i = i + 1; transition select(hdr.s[1].last) { 0: loop2; ... } }
    state loop2 { transition stateOutOfBound; }
    state stateOutOfBound { verify(false, error.StackOutOfBounds); transition reject; }

A copy in which an index is out of the stack's bounds does nothing but go to stateOutOfBound (p4c drops
its statements too). The statements themselves are kept: run-time variables are still written. As in
p4c's interpreter, `(int)x` is x's value here (BMv2 computes 0 for it: passes/int_values.py runs next).

What is tracked: variables and struct fields of bit, int and bool type (a parser local, `meta.n`), set
by assignments whose right side is known; any other write (an extract, an out argument, a slice) makes
one unknown. Only what an index depends on is tracked, and a copy is keyed by the values of those still
read on some path from it, so a state after the loop gets one copy. Select cases are all followed, as
p4c does. An index that stays unknown is left as it is (the lowering refuses a run-time-index extract).
Only a parser with a run-time stack index changes; more than MAX_STATES copies are refused.
"""
from __future__ import annotations

from collections import deque

from ...errors import P4Error
from .. import ir
from ..typing import BOOL, ERROR, VOID
from .evaluate import Known, Value, evaluate
from .walk import clone, fresh_names, walk

OPTION = "--loopsUnroll"
MAX_STATES = 1024
OUT_OF_BOUNDS = "stateOutOfBound"

Location = tuple  # id() of a variable's declaration, then field names: meta.n is (id(meta), "n")
Env = dict[Location, Value]


def location(e: ir.Expr) -> Location | None:
    """Where a tracked value lives: a bit/int/bool variable, or such a field of structs (never of a header)."""
    if not isinstance(e.type, (ir.BitsType, ir.IntType, ir.BoolType)):
        return None
    return _path(e, struct_only=True)


def _path(e: ir.Expr, struct_only: bool = False) -> Location | None:
    if isinstance(e, ir.VarRef):
        return (id(e.decl),)
    if isinstance(e, ir.Member) and (not struct_only or isinstance(e.expr.type, ir.StructType)):
        base = _path(e.expr, struct_only)
        return None if base is None else base + (e.member,)
    if isinstance(e, (ir.ArrayIndex, ir.Slice)) and not struct_only:
        return _path(e.expr)
    return None


def _runtime_indexes(code: object) -> list[ir.ArrayIndex]:
    """The stack elements `code` names at a non-constant index, in walk order."""
    return [n for n in walk(code) if isinstance(n, ir.ArrayIndex) and isinstance(n.expr.type, ir.StackType)
            and not isinstance(n.index, ir.Constant)]


def _reads(code: object) -> set[Location]:
    return {loc for n in walk(code) if isinstance(n, ir.Expr) and (loc := location(n)) is not None}


def _stmts(body: list[ir.Stmt]) -> list[ir.Stmt]:
    """The statements of a state, blocks flattened."""
    out: list[ir.Stmt] = []
    for s in body:
        out += _stmts(s.stmts) if isinstance(s, ir.Block) else [s]
    return out


def _assigned(s: ir.Stmt) -> tuple[Location, ir.Expr | None] | None:
    """(where, value) of an assignment of a tracked location (value None: it becomes unknown)."""
    if isinstance(s, ir.Assign) and (loc := location(s.lhs)) is not None:
        return loc, s.rhs
    if isinstance(s, ir.VarDeclStmt) and isinstance(s.decl.type, (ir.BitsType, ir.IntType, ir.BoolType)):
        return (id(s.decl),), s.decl.init
    return None


def _written(s: ir.Stmt) -> list[Location]:
    """The paths a statement writes other than by assigning a tracked location: l-values, out arguments."""
    out = []
    if isinstance(s, ir.Assign) and location(s.lhs) is None:
        out.append(_path(s.lhs))
    for n in walk(s):
        if isinstance(n, (ir.ExternMethodCall, ir.ExternFunctionCall)):
            out += [_path(a) for a, p in zip(n.args, n.decl.params) if p.direction in ("out", "inout")]
    return [p for p in out if p is not None]


def _known(env: Env) -> Known:
    """What `evaluate` asks of a leaf: its value in `env`, if tracked and known."""
    return lambda e: env.get(location(e) or ())


def execute(s: ir.Stmt, env: Env) -> None:
    """What `s` does to the known values (in place)."""
    for path in _written(s):
        for loc in [loc for loc in env if loc[:len(path)] == path or path[:len(loc)] == loc]:
            del env[loc]
    assigned = _assigned(s)
    if assigned is not None:
        loc, rhs = assigned
        v = None if rhs is None else evaluate(rhs, _known(env))
        if v is None:
            env.pop(loc, None)
        else:
            env[loc] = v
    elif not isinstance(s, (ir.MethodCallStmt, ir.Assign, ir.VarDeclStmt)):
        env.clear()  # nothing else is left in a parser state after the passes before; be safe


def _relevant(states: list[ir.ParserState]) -> set[Location]:
    """The locations a run-time stack index depends on, through assignments."""
    wanted = _reads([i.index for s in states for i in _runtime_indexes(s)])
    sources = [a for s in states for x in _stmts(s.body) if (a := _assigned(x)) is not None]
    while True:
        more = {r for loc, rhs in sources if loc in wanted and rhs is not None for r in _reads(rhs)} - wanted
        if not more:
            return wanted
        wanted |= more


def _live(states: dict[str, ir.ParserState], relevant: set[Location]) -> dict[str, set[Location]]:
    """Per state, the relevant locations read on some path from its entry before being assigned."""
    use: dict[str, set[Location]] = {}
    defs: dict[str, set[Location]] = {}
    for name, s in states.items():
        use[name], defs[name] = set(), set()
        for x in _stmts(s.body):
            assigned = _assigned(x)
            read = _reads(x.rhs) | (_reads(x.lhs) - {location(x.lhs)}) if isinstance(x, ir.Assign) else _reads(x)
            use[name] |= (read & relevant) - defs[name]
            if assigned is not None:
                defs[name].add(assigned[0])
        use[name] |= (_reads(s.transition) & relevant) - defs[name]
    live: dict[str, set[Location]] = {name: set(u) for name, u in use.items()}
    changed = True
    while changed:
        changed = False
        for name, s in states.items():
            after = set().union(*(live.get(n, set()) for n, _ in s.transition.targets()))
            new = use[name] | (after - defs[name])
            if new != live[name]:
                live[name], changed = new, True
    return live


class _Unroller:
    """The copies of one parser's states, made as the symbolic run from `start` reaches them."""

    def __init__(self, parser: ir.Parser, relevant: set[Location], verify: ir.ExternFunction):
        self.parser, self.verify = parser, verify
        self.live = _live(parser.states, relevant)
        self.fresh = fresh_names(set(parser.states) | {"accept", "reject"}, sep="")  # p4c's names: loop1, loop2
        self.out_of_bounds = self.fresh(OUT_OF_BOUNDS)
        self.copies: dict[tuple, str] = {}
        self.count: dict[str, int] = {}
        self.pending: deque[tuple[str, ir.ParserState, Env]] = deque()
        self.used_out_of_bounds = False

    def copy_of(self, name: str, env: Env) -> str:
        """The copy of state `name` entered with `env` (made if new)."""
        if name in ("accept", "reject"):
            return name
        state = self.parser.states[name]
        env = {loc: v for loc, v in env.items() if loc in self.live[name]}
        key = (name, frozenset(env.items()))
        if key not in self.copies:
            if len(self.copies) >= MAX_STATES:
                raise P4Error(f"parser {self.parser.name}: unrolling its loops takes more than {MAX_STATES} states "
                              f"(state {name} is entered with ever new values of its stack indexes)",
                              state.loc.file, state.loc.line, state.loc.col)
            n = self.count.get(name, 0)
            self.count[name] = n + 1
            self.copies[key] = name if n == 0 else self.fresh(f"{name}{n}")
            self.pending.append((self.copies[key], state, env))
        return self.copies[key]

    def run(self) -> dict[str, ir.ParserState]:
        out: dict[str, ir.ParserState] = {}
        self.copy_of("start", {})
        while self.pending:
            name, state, env = self.pending.popleft()
            out[name] = self.state(name, state, env)
        if self.used_out_of_bounds:
            out[self.out_of_bounds] = self.failing_state()
        return out

    def state(self, name: str, state: ir.ParserState, env: Env) -> ir.ParserState:
        """`state` entered with `env`: its indexes constant where known; successors the copies they reach."""
        env = dict(env)
        memo: dict = {}
        body: list[ir.Stmt] = []
        in_bounds = True
        for s in state.body:
            values = [evaluate(i.index, _known(env)) for i in _runtime_indexes(s)]
            for x in _stmts([s]):
                execute(x, env)
            body.append(clone(s, memo))
            in_bounds &= _set_indexes(body[-1], values)
        values = [evaluate(i.index, _known(env)) for i in _runtime_indexes(state.transition)]
        transition = clone(state.transition, memo)
        in_bounds &= _set_indexes(transition, values)
        if not in_bounds:
            self.used_out_of_bounds = True
            return ir.ParserState(name, [], ir.DirectTransition(self.out_of_bounds, state.loc), loc=state.loc)
        if isinstance(transition, ir.DirectTransition):
            transition.next = self.copy_of(transition.next, env)
        else:
            for case in transition.cases:
                case.next = self.copy_of(case.next, env)
        annotations = state.annotations if name == state.name else ir.Annotations()
        return ir.ParserState(name, body, transition, annotations, state.loc)

    def failing_state(self) -> ir.ParserState:
        """verify(false, error.StackOutOfBounds), as p4c's stateOutOfBound does."""
        loc = self.parser.loc
        call = ir.ExternFunctionCall(VOID, loc, "verify", [ir.BoolLiteral(BOOL, loc, False),
                                                           ir.ErrorMember(ERROR, loc, "StackOutOfBounds")], [], self.verify)
        return ir.ParserState(self.out_of_bounds, [ir.MethodCallStmt(loc, call)], ir.DirectTransition("reject", loc), loc=loc)


def _set_indexes(code: object, values: list[Value | None]) -> bool:
    """Put the known index values into `code`'s run-time indexes (in walk order); False if one is out of bounds."""
    in_bounds = True
    for i, v in zip(_runtime_indexes(code), values):
        if v is None:
            continue
        assert isinstance(i.expr.type, ir.StackType)
        if not 0 <= int(v) < i.expr.type.size:
            in_bounds = False
        else:
            i.index = ir.Constant(ir.BitsType(32), i.index.loc, int(v))
    return in_bounds


def unroll_parser(parser: ir.Parser, verify: ir.ExternFunction) -> None:
    """Unroll `parser` in place if a stack index in it depends on values known at compile time."""
    states = list(parser.states.values())
    relevant = _relevant(states)
    if relevant:
        parser.states = _Unroller(parser, relevant, verify).run()


def verify_of(program: ir.Program) -> ir.ExternFunction:
    """core.p4's verify(in bool, in error)."""
    return next(f for f in program.extern_functions["verify"] if len(f.params) == 2)

