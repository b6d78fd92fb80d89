"""p4c's warnings where BMv2 does otherwise than the program says (its back end's `[--Wwarn=unsupported]`),
so a drop-in tells the author what p4c would: the program still loads, and runs as on BMv2.

- a parser transition to reject: BMv2's parser stops, and the packet goes on to ingress with
  `standard_metadata.parser_error` set; nothing is dropped;
- a table with an action profile or selector: BMv2 takes no default action from the program (p4c
  writes none), only from the control plane.
"""
from __future__ import annotations

from .. import ir


def warn_bmv2_unsupported(program: ir.Program) -> None:
    """Warn, as p4c's BMv2 back end does, of a transition to reject and of a table with an action profile's default action."""
    m = program.main
    assert m is not None, "the checker guarantees a V1Switch main"
    for state in m.parser.states.values():
        t = state.transition
        targets = [(t.next, t.loc)] if isinstance(t, ir.DirectTransition) else [(c.next, c.loc) for c in t.cases]
        for loc in (loc for target, loc in targets if target == "reject"):
            program.warnings.append(f"{loc}: warning: Explicit transition to reject not supported on this target")
    for table in program.all_tables():
        if table.implementation is not None:
            name = f"{table.control}.{table.name}" if table.control else table.name
            program.warnings.append(f"{table.loc}: warning: Target does not support default_action for {name} "
                                    "(due to action profiles)")
