"""digest: a learn list's fields sent to the controller (generate_digest); named after its struct type."""
from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from p4target.constants import MAX_DIGESTS_QUEUED
from p4target.externs.base import Call, Extern, register
from p4target.lowered import model as m

if TYPE_CHECKING:
    from p4target.backends.c import _Printer as CPrinter
    from p4target.backends.printer import LoweredPrinter
    from p4target.backends.python_values import PyValues as PyPrinter
    from p4target.lowered.from_ir.externs import Externs
    from p4target.runtime.translate import Translator

from p4target.lowered.from_ir.common import digest_name, fail

MAX_BITS = 64  # the C engine's word


def learn_list(pr: LoweredPrinter, ps: list[m.Value]) -> m.LearnList:
    """The learn list a generate_digest sends."""
    lid = ps[1].value if isinstance(ps[1], m.Const) else None
    ll = pr.learn_lists.get(lid) if lid is not None else None
    if ll is None:
        raise pr.fail(f"generate_digest names no learn list ({ps[1]})")
    return ll


@register
class Digest(Extern):
    functions = ("digest",)
    primitives = ("generate_digest",)
    p4runtime_entity = "digest_entry"

    def lower(self, x: Externs, c: Call, out: list[m.Primitive]) -> None:
        a = c.args
        name = digest_name(c.type_args[0] if c.type_args else a[1].type)
        ll = x.learn_lists.get(name)
        if ll is None:
            fields = []
            for v in x.v.flat(a[1]):
                if not isinstance(v, m.Field):
                    raise fail("a digest of values that are not fields", c.loc)
                fields.append(v)
            ll = x.learn_lists[name] = m.LearnList(len(x.learn_lists) + 1, name, fields)
        out.append(m.Primitive("generate_digest", [x.v.data(a[0]), m.Const(ll.id)]))

    def p4runtime_write(self, tr: Translator, update_type: int, entry: Any) -> None:
        """Configure a digest's delivery (INSERT, MODIFY) or stop it (DELETE): the translator keeps the configs."""
        import grpc
        from finsy.proto import p4r

        from p4target.runtime.errors import RuntimeStatus

        name = tr.by_id("digests", entry.digest_id).preamble.name
        present = entry.digest_id in tr.digest_configs
        if update_type == p4r.Update.INSERT and present:
            raise RuntimeStatus(grpc.StatusCode.ALREADY_EXISTS, f"digest {name} is already configured")
        if update_type != p4r.Update.INSERT and not present:
            raise RuntimeStatus(grpc.StatusCode.NOT_FOUND, f"digest {name} is not configured")
        if update_type == p4r.Update.DELETE:
            del tr.digest_configs[entry.digest_id]
        else:
            tr.digest_configs[entry.digest_id] = p4r.DigestEntry.Config()
            tr.digest_configs[entry.digest_id].CopyFrom(entry.config)

    def p4runtime_read(self, tr: Translator, entry: Any) -> Iterator[Any]:
        from finsy.proto import p4r

        if entry.digest_id:
            tr.by_id("digests", entry.digest_id)
        for digest_id, config in sorted(tr.digest_configs.items()):
            if entry.digest_id in (0, digest_id):
                yield p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=digest_id, config=config))

    def python(self, pr: PyPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        ll = learn_list(pr, ps)
        values = "".join(f"{pr.rv(f)} & {(1 << max(pr.L.width(f), 1)) - 1:#x}, " for f in ll.elements)
        pr.emit(f"if len(_DG) < {MAX_DIGESTS_QUEUED}: _DG.append(({pr.text(ll.name)}, ({values})))", ind)

    def c(self, pr: CPrinter, op: str, ps: list[m.Value], ind: int) -> None:
        ll = learn_list(pr, ps)
        v = pr.tmp("D")
        words = [w for f in ll.elements for w in self.words(pr, f)]
        pr.emit(f"{{ const u64 {v}[] = {{{', '.join(words) or '0'}}};", ind)
        pr.emit(f"push_digest(p->E, {pr.p.learn_lists.index(ll)}, {v}, {len(words)}); }}", ind + 1)

    def words(self, pr: CPrinter, f: m.Field) -> list[str]:
        """A digest field as engine words: a field wider than 64 bits as its (masked) slots (CProgram.digests)."""
        if pr.L.width(f) > MAX_BITS:
            return [f"F[{slot}]" for slot in pr.field_slots(f)]
        return [f"(u64){pr.rv(f)} & {(1 << max(pr.L.width(f), 1)) - 1:#x}ULL"]
