"""p4c's warnings where BMv2 does otherwise than the program says (its back end's `[--Wwarn=unsupported]`),
so a drop-in tells the author what p4c would: the program still loads, and runs as on BMv2.

- a parser transition to reject: BMv2's parser stops, and the packet goes on to ingress with
  `standard_metadata.parser_error` set; nothing is dropped;
- a table with an action profile or selector: BMv2 takes no default action from the program (p4c
  writes none), only from the control plane;
- a table property p4c's BMv2 back end does not know (`priority_delta`, `largest_priority_wins`, a
  made-up one): it is ignored there (the entries' priorities it sets are computed in the front end).
"""
from __future__ import annotations

from .. import ir

KNOWN_PROPERTIES = ("support_timeout",)  # what BMv2's back end reads beyond those the IR holds in fields of its own


def warn_bmv2_unsupported(program: ir.Program) -> None:
    """Warn, as p4c's BMv2 back end does, of a transition to reject, a table with an action profile's default action and
    a table property it ignores."""
    m = program.main
    assert m is not None, "the checker guarantees a V1Switch main"
    for loc in _reject_transitions(m.parser):
        program.warnings.append(f"{loc}: warning: Explicit transition to reject not supported on this target")
    for table in program.all_tables():
        if table.implementation is not None:
            name = table.control_plane_name  # as p4c prints it: a global @name keeps its dot
            name = "." + name if (table.annotations.get_str("name") or "").startswith(".") else name
            program.warnings.append(f"{table.loc}: warning: Target does not support default_action for {name} "
                                    "(due to action profiles)")
        for prop, value in table.other_properties.items():
            if prop not in KNOWN_PROPERTIES:
                program.warnings.append(f"{value.loc}: warning: Unknown table property: {prop}")


def _reject_transitions(parser: ir.Parser) -> list[ir.Loc]:
    """Where the states reachable from start go to reject (p4c's back end never sees the others)."""
    found, todo, seen = [], ["start"], {"start"}
    while todo:
        for target, loc in parser.states[todo.pop(0)].transition.targets():
            if target == "reject":
                found.append(loc)
            elif target != "accept" and target not in seen:
                seen.add(target)
                todo.append(target)
    return found
