"""One entry point for every host process: `python -m hosts ROLE ...`.

    python -m hosts worker  --config JOB.json --worker h1 --out DIR [--checkpoint CKPT [--resume-step N]]
    python -m hosts bench   --config JOB.json --worker h1 --elements N [--seed S] [--dtype int32|float32] --out DIR
    python -m hosts model   --config JOB.json --worker h1 --model resnet50 [--profile cpu] [--bucket-mb 25]
                            [--iterations 3] [--grad-scale 1] [--link-mbps R] [--time-scale 1] --out DIR
    python -m hosts ps      --config JOB.json --out DIR
    python -m hosts hostagg --config JOB.json --out DIR
    python -m hosts replica --config JOB.json --out DIR
    python -m hosts spill   --config JOB.json --out DIR
    python -m hosts traffic send|recv ...

worker trains (hosts.agent), bench all-reduces one seeded vector and checks the sum
(hosts.allreduce_bench), model plays DDP iterations of a real model
(hosts.models.workload), ps, hostagg and replica serve a job's parameter server, host
aggregator and its replica; spill sums the chunks of a job sharing its switch's slots that
found their slot taken (hosts.spill); traffic is a background flow (hosts.traffic). Every role but
traffic reads the job's agent config (hosts.agent_config) and logs to DIR/NAME.log; each
ends with exit 0, or with one line "WHO: what failed" on stderr and the error's exit code
(hosts.process.run_main: 2 bad input, 1 a failed peer or a wrong sum, 3 internal error).
"""
from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .process import run_main, setup_logging

RoleBody = Callable[[argparse.Namespace], None]


@dataclass(frozen=True)
class Role:
    """A kind of host process: its options, its body, and how its errors name it."""

    help: str
    options: Callable[[argparse.ArgumentParser], None]
    body: RoleBody
    who: Callable[[argparse.Namespace], str]


def _job_options(parser: argparse.ArgumentParser, out_help: str = "folder for NAME.log") -> None:
    parser.add_argument("--config", required=True, help="the job's agent config (JSON)")
    parser.add_argument("--out", default=".", help=out_help)


def _worker_options(parser: argparse.ArgumentParser) -> None:
    _job_options(parser, "folder for NAME.log, NAME.metrics.jsonl, NAME.result.json")
    parser.add_argument("--worker", required=True, help="this worker's name in the config (h1, h2, ...)")
    parser.add_argument("--checkpoint", default=None, help="folder for per-step checkpoints (hosts.checkpoint)")
    parser.add_argument("--resume-step", type=int, default=-1, help="continue after this checkpointed step")


def _bench_options(parser: argparse.ArgumentParser) -> None:
    from .allreduce_bench import DTYPES

    _job_options(parser, "folder for NAME.log and NAME.bench.json")
    parser.add_argument("--worker", required=True, help="this worker's name in the config")
    parser.add_argument("--elements", type=int, required=True, help="vector length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtype", choices=DTYPES, default="int32")


def _model_options(parser: argparse.ArgumentParser) -> None:
    from .models import MODEL_NAMES

    _job_options(parser, "folder for NAME.log and NAME.model.json")
    parser.add_argument("--worker", required=True, help="this worker's name in the config")
    parser.add_argument("--model", required=True, choices=MODEL_NAMES)
    parser.add_argument("--profile", default="cpu", help="shipped profile name (cpu, a100, ...) or a profile file")
    parser.add_argument("--batch", type=int, default=None, help="samples an iteration (default: the profile's)")
    parser.add_argument("--bucket-mb", type=float, default=None, help="DDP's bucket cap (default 25, first 1)")
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--grad-scale", type=float, default=1.0, help="fraction of every bucket sent")
    parser.add_argument("--link-mbps", type=float, default=None, help="the real link rate, for the analytic model")
    parser.add_argument("--time-scale", type=float, default=1.0, help="compute x F, times reported / F")


