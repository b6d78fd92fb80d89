"""Tables: keys, actions lists, entries, default action and the other properties; keysets (shared
with parser select cases)."""
from __future__ import annotations

import re
from typing import cast

from lark import Token, Tree

from ...errors import P4Error
from .. import ir
from ..passes.walk import same_expr
from ..typing import is_key, is_numeric
from .annotations import Annotations
from .calls import Calls
from .constants import is_constant
from .declarations import Declarations
from .expressions import Expressions
from .names import Names, Node, Scope
from .types import serializable


class Tables:
    """`table` declarations in a control -> ir.Table."""

    def __init__(self, n: Names, e: Expressions, an: Annotations, ca: Calls, de: Declarations):
        self.n, self.e, self.an, self.ca, self.de = n, e, an, ca, de

    def table(self, node: Tree, scope: Scope, prefix: str) -> ir.Table:
        ann, name_node, *props = node.children
        name = self.n.name_of(name_node)
        table = ir.Table(name, annotations=self.an.annotations(ann), loc=self.n.loc(name_node), control=prefix)
        self.n.declare(scope, name, table, name_node)
        seen: set[str] = set()
        deferred = []
        quiet: set[str] = set()  # the warnings the entries' @noWarn("kind") silences, as p4c's do
        for p in props:
            pname = {"key_prop": "key", "actions_prop": "actions", "entries_prop": "entries"}.get(p.data)
            if pname is None:
                pname = self.n.name_of([c for c in p.children if isinstance(c, Tree) and c.data == "name"][0])
            if pname in seen:
                raise self.n.error(p, f"table {name}: duplicate property {pname}")
            seen.add(pname)
            if p.data == "entries_prop" and "key" not in seen and any(q.data == "key_prop" for q in props):
                raise self.n.error(p, f"table {name}: Entries list must be after table key")
            if p.data == "key_prop":
                for k in p.children:
                    self.key_element(k, scope, table)
            elif p.data == "actions_prop":
                for ref in p.children:
                    self.action_ref(ref, scope, table)
            else:
                deferred.append((pname, p))
        if "actions" not in seen:
            raise self.n.error(name_node, f"table {name}: no actions property")
        for pname, p in deferred:  # these refer to the key and action lists
            is_const = any(isinstance(c, Token) and c.type == "CONST" for c in p.children)
            if p.data == "entries_prop":
                table.entries_const = is_const
                ann = next((c for c in p.children if isinstance(c, Tree) and c.data == "annotations"), None)
                quiet = {str(a.args[0]) for a in self.an.annotations(ann) if a.name == "noWarn" and a.args}
                for e in p.children:
                    if isinstance(e, Tree) and e.data == "entry":
                        table.entries.append(self.entry(e, scope, table))
                if any(e.priority is not None for e in table.entries):
                    if all(k.match_kind in ("exact", "lpm") for k in table.keys):
                        key_prop = next((q for q in props if q.data == "key_prop"), p)
                        raise self.n.error(key_prop, f"table {name}: its key's match kinds take no priorities, but an entry gives one")
                    if table.entries[0].priority is None:
                        first = next(e for e in p.children if isinstance(e, Tree) and e.data == "entry")
                        raise self.n.error(first, f"table {name}: the first entry must have a priority when another one has one")
            elif pname == "implementation":
                table.implementation = self.table_implementation(p, scope, table)
            else:
                self.table_property(pname, p.children[-1], is_const, scope, table)
        if any(e.priority is not None for e in table.entries):  # once the priority properties are known
            self.entry_priorities(table, quiet)
        self.bmv2_priorities(table)
        return table

    def entry_priorities(self, table: ir.Table, quiet: set[str]) -> None:
        """An entry without a priority after one with one gets the previous one's minus `priority_delta`
        (plus, with `largest_priority_wins = false`), as p4c computes them, refused as p4c refuses when
        that leaves 0..2^64 (even past the last entry). TableEntry.priority is largest-wins: the values
        stay when they are (and distinct); otherwise (smallest wins, or a tie) the entries rank as BMv2
        gets them from p4c's JSON, a stable sort on the values, ties in written order."""
        largest = self.table_bool(table, "largest_priority_wins", True)
        delta = self.table_uint(table, "priority_delta", 1)
        values, current = [], 0
        for e in table.entries:
            current = e.priority if e.priority is not None else current
            values.append(current)
            current = current - delta if largest else current + delta
            if not 0 <= current < 1 << 64:
                raise self.n.error(table.loc, f"table {table.name}: overflow in priority computation (priority_delta "
                                              f"{delta} from priority {values[-1]} leaves 0..2^64-1)")
        self.warn_priorities(table.entries, values, largest, quiet)
        if largest and len(set(values)) == len(values):
            for e, value in zip(table.entries, values):
                e.priority = value
            return
        order = sorted(range(len(values)), key=lambda i: -values[i] if largest else values[i])
        for rank, i in enumerate(order):
            table.entries[i].priority = len(values) - rank

    def warn_priorities(self, entries: list[ir.TableEntry], values: list[int], largest: bool, quiet: set[str]) -> None:
        """p4c's warnings (it still compiles): an entry that wins over the one before it is out of order, blamed
        on the one before; a priority an earlier entry has is a duplicate, blamed on that earlier entry. `quiet`:
        the kinds not to warn of (`duplicate-priorities`, `entries-out-of-priority-order`)."""
        first: dict[int, ir.TableEntry] = {}
        for i, (entry, value) in enumerate(zip(entries, values)):
            if value in first and "duplicate-priorities" not in quiet:
                warning = f"{first[value].loc}: warning: Entry and Entry have the same priority {value}"
                if warning not in self.n.program.warnings:  # once for three or more, as p4c prints it
                    self.n.program.warnings.append(warning)
            first.setdefault(value, entry)
            if i and (value > values[i - 1] if largest else value < values[i - 1]) \
                    and "entries-out-of-priority-order" not in quiet:
                self.n.program.warnings.append(f"{entries[i - 1].loc}: warning: Entry (priority {values[i - 1]}) and "
                                               f"Entry (priority {value}) have priorities out of order")

    def table_bool(self, table: ir.Table, name: str, default: bool) -> bool:
        value = table.other_properties.get(name)
        if value is None:
            return default
        if not isinstance(value, ir.BoolLiteral):
            raise self.n.error(value.loc, f"table {table.name}: {name} must be true or false")
        return value.value

    def table_uint(self, table: ir.Table, name: str, default: int) -> int:
        value = table.other_properties.get(name)
        if value is None:
            return default
        if not isinstance(value, ir.Constant) or not 0 <= value.value < 1 << 64:
            raise self.n.error(value.loc, f"table {table.name}: {name} must be a non-negative integer constant")
        return value.value

    @staticmethod
    def bmv2_priorities(table: ir.Table) -> None:
        """`@priority(n)` on entries (p4c/BMv2: the smallest n wins, an entry without one counts
        as its 1-based position) as priorities where the largest wins, like `priority = n`."""
        ranks = [e.annotations.get_int("priority") for e in table.entries]
        if all(r is None for r in ranks):
            return
        order = [r if r is not None else i + 1 for i, r in enumerate(ranks)]
        top = max(order) + 1
        for e, r in zip(table.entries, order):
            e.priority = top - r

    def table_implementation(self, prop: Tree, scope: Scope, table: ir.Table) -> ir.ExternInstance:
        """`implementation = p;` naming an action_profile/action_selector, or one built inline (needs @name)."""
        value = prop.children[-1]
        if value.data == "ctor_call":
            anns = self.an.annotations(prop.children[0])
            name = anns.get_str("name")
            if name is None:
                raise self.n.error(value, f"table {table.name}: an implementation built inline needs a @name "
                                        "annotation on the property (P4Runtime names it)")
            inst = self.de.extern_instance(value, value.children[0], value.children[1], name, anns, self.n.loc(value),
                                        scope, None)
        else:
            ref = self.e.expr(value, scope)
            if not isinstance(ref, ir.InstanceRef):
                raise self.n.error(value, f"table {table.name}: implementation must be an action_profile or action_selector")
            inst = ref.decl
        if inst.extern not in ("action_profile", "action_selector"):
            raise self.n.error(value, f"table {table.name}: implementation must be an action_profile or action_selector, "
                                    f"not {inst.extern}")
        return inst

    def key_element(self, node: Tree, scope: Scope, table: ir.Table) -> None:
        expr_node, kind_node, ann = node.children
        e = self.e.expr(expr_node, scope)
        kind = self.n.name_of(kind_node)
        if kind not in self.n.program.match_kinds:
            raise self.n.error(kind_node, f"{kind}: no such match_kind")
        if not is_key(e.type):
            raise self.n.error(expr_node, f"table {table.name}: key {self.n.text(expr_node)} has type {e.type}, which cannot be matched")
        if kind in ("lpm", "ternary", "range") and not (is_numeric(e.type) or isinstance(e.type, (ir.BoolType, ir.NewType))
                                                         or serializable(e.type)):
            raise self.n.error(expr_node, f"table {table.name}: {kind} key must be bit<W> or int<W>")
        self.an.check_translation(e.type, expr_node)
        anns = self.an.annotations(ann)
        kname = anns.get_str("name") or self.key_name(e, expr_node)
        table.keys.append(ir.KeyElement(e, kind, kname, anns, self.n.loc(expr_node)))

    def key_name(self, e: ir.Expr, expr_node: Tree) -> str:
        """A key's control-plane name as p4c writes it: the source text, `X.$valid$` for `X.isValid()`."""
        if isinstance(e, ir.HeaderMethodCall) and e.method == "isValid":
            renamed = _renamed_path(e.header)
            return (renamed or re.sub(r"\s+", "", self.n.text(expr_node.children[0].children[0]))) + ".$valid$"
        if not _nameable(expr_node):
            raise self.n.error(expr_node, f"{self.n.text(expr_node)}: Complex key expression requires a @name annotation")
        return _renamed_path(e) or re.sub(r"\s+", "", self.n.text(expr_node))

    def action_ref(self, node: Tree, scope: Scope, table: ir.Table) -> None:
        ann, name_node, args = node.children
        aname = self.n.name_of(name_node)
        action = scope.lookup(aname)
        if not isinstance(action, ir.Action):
            raise self.n.error(name_node, f"{aname}: no such action")
        bound = self.ca.arg_nodes(args) if args is not None else []
        directional = [p for p in action.params if p.direction]
        if len(bound) > len(directional):
            raise self.n.error(name_node, f"unsupported: binding directionless parameters of {aname} in the actions list")
        if len(bound) < len(directional):
            raise self.n.error(name_node, f"{aname}: the actions list must bind its directional parameters "
                                        f"({', '.join(p.name for p in directional)})")
        values = self.ca.bind_args(directional, bound, scope, {}, node, f"action {aname}")
        if any(r.action is action for r in table.actions):
            raise self.n.error(name_node, f"{aname}: duplicate action in table {table.name}")
        table.actions.append(ir.ActionRef(action, self.an.annotations(ann), self.n.loc(name_node), values))

    def action_binding(self, name_node: Node, args_node: Tree | None, scope: Scope, table: ir.Table, what: str) -> ir.ActionBinding:
        aname = self.n.name_of(name_node)
        ref = next((r for r in table.actions if r.action.name == aname), None)
        if ref is None:
            raise self.n.error(name_node, f"{what}: action {aname} is not in the actions list of table {table.name}")
        action = ref.action
        args = self.ca.arg_nodes(args_node) if args_node is not None else []
        if len(args) != len(action.params):
            raise self.n.error(name_node, f"{what}: action {aname} expects {len(action.params)} arguments, got {len(args)}")
        values = []
        for i, (p, (_kw, n)) in enumerate(zip(action.params, args)):
            if p.direction:
                v = self.e.expr(n, scope)
                if not same_expr(v, ref.args[i]):
                    raise self.n.error(n, f"{what}: argument {self.n.text(n)} for {p.name} differs from the one in the actions list")
            else:
                v = self.e.coerce(self.e.expr(n, scope), p.type, n)
                if not is_constant(v):
                    raise self.n.error(n, f"{what}: argument {p.name} must be a compile-time constant")
            values.append(v)
        return ir.ActionBinding(action, values, self.n.loc(name_node))

    def table_property(self, pname: str, value: Tree, is_const: bool, scope: Scope, table: ir.Table) -> None:
        if pname == "default_action":
            if value.data == "call":
                callee, args = value.children
            else:
                callee, args = value, None
            if callee.data != "name_ref":
                raise self.n.error(value, "default_action must be an action call")
            table.default_action = self.action_binding(callee.children[0], args, scope, table, f"table {table.name} default_action")
            ref = next(r for r in table.actions if r.action is table.default_action.action)
            if ref.annotations.has("tableonly"):
                raise self.n.error(value, f"{ref.action.name} is @tableonly and cannot be the default action")
            table.default_action_const = is_const
        elif pname == "size":
            v = self.e.expr(value, scope)
            if not isinstance(v, ir.Constant) or v.value <= 0:
                raise self.n.error(value, f"table {table.name}: size must be a positive integer constant")
            table.size = v.value
        elif pname in ("counters", "meters"):
            v = self.e.expr(value, scope)
            want = "direct_counter" if pname == "counters" else "direct_meter"
            if not (isinstance(v, ir.InstanceRef) and v.decl.extern == want):
                raise self.n.error(value, f"table {table.name}: {pname} must name a {want} instance")
            if pname == "counters":
                table.direct_counter = v.decl
            else:
                table.direct_meter = v.decl
        else:
            table.other_properties[pname] = self.e.expr(value, scope)

    def entry(self, node: Tree, scope: Scope, table: ir.Table) -> ir.TableEntry:
        children = [c for c in node.children if not (isinstance(c, Token) and c.type == "CONST")]
        prio_node, ks_node, name_node, args_node, ann = children
        keys = self.keysets(ks_node, [k.expr for k in table.keys], scope, f"table {table.name} entry")
        priority = None
        if prio_node is not None:
            if table.entries_const:
                raise self.n.error(prio_node, "Entry: Table with 'const' entries cannot have priorities")
            kw, pexpr = prio_node.children
            if str(kw) != "priority":
                raise self.n.error(kw, f"expected 'priority', got '{kw}'")
            p = self.e.expr(pexpr, scope)
            if not isinstance(p, ir.Constant) or p.value < 0:
                raise self.n.error(pexpr, "priority must be a non-negative integer constant")
            priority = p.value
        binding = self.action_binding(name_node, args_node, scope, table, f"table {table.name} entry")
        ref = next(r for r in table.actions if r.action is binding.action)
        if ref.annotations.has("defaultonly"):
            raise self.n.error(name_node, f"{binding.action.name} is @defaultonly and cannot be used in entries")
        return ir.TableEntry(keys, binding, priority, self.an.annotations(ann), self.n.loc(node))

    def keysets(self, node: Tree, keys: list[ir.Expr], scope: Scope, what: str,
                select: Tree | None = None) -> list[ir.KeySet]:
        """One KeySet per key from a (tuple) keyset expression; in a `select`, a value of another type than its key's
        is blamed on the select expression, as p4c blames it."""
        items = node.children if node.data == "tuple_keyset" else [node]
        if node.data == "ks_value" and getattr(node.children[0], "data", "") == "list_expr":  # `{a, b}`: a value per key
            items = [Tree("ks_value", [c], c.meta) for c in node.children[0].children if c is not None]
        if node.data == "ks_default" and len(keys) > 1:
            return [ir.KsDefault(self.n.loc(node)) for _ in keys]
        if node.data == "ks_default" and not keys and what == "select":  # `select()`: only a default case
            return [ir.KsDefault(self.n.loc(node))]
        if len(items) != len(keys):
            raise self.n.error(node, f"{what}: keyset has {len(items)} elements but there are {len(keys)} keys")
        return [self.keyset(item, key.type, scope, select) for item, key in zip(items, keys)]

    def keyset(self, node: Tree, t: ir.Type, scope: Scope, select: Tree | None = None) -> ir.KeySet:
        loc = self.n.loc(node)
        if node.data == "ks_default":
            return ir.KsDefault(loc)
        vals = [self.keyset_value(n, t, scope, select) for n in node.children]
        for v, n in zip(vals, node.children):
            if not is_constant(v):
                raise self.n.error(n, f"{self.n.text(n)}: keyset values must be compile-time constants")
        if node.data == "ks_mask":
            return ir.KsMask(vals[0], vals[1], loc)
        if node.data == "ks_range":
            return ir.KsRange(vals[0], vals[1], loc)
        return ir.KsValue(vals[0], loc)

    def keyset_value(self, node: Tree, t: ir.Type, scope: Scope, select: Tree | None = None) -> ir.Expr:
        """A keyset value or mask of key type `t` (an untyped number also for a serializable enum)."""
        e = self.e.expr(node, scope)
        try:
            return self.typed_keyset_value(e, t, node)
        except P4Error:
            if select is None:
                raise
            raise self.n.error(select, f"select: case label {self.n.text(node)} has type {e.type} which does not "
                                       f"match the expected type {t}") from None

    def typed_keyset_value(self, e: ir.Expr, t: ir.Type, node: Tree) -> ir.Expr:
        untyped = isinstance(e, ir.Constant) and isinstance(e.type, ir.InfIntType)
        if untyped and isinstance(t, ir.EnumType) and t.underlying is not None:  # a serializable enum
            return self.e.coerce(e, t.underlying, node)
        if untyped and isinstance(t, ir.NewType):
            value = cast(ir.Constant, self.e.coerce(e, t.underlying, node))  # an untyped number made a number of t's
            return ir.Constant(t, value.loc, value.value, value.base)
        return self.e.coerce(e, t, node)


