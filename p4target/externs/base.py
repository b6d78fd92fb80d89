"""The registry of externs: what one v1model extern (or BMv2 primitive) is, and the lookup by name.

BMv2 keeps an extern or primitive in one class with one registration line (`REGISTER_PRIMITIVE`,
`BM_REGISTER_EXTERN`); here an `Extern` subclass, registered with `@register`, holds what is specific
to one extern, so adding one touches its module and its declaration in v1model.p4:

- `functions` / `types`: the v1model extern functions and extern types it stands for;
- `primitives`: the lowered form's primitive ops it prints;
- `lower`: an IR call of it -> primitives (through the lowering's `Externs` part, its helpers);
- `python` / `c`: a primitive printed by each back end (through the printer's hooks); `emit` is the
  language-neutral form both use unless one needs its own;
- `check_call` / `check_instance`: the rules p4c's BMv2 back end has for its uses (a P4Error);
- `instance`: its extern instances in the lowered program (arrays the control plane addresses);
- `schema`: what the control plane addresses of it in a lowered program (the State's schema);
- `p4info_prefix` / `p4info`: its instances' P4Info id prefix and entry;
- `p4runtime_entity` / `p4runtime_write` / `p4runtime_read`: the P4Runtime entity its instances are written
  and read as, through the runtime's Translator (which dispatches on the entity's kind).

The language's own statements (assign*, header and stack operations, exit, jumps) stay in the printers.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from p4target import state as st
from p4target.errors import P4Error
from p4target.frontend import ir
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.c import _Printer as CPrinter
    from p4target.backends.printer import LoweredPrinter
    from p4target.backends.python_values import PyValues as PyPrinter
    from p4target.lowered.from_ir.externs import Externs
    from p4target.p4info import _P4InfoBuilder as P4InfoBuilder
    from p4target.runtime.translate import Translator

Call = ir.ExternFunctionCall | ir.ExternMethodCall


def fail(message: str, loc: ir.Loc) -> P4Error:
    """A BMv2 rule broken at `loc` (what the lowering cannot lower is a NotLowered: from_ir.common.fail)."""
    return P4Error(message, loc.file, loc.line, loc.col)


class Extern:
    """One extern: its names and, per stage, what it does. The defaults say "nothing here"."""

    functions: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    primitives: tuple[str, ...] = ()
    p4info_prefix: int | None = None  # P4Info's id prefix of its instances (None: they are not in P4Info)
    p4runtime_entity: str | None = None  # the p4r.Entity kind its instances are (None: none of their own)

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        """Append the primitives of call `c`."""
        raise x.not_lowered(c)

    def checksum(self, x: Externs, c: ir.ExternFunctionCall) -> bool:
        """Lower a call in a checksum control (where only checksums are lowered); False: it has no place there."""
        return False

    def instance(self, p: m.Program, inst: ir.ExternInstance) -> None:
        """Add what an instance of this extern type is in the lowered program (nothing by default)."""

    def schema(self, p: m.Program, schema: st.ProgramSchema) -> None:
        """Add what the control plane addresses of this extern in lowered program `p` (nothing by default)."""

    def p4info(self, b: P4InfoBuilder, info: Any, inst: ir.ExternInstance) -> Any:
        """Add the instance's entry to P4Info `info` (the builder fills its preamble); None: it has none here."""
        return None

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        """Apply one P4Runtime update of its entity `entry` to `tr`'s state (a RuntimeStatus if refused)."""
        raise NotImplementedError

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        """The p4r.Entity messages a read of its entity `entry` (possibly a wildcard) answers."""
        raise NotImplementedError

    def check_call(self, c: Call) -> None:
        """Raise P4Error where p4c's BMv2 back end refuses this call."""

    def check_instance(self, inst: ir.ExternInstance) -> None:
        """Raise P4Error where p4c's BMv2 back end refuses this instance."""

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        """Print primitive `op` in the Python back end."""
        self.emit(pr, op, ps, ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        """Print primitive `op` in the C back end."""
        self.emit(pr, op, ps, ind)

    def emit(self, pr: LoweredPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        """Print primitive `op` through the printer's language hooks (both back ends)."""
        raise pr.fail(f"primitive {op} is not supported")


_BY_PRIMITIVE: dict[str, Extern] = {}
_BY_FUNCTION: dict[str, Extern] = {}
_BY_TYPE: dict[str, Extern] = {}
_BY_ENTITY: dict[str, Extern] = {}

E = TypeVar("E", bound=type[Extern])


def register(cls: E) -> E:
    """Class decorator: an instance of `cls` answers for its functions, types and primitives."""
    ext = cls()
    entities = (cls.p4runtime_entity,) if cls.p4runtime_entity else ()
    for table, names in ((_BY_PRIMITIVE, cls.primitives), (_BY_FUNCTION, cls.functions), (_BY_TYPE, cls.types),
                         (_BY_ENTITY, entities)):
        for name in names:
            if name in table:
                raise ValueError(f"{name} is registered twice ({type(table[name]).__name__}, {cls.__name__})")
            table[name] = ext
    return cls


def for_primitive(op: str) -> Extern | None:
    return _BY_PRIMITIVE.get(op)


def for_function(name: str) -> Extern | None:
    return _BY_FUNCTION.get(name)


def for_type(name: str) -> Extern | None:
    return _BY_TYPE.get(name)


def for_entity(kind: str) -> Extern | None:
    """The extern whose instances are P4Runtime entities of `kind` ("counter_entry", ...)."""
    return _BY_ENTITY.get(kind)


def for_call(c: Call) -> Extern | None:
    """The extern a call belongs to: the function's, or the type's of the instance a method is called on."""
    if isinstance(c, ir.ExternFunctionCall):
        return for_function(c.name)
    return for_type(getattr(c.target.type, "name", ""))


def registered() -> list[Extern]:
    """Every registered extern, once each."""
    return list({id(e): e for t in (_BY_PRIMITIVE, _BY_FUNCTION, _BY_TYPE) for e in t.values()}.values())


def field_list_id(v: m.Value | None, absent: str) -> str:
    """A clone/resubmit/recirculate field list's id as printed (`absent` where the primitive has none)."""
    return str(v.value) if isinstance(v, m.Const) else absent


def bound_index(pr: PyPrinter, v: m.Value, ind: int) -> str:
    """A Python name for an array index, computed once (the array's cells are guarded by it)."""
    i = pr.tmp()
    pr.emit(f"{i} = {pr.rv(v)}", ind)
    return i
