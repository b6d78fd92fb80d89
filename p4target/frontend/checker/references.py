"""p4c resolves every name of a program (ResolveReferences) before it type-checks any of it, so a name declared
nowhere is what it reports, wherever it stands; the checker here resolves and types in one pass in source order.
When the checker refuses a program, `undeclared` finds the first name that p4c's resolution would certainly refuse:
one that no declaration anywhere in the program gives, so its answer never depends on scopes."""
from __future__ import annotations

from lark import Token, Tree

BUILTIN = frozenset({"accept", "reject"})  # parser states every parser has
# Rules whose `name` child refers to a declaration instead of making one: the action of an entry or an actions list,
# a transition's state.
REFERRING = frozenset({"entry", "action_ref", "direct_transition", "select_case"})


def undeclared(tree: Tree) -> Token | None:
    """The first name (in source order) used where a declaration is needed, that nothing in `tree` declares."""
    declared: set[str] = set(BUILTIN)
    used: list[Token] = []
    for node in tree.iter_subtrees():
        for child in node.children:
            if not isinstance(child, Tree):
                continue
            if child.data == "name":
                target = used if node.data in REFERRING else None
                for tok in child.scan_values(lambda v: isinstance(v, Token)):
                    (target.append(tok) if target is not None else declared.add(str(tok)))
            elif child.data == "name_ref":
                used.extend(t for t in child.scan_values(lambda v: isinstance(v, Token)) if t.type == "IDENT")
    missing = [t for t in used if str(t) not in declared and t.line is not None]
    return min(missing, key=lambda t: (t.line, t.column)) if missing else None
