"""The extern registry: what one v1model extern (or BMv2 primitive) is, stage by stage, and the lookup by name.

BMv2 keeps an extern or primitive in one class with one registration line (`REGISTER_PRIMITIVE`,
`BM_REGISTER_EXTERN`); here an `Extern` subclass, registered with `@register`, holds what is specific to
one extern, in its own module (p4target/externs/, or a test's): adding an extern is adding its module
(and its declaration, in v1model.p4 or the program). Each method below is the hook one stage calls:

- front end: `check_call` / `check_instance`, the rules p4c's BMv2 back end has for its uses (a P4Error);
- lowering: `lower` (an IR call of it -> primitives, through the lowering's `Externs` part, its helpers),
  `checksum` (a call in a checksum control), `instance` (its instances in the lowered program);
- schema: `schema`, what the control plane addresses of it in a lowered program;
- state: `storage` / `native_storage`, the cells its instances keep on the Python and the native engine
  (a schema entry names the extern that keeps it: `keeper`);
- P4Info: `p4info_prefix` / `p4info`; P4Runtime: `p4runtime_entity` / `p4runtime_write` / `p4runtime_read`;
- back ends: `python` / `c` print a primitive (through the printer's hooks); `emit` is the language-neutral
  form both use unless one needs its own; `cells`, the native engine's cells its instances take (beyond the
  lowered form's register arrays), and `c_source`, a C file its printed primitives call into (printed once
  into a program that uses them, against the engine's extern interface, engine/program.h).

The registry is a leaf: the layers that call these hooks import it, it imports none of them, so what a
hook is handed (an IR call, a printer, a State, ...) is typed `Any` here and exactly in the extern's
module. Nothing is registered until the composition root (the switch, the CLI, the STF runner, a test)
loads the extern modules (`p4target.externs.load()`); a lookup before then fails loudly.
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar


class Extern:
    """One extern: its names and, per stage, what it does. The defaults say "nothing here"."""

    functions: tuple[str, ...] = ()  # the v1model extern functions it stands for
    types: tuple[str, ...] = ()  # the v1model extern types it stands for
    primitives: tuple[str, ...] = ()  # the lowered form's primitive ops it prints
    p4info_prefix: int | None = None  # P4Info's id prefix of its instances (None: they are not in P4Info)
    p4runtime_entity: str | None = None  # the p4r.Entity kind its instances are (None: none of their own)
    c_source: Path | None = None  # C its printed primitives call (see the module docstring)

    # -- front end

    def check_call(self, c: Any) -> None:
        """Raise P4Error where p4c's BMv2 back end refuses this call (an IR ExternFunctionCall/ExternMethodCall)."""

    def check_instance(self, inst: Any) -> None:
        """Raise P4Error where p4c's BMv2 back end refuses this instance (an IR ExternInstance)."""

    # -- lowering

    def lower(self, x: Any, c: Any, out: list[Any]) -> None:
        """Append the primitives of call `c`, through the lowering's Externs part `x`."""
        raise x.not_lowered(c)

    def checksum(self, x: Any, c: Any) -> bool:
        """Lower a call in a checksum control (where only checksums are lowered); False: it has no place there."""
        return False

    def instance(self, p: Any, inst: Any) -> None:
        """Add what an instance of this extern type is in lowered program `p` (nothing by default)."""

    # -- schema and state

    def schema(self, p: Any, schema: Any) -> None:
        """Add what the control plane addresses of this extern in lowered program `p` (nothing by default)."""

    def storage(self, entry: Any) -> Any:
        """The Python engine's cells of the instance a schema entry describes (one whose `extern` names this)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no cells")

    def native_storage(self, entry: Any, engine: Any, ids: Any) -> Any:
        """The same in the native engine's memory (`ids`: the CProgram's numbers of the engine's arrays)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no cells")

    # -- P4Info and P4Runtime

    def p4info(self, b: Any, info: Any, inst: Any) -> Any:
        """Add the instance's entry to P4Info `info` (the builder `b` fills its preamble); None: it has none here."""
        return None

    def p4runtime_write(self, tr: Any, update_type: int, entry: Any) -> None:
        """Apply one P4Runtime update of its entity `entry` to Translator `tr`'s state (a RuntimeStatus if refused)."""
        raise NotImplementedError

    def p4runtime_read(self, tr: Any, entry: Any) -> Iterator[Any]:
        """The p4r.Entity messages a read of its entity `entry` (possibly a wildcard) answers."""
        raise NotImplementedError

    # -- back ends

    def python(self, pr: Any, op: str, ps: list[Any], ind: int) -> None:
        """Print primitive `op` in the Python back end."""
        self.emit(pr, op, ps, ind)

    def c(self, pr: Any, op: str, ps: list[Any], ind: int) -> None:
        """Print primitive `op` in the C back end."""
        self.emit(pr, op, ps, ind)

    def emit(self, pr: Any, op: str, ps: list[Any], ind: int) -> None:
        """Print primitive `op` through the printer's language hooks (both back ends)."""
        raise pr.fail(f"primitive {op} is not supported")

    def cells(self, p: Any) -> list[tuple[str, int]]:
        """(instance name, u64 cells) of each of its instances in lowered program `p` that keeps cells in the native
        engine beyond the form's register arrays (its `native_storage` finds them under that name)."""
        return []


