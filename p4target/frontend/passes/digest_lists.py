"""A digest of a list, `digest(1, { hdr.eth.srcAddr, sm.ingress_port })`, gets a struct type of its
own named `digest_N` (the name p4c gives such a digest in P4Info, N counting them in program
order): P4Info, the learn list and the digest messages all name a digest by its type."""
from __future__ import annotations

from .. import ir
from .walk import walk


def name_digest_lists(program: ir.Program, code: list) -> None:
    """Give each `digest(receiver, {...})` in `code` its struct type (added to program.types)."""
    count = 0
    for n in walk(code):
        if not (isinstance(n, ir.ExternFunctionCall) and n.name == "digest" and isinstance(n.args[1], ir.ListExpr)):
            continue
        while f"digest_{count}" in program.types:
            count += 1
        items = n.args[1].items
        t = ir.StructType(f"digest_{count}", [ir.Field(f"field_{i}", x.type, loc=x.loc) for i, x in enumerate(items)],
                          loc=n.loc)
        program.types[t.name] = t
        n.args[1] = ir.StructExpr(t, n.args[1].loc, {f.name: x for f, x in zip(t.fields, items)})
        n.type_args = [t]
