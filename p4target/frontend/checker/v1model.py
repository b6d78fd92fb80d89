"""v1model's package: `V1Switch(...) main;`, its six stages and the types they must agree on."""
from __future__ import annotations

from typing import cast

from lark import Tree

from .. import ir
from ..typing import same_type
from .blocks import BlockRules
from .names import BlockDecl

V1SWITCH_STAGES = ["parser", "verify_checksum", "ingress", "egress", "compute_checksum", "deparser"]


class V1ModelRules(BlockRules):
    """The main package instance."""

    def main_instance(self, node: Tree) -> None:
        ann, type_node, args_node, name_node = node.children
        pkg = self.top.lookup(self.name_of(type_node.children[0] if type_node.data == "specialized_type" else type_node))
        if not (isinstance(pkg, tuple) and pkg[1] == "package"):
            raise self.error(type_node, f"unsupported: top-level instantiation of {self.text(type_node)}")
        if pkg[2] != "V1Switch":
            raise self.error(type_node, f"unsupported: package {pkg[2]} (only V1Switch)")
        args = self.arg_nodes(args_node)
        if len(args) != len(V1SWITCH_STAGES):
            raise self.error(args_node, f"V1Switch: expected 6 arguments, got {len(args)}")
        blocks = []
        for (_, arg), stage in zip(args, V1SWITCH_STAGES):
            if not (isinstance(arg, Tree) and arg.data == "ctor_call"):
                raise self.error(arg, f"V1Switch {stage}: expected a parser or control instance like X()")
            bname = self.name_of(arg.children[0])
            decl = self.top.lookup(bname)
            if not isinstance(decl, BlockDecl):
                raise self.error(arg, f"{bname}: no such parser or control")
            want = "parser" if stage == "parser" else "control"
            if decl.kind != want:
                raise self.error(arg, f"V1Switch {stage}: {bname} is not a {want}")
            block = decl.checked
            if decl.type_params:
                raise self.error(arg, f"unsupported: generic {want} {bname} as a V1Switch argument")
            if decl.ctor_params or self.arg_nodes(arg.children[1]):
                block = self.build_block(decl, bname, self.ctor_bindings(decl, arg.children[1], self.top, arg))
                self.add_block(bname, block)
            blocks.append(block)
        self.check_v1switch_types(blocks, args)
        parser = cast(ir.Parser, blocks[0])  # built above: a parser, then five controls
        vr, ig, eg, ck, dep = (cast(ir.Control, b) for b in blocks[1:])
        self.program.main = ir.V1SwitchInstance(self.name_of(name_node), parser, vr, ig, eg, ck, dep, loc=self.loc(name_node))

    def check_v1switch_types(self, blocks: list, args: list) -> None:
        """H and M must agree across stages, as V1Switch<H, M> requires."""
        p = blocks[0]
        if len(p.params) != 4:
            raise self.error(args[0][1], f"{p.name}: a v1model parser takes 4 parameters")
        h, m = p.params[1].type, p.params[2].type
        expected = {1: [h, m], 2: [h, m, None], 3: [h, m, None], 4: [h, m], 5: [None, h]}
        for i in range(1, 6):
            ctl = blocks[i]
            want = expected[i]
            if len(ctl.params) != len(want):
                raise self.error(args[i][1], f"{ctl.name}: {V1SWITCH_STAGES[i]} control takes {len(want)} parameters")
            for prm, t in zip(ctl.params, want):
                if t is not None and not same_type(prm.type, t):
                    raise self.error(args[i][1], f"{ctl.name}: parameter {prm.name}: Cannot unify {prm.type} to {t}")
