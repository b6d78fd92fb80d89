"""`aggnet soak`: the command line of testbed.soak, and `--isolate`.

With `--isolate` the command runs itself again inside a fresh network namespace and a mount
namespace with its own /sys (so /sys/class/net shows that namespace's interfaces) and its own
/run/aggnet, loopback up. Its network then takes a run slot of that namespace (testbed.slots), and
its testbed record and unmarked switch processes are out of reach of `aggnet clean --all`
elsewhere (testbed.clean.PRIVATE_STATE_ENV).
Killed, it leaves nothing behind: the namespace and its veths go with it, its switches die with
it (PR_SET_PDEATHSIG) and its host shells are orphans `aggnet clean` removes.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from testbed.soak import DEFAULT_SCENARIO, SoakError

ISOLATED_ENV = "AGGNET_SOAK_ISOLATED"  # set inside the namespace --isolate made
# /sys of the new namespace; a private /run/aggnet (its own lock and testbed records: `aggnet clean`
# elsewhere, of any version, cannot see the soak's network to tear it down); loopback up.
ENTER = 'mount -t sysfs sysfs /sys && mount -t tmpfs tmpfs /run/aggnet && ip link set lo up && exec "$@"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
    span = parser.add_mutually_exclusive_group(required=True)
    span.add_argument("--hours", type=float, help="faults go on for this many hours (then the round in progress ends)")
    span.add_argument("--minutes", type=float, help="the same in minutes (the short form the suite runs)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault schedule (same seed, same schedule)")
    parser.add_argument("--gap", type=float, default=20.0, help="mean seconds between faults (default 20)")
    parser.add_argument("--sample-every", type=float, default=5.0,
                        help="seconds between resource samples (default 5)")
    parser.add_argument("--scenario", default=DEFAULT_SCENARIO,
                        help="scenario file with the jobs (default experiments/soak.yaml)")
    parser.add_argument("--steps", type=int, help="training steps per round (default: the scenario's)")
    parser.add_argument("--out", default="runs", help="folder for the run folder (default: runs)")
    parser.add_argument("--isolate", action="store_true",
                        help="run in a fresh network namespace of its own (needs unshare), out of reach of "
                             "`aggnet clean --all` elsewhere")


def span_seconds(args: argparse.Namespace) -> float:
    span = args.hours * 3600 if args.hours is not None else args.minutes * 60
    if span <= 0:
        raise SoakError(f"{'--hours' if args.hours is not None else '--minutes'}: must be positive")
    for flag, value in (("--gap", args.gap), ("--sample-every", args.sample_every)):
        if value <= 0:
            raise SoakError(f"{flag}: must be positive, got {value:g}")
    if args.steps is not None and args.steps < 2:
        raise SoakError(f"--steps: at least 2, got {args.steps}")
    return span


def isolated(argv: list[str]) -> int:
    """Run `aggnet ARGV` in a new network and mount namespace; its exit code."""
    from testbed.clean import PRIVATE_STATE_ENV, STATE_DIR

    os.makedirs(STATE_DIR, exist_ok=True)  # the mount point of the private one
    env = {**os.environ, ISOLATED_ENV: "1", PRIVATE_STATE_ENV: "1"}
    command = ["unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c", ENTER, "sh",
               sys.executable, "-m", "testbed.cli", *argv]
    try:
        return subprocess.run(command, env=env).returncode
    except FileNotFoundError:
        raise SoakError("--isolate: no `unshare` command (util-linux)") from None


def run(args: argparse.Namespace) -> int:
    from testbed.growth import steady_heap
    from testbed.network import new_run_dir
    from testbed.soak import SoakRun, failure_lines, load_soak_scenario

    span = span_seconds(args)
    if os.geteuid() != 0:
        raise SoakError("aggnet soak: Mininet needs root (run with sudo)")
    if args.isolate and not os.environ.get(ISOLATED_ENV):
        return isolated([a for a in sys.argv[1:] if a != "--isolate"])
    steady_heap()
    scn = load_soak_scenario(args.scenario, args.steps)
    run_dir = Path(new_run_dir(args.out))
    print(f"soak: {span / 60:g} min of faults (seed {args.seed}) on {scn.network.topo}, run folder {run_dir}",
          flush=True)
    report = SoakRun(scn, run_dir, span, args.seed, args.gap, args.sample_every,
                     say=lambda m: print(m, flush=True)).execute()
    print(json.dumps({"jobs": report["jobs"], "verdicts": report["verdicts"]}, indent=2))
    print(f"report: {run_dir}/soak.json, plot: {run_dir}/soak.png")
    problems = failure_lines(report)
    if problems:
        print(f"aggnet soak: {problems[0]}" + (f" (and {len(problems) - 1} more in soak.json)"
                                               if len(problems) > 1 else ""), file=sys.stderr)
        return 1
    return 0

