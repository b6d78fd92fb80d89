"""The IR printed back as P4 source: what `aggnet p4 compile --dump-after PASS` shows.

Like p4c's `--top4`, the output is for reading what a pass did, not for compiling again:
types come out in p4c's spelling, constants with their widths (`8w5`), and a node this
printer does not know comes out as its class name in angle brackets rather than failing.
"""
from __future__ import annotations

from . import ir

_INDENT = "    "


def program_text(program: ir.Program) -> str:
    """The whole program: types, constants, top-level actions, functions, blocks, main."""
    out: list[str] = []
    for name, t in program.types.items():
        if isinstance(t, ir.StructLikeType):
            keyword = {"HeaderType": "header", "HeaderUnionType": "header_union"}.get(type(t).__name__, "struct")
            out.append(f"{keyword} {name} {{")
            out += [f"{_INDENT}{f.type} {f.name};" for f in t.fields]
            out.append("}")
    out += [f"const {c.type} {c.name} = {expr(c.value)};" for c in program.constants.values()]
    for a in program.actions.values():
        out += _action(a, 0)
    for f in program.functions.values():
        out.append(f"{f.return_type} {f.name}({_params(f.params)}) {{")
        out += _stmts(f.body.stmts, 1)
        out.append("}")
    out += [f"{_instance(i)}" for i in program.instances]
    for p in program.parsers.values():
        out += _parser(p)
    for c in program.controls.values():
        out += _control(c)
    m = program.main
    if m is not None:
        blocks = (m.parser, m.verify_checksum, m.ingress, m.egress, m.compute_checksum, m.deparser)
        out.append(f"V1Switch({', '.join(b.name + '()' for b in blocks)}) {m.name};")
    return "\n".join(out) + "\n"


def expr(e: ir.Expr | None) -> str:
    """One expression, fully parenthesized where operators nest."""
    if e is None:
        return "<none>"
    printer = _EXPRS.get(type(e))
    return printer(e) if printer else f"<{type(e).__name__}>"


def _constant(e: ir.Constant) -> str:
    if isinstance(e.type, ir.BitsType):
        return f"{e.type.width}w{e.value}"
    if isinstance(e.type, ir.IntType):
        return f"{e.type.width}s{e.value}"
    return str(e.value)


def _args(args: list) -> str:
    return ", ".join(expr(a) for a in args)


def _type_args(types: list) -> str:
    return f"<{', '.join(str(t) for t in types)}>" if types else ""


_EXPRS: dict = {
    ir.Constant: _constant,
    ir.BoolLiteral: lambda e: "true" if e.value else "false",
    ir.StringLiteral: lambda e: f'"{e.value}"',
    ir.VarRef: lambda e: e.name,
    ir.InstanceRef: lambda e: e.name,
    ir.Member: lambda e: f"{expr(e.expr)}.{e.member}",
    ir.ArrayIndex: lambda e: f"{expr(e.expr)}[{expr(e.index)}]",
    ir.Slice: lambda e: f"{expr(e.expr)}[{e.hi}:{e.lo}]",
    ir.Unary: lambda e: f"{e.op}{expr(e.expr)}",
    ir.Binary: lambda e: f"({expr(e.left)} {e.op} {expr(e.right)})",
    ir.Mux: lambda e: f"({expr(e.cond)} ? {expr(e.then)} : {expr(e.else_)})",
    ir.Cast: lambda e: f"({e.type}){expr(e.expr)}",
    ir.ListExpr: lambda e: f"{{{_args(e.items)}}}",
    ir.StructExpr: lambda e: "{" + ", ".join(f"{k} = {expr(v)}" for k, v in e.fields.items()) + "}",
    ir.EnumMember: lambda e: f"{e.type}.{e.member}",
    ir.ErrorMember: lambda e: f"error.{e.member}",
    ir.DontCare: lambda e: "_",
    ir.ExternMethodCall: lambda e: f"{expr(e.target)}.{e.method}{_type_args(e.type_args)}({_args(e.args)})",
    ir.ExternFunctionCall: lambda e: f"{e.name}{_type_args(e.type_args)}({_args(e.args)})",
    ir.ActionCall: lambda e: f"{e.action.name if e.action else '?'}({_args(e.args)})",
    ir.HeaderMethodCall: lambda e: f"{expr(e.header)}.{e.method}({_args(e.args)})",
    ir.TableApply: lambda e: f"{e.table.name if e.table else '?'}.apply()",
    ir.TableHitMiss: lambda e: f"{e.table.name if e.table else '?'}.apply().{e.which}",
    ir.ActionRun: lambda e: f"{e.table.name if e.table else '?'}.apply().action_run",
    ir.FunctionCall: lambda e: f"{e.function.name if e.function else '?'}({_args(e.args)})",
    ir.ApplyCall: lambda e: f"{e.instance.name if e.instance else '?'}.apply({_args(e.args)})",
}


def _stmts(stmts: list, depth: int) -> list[str]:
    return [line for s in stmts for line in _stmt(s, depth)]


