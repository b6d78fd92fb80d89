"""`aggnet p4 compile` and `aggnet p4 stf`: the embedded target's front end and packet tests.

    aggnet p4 compile PROG.p4 --p4info OUT.txtpb --device-config OUT.p4 --bmv2-json OUT.json
                                                   check a program; write its P4Info, the
                                                   self-contained source a P4Runtime client pushes
                                                   as its device config, and its lowering as BMv2
                                                   JSON (exit 0 / 2)
    aggnet p4 stf [--engine native|python] PROG.p4 TEST.stf
                                                   run an STF test (exit 0 pass, 1 mismatch, 2 error)
    aggnet p4 build PROG.p4...                     build (or find cached) the native engine's library
                                                   of each program: warms the cache (exit 0 / 1)

This is a composition root: it loads the extern modules (p4target.externs) before anything else.
"""
from __future__ import annotations

import argparse
import sys

from p4target import externs
from p4target.errors import P4Error


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="p4_command", metavar="{compile,stf,build}", required=True)
    compile_ = sub.add_parser("compile", help="check a P4 program and write its P4Info",
                              description="Check a P4_16 v1model program; write its P4Info (text format).")
    compile_.add_argument("program", metavar="PROG.p4", nargs="?")
    compile_.add_argument("--list-passes", action="store_true",
                          help="list the front end's passes in the order they run, and exit")
    compile_.add_argument("--dump-after", metavar="PASS", action="append", default=[],
                          help="print the program as P4 after this pass (see --list-passes); repeatable")
    compile_.add_argument("--p4info", metavar="OUT.txtpb", help="where to write the P4Info")
    compile_.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                          help="define a preprocessor macro, as p4c -D does")
    compile_.add_argument("--device-config", metavar="OUT.p4",
                          help="where to write the device config a P4Runtime client pushes to `aggnet switch`: "
                               "the program's source with its local #includes inlined")
    compile_.add_argument("--bmv2-json", metavar="OUT.json",
                          help="where to write the program lowered as BMv2 JSON (what simple_switch runs; "
                               "p4c --target bmv2 writes the same shape)")
    compile_.set_defaults(_p4_run=_compile)
    stf = sub.add_parser("stf", help="run a p4c-style STF packet test",
                         description="Run an STF test on the embedded pipeline: "
                                     "exit 0 pass, 1 mismatch (with a diff), 2 malformed test or program.")
    stf.add_argument("program", metavar="PROG.p4|PROG.json", help="P4 source, or p4c's BMv2 JSON")
    stf.add_argument("test", metavar="TEST.stf")
    stf.add_argument("-v", "--verbose", action="store_true", help="also print register/counter values read")
    stf.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VALUE]",
                     help="define a preprocessor macro, as p4c -D does")
    stf.add_argument("--engine", choices=("native", "python"), default="native",
                     help="native: the program compiled to C (default; falls back to python with a warning "
                          "for constructs it lacks); python: the reference engine")
    stf.set_defaults(_p4_run=_stf)
    build = sub.add_parser("build", help="build the native engine's library of P4 programs (warms the cache)",
                           description="Build (or find cached) the native engine's library of each program.")
    build.add_argument("programs", nargs="+", metavar="PROG.p4")
    build.set_defaults(_p4_run=_build)


def run(args: argparse.Namespace) -> int:
    externs.load()
    return args._p4_run(args)


def _defines(args: argparse.Namespace) -> dict[str, str]:
    from p4target.frontend.preprocess import parse_define

    return dict(parse_define(d) for d in args.defines)


def _compile(args: argparse.Namespace) -> int:
    from p4target import load
    from p4target.device_config import device_config_source
    from p4target.frontend import load_program
    from p4target.p4info import build_p4info, p4info_text

    if args.list_passes:
        _list_passes()
        return 0
    if args.program is None:
        raise P4Error("the following argument is required: PROG.p4")
    program = load_program(args.program, defines=_defines(args), after=_dumper(args.dump_after))
    info = build_p4info(program)
    lowered = load.lowered(program).form  # what the engines run: a program that is ok here loads on the switch
    outputs = []
    if args.p4info:
        outputs.append(("P4Info", args.p4info, p4info_text(info)))
    if args.device_config:
        outputs.append(("device config", args.device_config, device_config_source(args.program)))
    if args.bmv2_json:
        from p4target.lowered import to_json

        outputs.append(("BMv2 JSON", args.bmv2_json, to_json.dumps(lowered)))
    for warning in program.warnings:
        print(warning, file=sys.stderr)
    for _what, path, text in outputs:
        _write(path, text)
    print(f"{args.program}: ok ({len(info.tables)} tables, {len(info.actions)} actions)"
          + "".join(f", {what} written to {path}" for what, path, _ in outputs))
    return 0


_CHECK = ("check", "names resolved and types checked (frontend/checker/): the program before the passes")


def _list_passes() -> None:
    from p4target.frontend.passes import PASSES

    rows = [_CHECK] + [(p.name, p.doc) for p in PASSES]
    width = max(len(name) for name, _ in rows)
    for name, doc in rows:
        print(f"{name:<{width}}  {doc}")


def _dumper(names: list[str]):
    """The after-pass callback printing the program after each pass named in `names`."""
    from p4target.frontend.passes import PASS_NAMES
    from p4target.frontend.to_p4 import program_text

    known = (_CHECK[0], *PASS_NAMES)
    for name in names:
        if name not in known:
            raise P4Error(f"--dump-after: unknown pass '{name}' (one of: {', '.join(known)})")
    if not names:
        return None

    def after(name: str, program) -> None:
        if name in names:
            print(f"// after {name}")
            print(program_text(program), end="")
    return after


def _write(path: str, text: str) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:
        raise P4Error(f"cannot write {path}: {exc.strerror}") from None


def _stf(args: argparse.Namespace) -> int:
    from p4target.stf import run_stf_file

    result = run_stf_file(args.program, args.test, args.engine, _defines(args))
    if args.verbose:
        for line in result.log:
            print(line)
    print(result.report(args.test))
    return 0 if result.passed else 1


def _build(args: argparse.Namespace) -> int:
    from p4target import load
    from p4target.backends.c import generate_c
    from p4target.backends.layout import Unsupported
    from p4target.frontend import load_program
    from p4target.lowered.from_ir import NotLowered
    from p4target.native.build import BuildError, build

    failed = 0
    for path in args.programs:
        try:
            with build(generate_c(load.lowered(load_program(path)).form).source) as library:
                print(f"{path}: {library}")
        except (NotLowered, Unsupported) as exc:
            print(f"{path}: runs on the Python engine (the native engine lacks {exc.message})")
        except (P4Error, BuildError) as exc:
            print(f"{path}: {exc}")
            failed += 1
    return 1 if failed else 0
