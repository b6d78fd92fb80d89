"""The `aggnet` command line: one entry point, a subcommand per thing a user does.

Each subcommand lives in the module that owns it and exposes two functions:
`add_arguments(parser)` and `run(args) -> int` (the exit code), and may have
`normalize_argv(argv) -> argv` for a command line argparse cannot take as it is (`aggnet switch`
takes simple_switch_grpc's `OPTIONS -- TARGET-OPTIONS`). Errors meant for the
user are exceptions with an `exit_code` attribute; their message is printed as one
line, never as a traceback.
"""
from __future__ import annotations

import argparse
import faulthandler
import importlib
import os
import signal
import sys

# (command, module, help). Only the module of the command given is imported.
COMMANDS: list[tuple[str, str, str]] = [
    ("run", "testbed.run_cli", "run an experiment: network up, pipeline and trees installed, training, counters"),
    ("compare", "testbed.compare_cli", "run the same experiment once per scheme (innet, ps, ring) and compare them"),
    ("sweep", "testbed.sweep", "one run per point of a grid of run options, several at once, a table and a figure; "
              "resumable"),
    ("experiment", "testbed.scenario", "run a multi-job scenario file (jobs, background traffic, modes) and compare"),
    ("faults", "testbed.faults", "train while killing switches, links, aggregators or slowing workers; recover and check"),
    ("topo", "controller.topo_cli", "write a generated topology file: fat-tree K (k^3/4 hosts, 5k^2/4 switches)"),
    ("soak", "testbed.soak_cli", "train for hours on several jobs under a seeded schedule of faults; check every "
             "step and the growth of every process"),
    ("profile", "testbed.profile_cli", "time a workload model's layers here (forward, backward), as a profile file"),
    ("place", "controller.place_cli", "placement only: which switches aggregate, link loads, utilization, as JSON"),
    ("counters", "testbed.counters_cli", "read the per-job and per-port counters of a running network"),
    ("p4", "p4target.cli", "P4 programs on the embedded target: compile (check + P4Info), stf (packet tests)"),
    ("switch", "p4target.switch", "run one embedded P4 switch on Linux interfaces (like simple_switch_grpc)"),
    ("clean", "testbed.clean", "remove leftovers of AggNet networks (switch processes, veths, host namespaces); "
              "--runs 7d: old run folders"),
]


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every registered subcommand; with `command`, only that one gets its options
    (its module is imported; the others are not, so `aggnet p4 ...` starts without torch or numpy)."""
    parser = argparse.ArgumentParser(prog="aggnet", description="AggNet: in-network aggregation testbed")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, module_name, help_text in COMMANDS:
        cmd = sub.add_parser(name, help=help_text, description=help_text)
        if command is None or name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(cmd)
            cmd.set_defaults(_run=module.run)
    return parser


def no_grpc_fork_handlers() -> None:
    """gRPC's fork handlers restart its poller threads in a forked child, where, once Popen has
    closed the child's descriptors, they can abort it before it runs the program (a switch or
    host process "exiting" with SIGABRT at start, its log one `epoll_wait ... Bad file descriptor`
    line). AggNet's processes fork often and exec at once, so they need none. Call before gRPC loads."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")


# A link to the `aggnet` command under one of these names is `aggnet switch` standing in for that BMv2 binary
# (`ln -s .venv/bin/aggnet ~/bin/simple_switch`): the drop-in that Mininet P4 frameworks start by name.
BMV2_NAMES = ("simple_switch", "simple_switch_grpc")


def main(argv: list[str] | None = None, prog: str | None = None) -> int:
    """Parse arguments, run the subcommand, turn user errors into one-line messages. `prog`: the name
    this was started as (sys.argv[0] by default)."""
    name = os.path.basename(sys.argv[0] if prog is None else prog)
    argv = sys.argv[1:] if argv is None else argv
    if name in BMV2_NAMES:
        argv = ["switch", "--flavour", name, *argv]
    no_grpc_fork_handlers()
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command)
    module = next((importlib.import_module(m) for name, m, _ in COMMANDS if name == command), None)
    normalize = getattr(module, "normalize_argv", None)
    try:
        args = parser.parse_args(normalize(argv) if normalize else argv)
    except SystemExit as done:  # a usage error exits 2, as every aggnet command does; BMv2's parser exits 1
        if name in BMV2_NAMES and done.code == 2:
            return 1
        raise
    # Ctrl-C must stop a run and tear its network down even when the shell that started us ignores
    # SIGINT (a background job): Python keeps an inherited SIG_IGN unless told otherwise.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # `kill -USR1 PID` prints where every thread of a command that seems stuck is, and it goes on.
    # (To the process's own stderr: main() may run in a process whose sys.stderr is no file, as under pytest.)
    if sys.__stderr__ is not None:
        faulthandler.register(signal.SIGUSR1, file=sys.__stderr__, all_threads=True)
    try:
        return int(args._run(args) or 0)
    except KeyboardInterrupt:
        print("aggnet: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns errors into exit codes
        code = getattr(exc, "exit_code", None)
        if code is None:
            if os.environ.get("AGGNET_DEBUG"):
                raise
            print(f"aggnet: internal error: {type(exc).__name__}: {exc} (set AGGNET_DEBUG=1 for a traceback)",
                  file=sys.stderr)
            return 3
        print(str(exc), file=sys.stderr)
        return int(code)


if __name__ == "__main__":
    sys.exit(main())