_BY_PRIMITIVE: dict[str, Extern] = {}
_BY_FUNCTION: dict[str, Extern] = {}
_BY_TYPE: dict[str, Extern] = {}
_BY_ENTITY: dict[str, Extern] = {}

E = TypeVar("E", bound=type[Extern])


def register(cls: E) -> E:
    """Class decorator: an instance of `cls` answers for its functions, types, primitives and entity."""
    ext = cls()
    entities = (cls.p4runtime_entity,) if cls.p4runtime_entity else ()
    for table, names in ((_BY_PRIMITIVE, cls.primitives), (_BY_FUNCTION, cls.functions), (_BY_TYPE, cls.types),
                         (_BY_ENTITY, entities)):
        for name in names:
            if name in table:
                raise ValueError(f"{name} is registered twice ({type(table[name]).__name__}, {cls.__name__})")
            table[name] = ext
    return cls


def _loaded(table: dict[str, Extern]) -> dict[str, Extern]:
    if not _BY_TYPE:
        raise RuntimeError("no extern is registered: the program's composition root loads them "
                           "(p4target.externs.load())")
    return table


def for_primitive(op: str) -> Extern | None:
    return _loaded(_BY_PRIMITIVE).get(op)


def for_function(name: str) -> Extern | None:
    return _loaded(_BY_FUNCTION).get(name)


def for_type(name: str) -> Extern | None:
    return _loaded(_BY_TYPE).get(name)


def for_entity(kind: str) -> Extern | None:
    """The extern whose instances are P4Runtime entities of `kind` ("counter_entry", ...)."""
    return _loaded(_BY_ENTITY).get(kind)


def for_call(c: Any) -> Extern | None:
    """The extern an IR call belongs to: an extern method call's (it has a `target`), that of the type of the
    instance it is called on; an extern function call's, the function's."""
    if hasattr(c, "target"):
        return for_type(getattr(c.target.type, "name", ""))
    return for_function(c.name)


def keeper(extern_type: str) -> Extern:
    """The extern that keeps the cells of a schema entry naming `extern_type` (its `storage` hooks)."""
    ext = for_type(extern_type)
    if ext is None:
        raise KeyError(f"no extern {extern_type!r} is registered to keep its cells")
    return ext


def registered() -> list[Extern]:
    """Every registered extern, once each."""
    return list({id(e): e for t in (_BY_PRIMITIVE, _BY_FUNCTION, _BY_TYPE) for e in _loaded(t).values()}.values())
