"""What every part of the lowering shares: names of the lowered form's fixed parts, errors, helpers."""
from __future__ import annotations

from p4target.errors import P4Error
from p4target.frontend import ir

SCALARS = "scalars"
EMPTY_FIELD_LIST = -1  # the index standing for "no @field_list": an empty list, as p4c makes one
STANDARD_METADATA = "standard_metadata"


class NotLowered(P4Error):
    """A construct this lowering does not handle yet."""


def table_actions(program: ir.Program, t: ir.Table) -> list[tuple[ir.Action, ir.Annotations]]:
    """A table's action refs; as p4c does, an implicit default adds `@defaultonly NoAction`."""
    refs = [(r.action, r.annotations) for r in t.actions]
    noaction = program.actions.get("NoAction")
    if t.default_action is None and noaction is not None and all(a is not noaction for a, _ in refs):
        refs.append((noaction, ir.Annotations([ir.Annotation("defaultonly")])))
    return refs


def digest_name(t: ir.Type) -> str:
    """A v1model digest is named after its struct type (as p4target.p4info names it)."""
    return t.name if isinstance(t, ir.StructLikeType) else str(t)


def fail(message: str, loc: ir.Loc) -> NotLowered:
    return NotLowered(message, loc.file, loc.line, loc.col)


def hash_algorithm(e: ir.Expr) -> str:
    """The algorithm a HashAlgorithm argument names (hash, checksums, action selectors)."""
    if not isinstance(e, ir.EnumMember):
        raise fail("a run-time hash algorithm (it must be a HashAlgorithm constant)", e.loc)
    return e.member


def all_ones(width: int) -> int:
    return (1 << width) - 1


def scalar_type(t: ir.Type) -> bool:
    return isinstance(t, (ir.BitsType, ir.IntType, ir.BoolType, ir.EnumType, ir.ErrorType, ir.VarbitType))


def type_width(t: ir.Type) -> int:
    if isinstance(t, ir.ErrorType):
        return 32
    if isinstance(t, ir.EnumType) and t.underlying is None:
        return 32
    return ir.width_of(t)


def flat_stmts(stmts: list[ir.Stmt]) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in stmts:
        out += flat_stmts(s.stmts) if isinstance(s, ir.Block) else [s]
    return out
