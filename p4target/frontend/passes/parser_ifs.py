"""`if` statements in parser states become states, as p4c's RemoveParserControlFlow does (the
checker refuses a `switch` there, as p4c's grammar does): a parser state runs straight-line code
and then transitions, so the state ends at the `if`, selects on its condition and continues in a
state per branch, each of which goes on to a state holding the rest of the original one.

    state s { a; if (c) { b; } else { d; } e; transition t; }
becomes
    state s { a; transition select(c) { true: s_true; default: s_false; } }
    state s_true { b; transition s_join; }   state s_false { d; transition s_join; }
    state s_join { e; transition t; }
"""
from __future__ import annotations

from .. import ir
from ..typing import BOOL
from .walk import fresh_names


def remove_parser_ifs(parser: ir.Parser) -> None:
    """Split every state at its `if` statements (nested ones too) into states of their own."""
    fresh = fresh_names(set(parser.states) | {"accept", "reject"})

    states: dict[str, ir.ParserState] = {}
    pending = list(parser.states.values())
    while pending:
        state = pending.pop(0)
        at = next((i for i, s in enumerate(state.body) if isinstance(s, ir.If)), None)
        if at is None:
            states[state.name] = state
            continue
        s = state.body[at]
        assert isinstance(s, ir.If)
        join = ir.ParserState(fresh(f"{state.name}_join"), state.body[at + 1:], state.transition, loc=s.loc)
        branches = [ir.ParserState(fresh(f"{state.name}_{outcome}"), _stmts(body), ir.DirectTransition(join.name, s.loc),
                                   loc=s.loc) for outcome, body in (("true", s.then), ("false", s.else_)) if body is not None]
        otherwise = branches[1].name if len(branches) > 1 else join.name
        cases = [ir.SelectCase([ir.KsValue(ir.BoolLiteral(BOOL, s.loc, True), s.loc)], branches[0].name, s.loc),
                 ir.SelectCase([ir.KsDefault(s.loc)], otherwise, s.loc)]
        select = ir.SelectTransition([s.cond], cases, s.loc)
        states[state.name] = ir.ParserState(state.name, state.body[:at], select, state.annotations, state.loc)
        pending = branches + [join] + pending
    parser.states = states


def _stmts(s: ir.Stmt) -> list[ir.Stmt]:
    return list(s.stmts) if isinstance(s, ir.Block) else [s]
