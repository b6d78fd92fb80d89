"""v1model's package: `V1Switch(...) main;`, its six stages and the types they must agree on."""
from __future__ import annotations

from typing import cast

from lark import Tree

from .. import ir
from ..typing import same_type
from .blocks import Blocks
from .calls import Calls
from .names import BlockDecl, Names

V1SWITCH_STAGES = ["parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser"]
V1SWITCH_PARAMS = ["p", "vr", "ig", "eg", "ck", "dep"]  # v1model.p4's parameter names, for named arguments
# Each stage's parameter directions as v1model.p4 declares them ("": packet_in / packet_out).
V1SWITCH_DIRECTIONS = [["", "out", "inout", "inout"], ["inout", "inout"], ["inout", "inout", "inout"],
                       ["inout", "inout", "inout"], ["inout", "inout"], ["", "in"]]


class V1ModelRules:
    """The main package instance."""

    def __init__(self, n: Names, ca: Calls, bl: Blocks):
        self.n, self.ca, self.bl = n, ca, bl

    def main_instance(self, node: Tree) -> None:
        """A top-level package instance: `main` must be a V1Switch (p4c's BMv2 back end checks no other)."""
        ann, type_node, args_node, name_node = node.children
        pkg = self.n.top.lookup(self.n.name_of(type_node.children[0] if type_node.data == "specialized_type" else type_node))
        if not (isinstance(pkg, tuple) and pkg[1] == "package"):
            raise self.n.error(type_node, f"unsupported: top-level instantiation of {self.n.text(type_node)}")
        if pkg[2] != "V1Switch":
            if self.n.name_of(name_node) != "main":
                return  # as in p4c, only what `main` is matters to the target
            raise self.n.error(name_node, f"package {pkg[2]}: main package does not match the expected model (V1Switch)")
        args = self.v1switch_args(args_node)
        blocks = []
        for (_, arg), stage in zip(args, V1SWITCH_STAGES):
            if not (isinstance(arg, Tree) and arg.data == "ctor_call"):
                raise self.n.error(arg, f"V1Switch {stage}: expected a parser or control instance like X()")
            bname = self.n.name_of(arg.children[0])
            decl = self.n.top.lookup(bname)
            if not isinstance(decl, BlockDecl):
                raise self.n.error(arg, f"{bname}: no such parser or control")
            want = "parser" if stage == "parser" else "control"
            if decl.kind != want:
                raise self.n.error(arg, f"V1Switch {stage}: {bname} is not a {want}")
            block = decl.checked
            if decl.type_params:
                raise self.n.error(arg, f"unsupported: generic {want} {bname} as a V1Switch argument")
            if decl.ctor_params or self.ca.arg_nodes(arg.children[1]):
                block = self.bl.build_block(decl, bname, self.bl.ctor_bindings(decl, arg.children[1], self.n.top, arg))
                self.bl.add_block(bname, block)
            blocks.append(block)
        self.check_v1switch_types(blocks, args)
        parser = cast(ir.Parser, blocks[0])  # built above: a parser, then five controls
        vr, ig, eg, ck, dep = (cast(ir.Control, b) for b in blocks[1:])
        self.n.program.main = ir.V1SwitchInstance(self.n.name_of(name_node), parser, vr, ig, eg, ck, dep, loc=self.n.loc(name_node))

    def v1switch_args(self, args_node: Tree) -> list[tuple[str | None, Tree]]:
        """The six arguments in parameter order: `V1Switch(p = P(), ig = I(), ...)` names them."""
        args = self.ca.arg_nodes(args_node)
        if len(args) != len(V1SWITCH_STAGES):
            raise self.n.error(args_node, f"V1Switch: expected 6 arguments, got {len(args)}")
        if all(name is None for name, _ in args):
            return args
        by_name = {name or "": arg for name, arg in args}
        if sorted(by_name) != sorted(V1SWITCH_PARAMS):
            raise self.n.error(args_node, f"V1Switch: name every argument once, as {', '.join(V1SWITCH_PARAMS)}")
        return [(name, by_name[name]) for name in V1SWITCH_PARAMS]

    def check_v1switch_types(self, blocks: list, args: list) -> None:
        """H and M must agree across stages, as V1Switch<H, M> requires."""
        p = blocks[0]
        if len(p.params) != 4:
            raise self.n.error(args[0][1], f"{p.name}: a v1model parser takes 4 parameters")
        h, m = p.params[1].type, p.params[2].type
        if not _headers_struct(h):
            raise self.n.error(p.params[1].loc, f"{h}: the type should be a struct of headers, stacks, or unions")
        expected = {1: [h, m], 2: [h, m, None], 3: [h, m, None], 4: [h, m], 5: [None, h]}
        for i in range(1, 6):
            ctl = blocks[i]
            want = expected[i]
            if len(ctl.params) != len(want):
                raise self.n.error(args[i][1], f"{ctl.name}: {V1SWITCH_STAGES[i]} control takes {len(want)} parameters")
            for prm, t in zip(ctl.params, want):
                if t is not None and not same_type(prm.type, t):
                    raise self.n.error(args[i][1], f"{ctl.name}: parameter {prm.name}: Cannot unify {prm.type} to {t}")
        for block, directions, (_, arg) in zip(blocks, V1SWITCH_DIRECTIONS, args):
            for prm, direction in zip(block.params, directions):
                if prm.direction != direction:
                    raise self.n.error(arg, f"{block.name}: Cannot unify '{prm.direction or 'directionless'}' parameter "
                                          f"'{prm.name}' with V1Switch's '{direction}' parameter: different directions")


def _headers_struct(t: ir.Type) -> bool:
    """What V1Switch's H must be (p4c's BMv2 back end): a struct of headers, stacks, unions and such structs."""
    return isinstance(t, ir.StructType) and all(
        isinstance(f.type, (ir.HeaderType, ir.HeaderUnionType, ir.StackType)) or _headers_struct(f.type)
        for f in t.fields)