def _renamed_path(e: ir.Expr) -> str | None:
    """A key's name when a field on its path has @name, as p4c's KeyNameGenerator writes it: that name
    instead of the field's, and a global one (`@name(".ipv4")`) drops what is left of it; None when
    no field on the path is renamed (the source text is the name then)."""
    def path(e: ir.Expr) -> tuple[str, bool] | None:
        if isinstance(e, ir.VarRef):
            return e.name, False
        if isinstance(e, ir.Member):
            t = e.expr.type
            f = t.field(e.member) if isinstance(t, ir.StructLikeType) else None
            external = f.annotations.get_str("name") if f is not None else None
            if external is not None and external.startswith("."):
                return external[1:], True
            inner = path(e.expr)
            return None if inner is None else (f"{inner[0]}.{external or e.member}", inner[1] or external is not None)
        if isinstance(e, ir.ArrayIndex) and isinstance(e.index, ir.Constant):
            inner = path(e.expr)
            return None if inner is None else (f"{inner[0]}[{e.index.value}]", inner[1])
        if isinstance(e, ir.Slice):
            inner = path(e.expr)
            return None if inner is None else (f"{inner[0]}[{e.hi}:{e.lo}]", inner[1])
        return None
    found = path(e)
    return found[0] if found is not None and found[1] else None


def _nameable(node: Tree) -> bool:
    """Whether p4c names a key after this expression (its KeyNameGenerator): names, members, constant
    indices and slices, and `&`; anything else needs an explicit @name."""
    kind = node.data if isinstance(node, Tree) else ""
    if kind in ("name_ref", "int_lit"):
        return True
    if kind == "member":
        return _nameable(node.children[0])
    if kind in ("index", "slice"):
        return all(_nameable(c) for c in node.children)
    if kind == "binop":
        return str(node.children[1]) == "&" and _nameable(node.children[0]) and _nameable(node.children[2])
    return False