def _server_options(parser: argparse.ArgumentParser) -> None:
    _job_options(parser, "folder for NAME.log and NAME.agg.json")


def _worker(args: argparse.Namespace) -> None:
    from .agent import run_agent
    from .agent_config import load_config

    config = load_config(args.config)
    setup_logging(args.out, args.worker)
    checkpoint = Path(args.checkpoint) if args.checkpoint else None
    run_agent(config, args.worker, Path(args.out), args.config, checkpoint, args.resume_step)


def _bench(args: argparse.Namespace) -> None:
    from .agent_config import load_config
    from .allreduce_bench import run_bench

    config = load_config(args.config)
    setup_logging(args.out, args.worker)
    run_bench(config, args.worker, args.elements, args.seed, args.dtype, Path(args.out), args.config)


def _model(args: argparse.Namespace) -> None:
    from .agent_config import load_config
    from .models.workload import run_model

    config = load_config(args.config)
    setup_logging(args.out, args.worker)
    run_model(config, args.worker, args.model, args.profile, args.bucket_mb, args.iterations, args.grad_scale,
              args.link_mbps, args.time_scale, Path(args.out), args.config, args.batch)


def _ps(args: argparse.Namespace) -> None:
    from .agent_config import load_config
    from .ps import run_ps

    run_ps(load_config(args.config), Path(args.out), args.config)


def _hostagg(args: argparse.Namespace) -> None:
    from .agent_config import load_config
    from .host_agg import run_host_aggregator
    from .split_agg import run_split_aggregator

    config = load_config(args.config)  # a split job's aggregator also sits in the job's tree
    (run_split_aggregator if config.scheme == "split" else run_host_aggregator)(config, Path(args.out), args.config)


def _replica(args: argparse.Namespace) -> None:
    from .agent_config import load_config
    from .replica import run_replica

    run_replica(load_config(args.config), Path(args.out), args.config)


def _spill(args: argparse.Namespace) -> None:
    from .agent_config import load_config
    from .spill import run_spill_server

    run_spill_server(load_config(args.config), Path(args.out), args.config)


def _traffic_options(parser: argparse.ArgumentParser) -> None:
    from .traffic import add_arguments

    add_arguments(parser)


def _traffic(args: argparse.Namespace) -> None:
    from .traffic import run_flow

    run_flow(args)


ROLES: dict[str, Role] = {
    "worker": Role("train as one worker of the job", _worker_options, _worker, lambda a: f"agent {a.worker}"),
    "bench": Role("all-reduce one seeded vector and check the sum", _bench_options, _bench,
                  lambda a: f"bench {a.worker}"),
    "model": Role("play DDP iterations of a real model through the job's all-reduce", _model_options, _model,
                  lambda a: f"model {a.worker}"),
    "ps": Role("serve the job as its parameter server", _server_options, _ps, lambda a: "ps"),
    "hostagg": Role("serve the job as its host aggregator", _server_options, _hostagg, lambda a: "host aggregator"),
    "replica": Role("stand by as the host aggregator's replica", _server_options, _replica, lambda a: "replica"),
    "spill": Role("sum the chunks that spilled from a shared slot pool (until SIGTERM)", _server_options, _spill,
                  lambda a: "spill server"),
    "traffic": Role("send or receive one background flow", _traffic_options, _traffic, lambda a: "traffic"),
}


def main(argv: list[str] | None = None) -> int:
    """Parse `ROLE OPTIONS...`, run the role; the exit code of hosts.process.run_main."""
    parser = argparse.ArgumentParser(prog="python -m hosts", description="AggNet host processes")
    sub = parser.add_subparsers(dest="host_role", required=True, metavar="ROLE")
    for name, role in ROLES.items():
        role.options(sub.add_parser(name, help=role.help, description=role.help))
    args = parser.parse_args(argv)
    role = ROLES[args.host_role]

    def body() -> int:
        role.body(args)
        return 0

    return run_main(body, role.who(args))