def _stmt(s: ir.Stmt, depth: int) -> list[str]:
    pad = _INDENT * depth
    if isinstance(s, ir.Block):
        return [pad + "{", *_stmts(s.stmts, depth + 1), pad + "}"]
    if isinstance(s, ir.Assign):
        return [f"{pad}{expr(s.lhs)} = {expr(s.rhs)};"]
    if isinstance(s, ir.MethodCallStmt):
        return [f"{pad}{expr(s.call)};"]
    if isinstance(s, ir.If):
        lines = [f"{pad}if ({expr(s.cond)})", *_stmt(s.then or ir.Block(s.loc), depth)]
        if s.else_ is not None:
            lines += [f"{pad}else", *_stmt(s.else_, depth)]
        return lines
    if isinstance(s, ir.Switch):
        lines = [f"{pad}switch ({expr(s.subject)}) {{"]
        for case in s.cases:
            labels = ", ".join("default" if lab is None else lab.name if isinstance(lab, ir.Action) else expr(lab)
                               for lab in case.labels)
            lines.append(f"{pad}{_INDENT}{labels}:")
            if case.body is not None:
                lines += _stmt(case.body, depth + 2)
        return [*lines, pad + "}"]
    if isinstance(s, ir.Loop):  # its condition is the body's first statement
        update = ", ".join(line.strip().rstrip(";") for line in _stmts(s.update.stmts, 0))
        return [f"{pad}for (; ; {update})", *_stmt(s.body, depth)]
    if isinstance(s, ir.LoopJump):
        return [f"{pad}{s.kind};"]
    if isinstance(s, ir.Exit):
        return [f"{pad}exit;"]
    if isinstance(s, ir.Return):
        return [f"{pad}return{'' if s.value is None else ' ' + expr(s.value)};"]
    if isinstance(s, ir.VarDeclStmt) and s.decl is not None:
        return [pad + _var(s.decl)]
    return [f"{pad}<{type(s).__name__}>;"]


def _var(d: ir.VarDecl) -> str:
    return f"{d.type} {d.name}{'' if d.init is None else ' = ' + expr(d.init)};"


def _params(params: list[ir.Param]) -> str:
    return ", ".join(f"{p.direction + ' ' if p.direction else ''}{p.type} {p.name}" for p in params)


def _action(a: ir.Action, depth: int) -> list[str]:
    pad = _INDENT * depth
    return [f"{pad}action {a.name}({_params(a.params)}) {{", *_stmts(a.body.stmts, depth + 1), pad + "}"]


def _instance(i: ir.ExternInstance) -> str:
    return f"{i.extern}{_type_args(i.type_args)}({_args(i.args)}) {i.name};"


def _keyset(k: ir.KeySet) -> str:
    if isinstance(k, ir.KsValue):
        return expr(k.value)
    if isinstance(k, ir.KsMask):
        return f"{expr(k.value)} &&& {expr(k.mask)}"
    if isinstance(k, ir.KsRange):
        return f"{expr(k.lo)} .. {expr(k.hi)}"
    return "default"


def _binding(b: ir.ActionBinding) -> str:
    return f"{b.action.name}({_args(b.args)})"


def _table(t: ir.Table, depth: int) -> list[str]:
    pad, inner = _INDENT * depth, _INDENT * (depth + 1)
    lines = [f"{pad}table {t.name} {{"]
    if t.keys:
        lines += [f"{inner}key = {{", *(f"{inner}{_INDENT}{expr(k.expr)}: {k.match_kind};" for k in t.keys),
                  inner + "}"]
    lines.append(f"{inner}actions = {{ {' '.join(r.action.name + ';' for r in t.actions)} }}")
    if t.default_action is not None:
        lines.append(f"{inner}{'const ' if t.default_action_const else ''}default_action = "
                     f"{_binding(t.default_action)};")
    if t.size is not None:
        lines.append(f"{inner}size = {t.size};")
    for prop, inst in (("counters", t.direct_counter), ("meters", t.direct_meter),
                       ("implementation", t.implementation)):
        if inst is not None:
            lines.append(f"{inner}{prop} = {inst.name};")
    if t.entries:
        lines.append(f"{inner}{'const ' if t.entries_const else ''}entries = {{")
        for e in t.entries:
            prio = "" if e.priority is None else f"priority={e.priority}: "
            lines.append(f"{inner}{_INDENT}{prio}({', '.join(_keyset(k) for k in e.keys)}): {_binding(e.action)};")
        lines.append(inner + "}")
    return [*lines, pad + "}"]


def _locals(decls: list, depth: int) -> list[str]:
    pad, lines = _INDENT * depth, []
    for d in decls:
        if isinstance(d, ir.Action):
            lines += _action(d, depth)
        elif isinstance(d, ir.Table):
            lines += _table(d, depth)
        elif isinstance(d, ir.ExternInstance):
            lines.append(pad + _instance(d))
        elif isinstance(d, ir.VarDecl):
            lines.append(pad + _var(d))
        else:
            lines.append(f"{pad}<{type(d).__name__} {getattr(d, 'name', '')}>;")
    return lines


def _transition(t: ir.Transition) -> list[str]:
    if isinstance(t, ir.DirectTransition):
        return [f"transition {t.next};"]
    if isinstance(t, ir.SelectTransition):
        cases = [f"{_INDENT}({', '.join(_keyset(k) for k in c.keysets)}): {c.next};" for c in t.cases]
        return [f"transition select({_args(t.keys)}) {{", *cases, "}"]
    return [f"<{type(t).__name__}>;"]


def _parser(p: ir.Parser) -> list[str]:
    lines = [f"parser {p.name}({_params(p.params)}) {{", *_locals(p.locals, 1)]
    for state in p.states.values():
        lines.append(f"{_INDENT}state {state.name} {{")
        lines += _stmts(state.body, 2)
        lines += [_INDENT * 2 + line for line in _transition(state.transition)]
        lines.append(_INDENT + "}")
    return [*lines, "}"]


def _control(c: ir.Control) -> list[str]:
    return [f"control {c.name}({_params(c.params)}) {{", *_locals(c.locals, 1),
            f"{_INDENT}apply {{", *_stmts(c.body.stmts, 2), _INDENT + "}", "}"]
