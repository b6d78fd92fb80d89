"""`aggnet profile MODEL`: time a workload model's layers on this machine, as a profile file.

    aggnet profile resnet50 --batch 2 --repeats 5             # -> hosts/models/profiles/resnet50-cpu.json
    aggnet profile resnet50 --out my.json                     # anywhere; run with --profile my.json
    aggnet profile resnet50 --rescale-to 0.1036 --name a100 --batch 256 --device "..." --source "..."

The last form spreads a published per-model iteration time over the layers in the proportions of
the model's CPU profile (hosts.models.profile.rescaled): how resnet50-a100.json was made.
"""
from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from hosts.models import MODEL_NAMES

    parser.add_argument("model", choices=MODEL_NAMES, help="the model to time")
    parser.add_argument("--batch", type=int, default=2, help="samples per iteration (default 2)")
    parser.add_argument("--repeats", type=int, default=5, help="timed iterations after one warm-up (default 5)")
    parser.add_argument("--name", default="cpu", help="profile name: writes hosts/models/profiles/MODEL-NAME.json")
    parser.add_argument("--out", default=None, help="write the profile here instead")
    parser.add_argument("--rescale-to", type=float, default=None, metavar="SECONDS",
                        help="no measuring: the CPU profile's proportions with forward + backward = SECONDS")
    parser.add_argument("--device", default=None, help="with --rescale-to: the device the figure is for")
    parser.add_argument("--source", default=None, help="with --rescale-to: where the figure comes from")


def run(args: argparse.Namespace) -> int:
    from hosts.models import profile
    from testbed.run import RunError

    if args.batch < 1 or args.repeats < 1:
        raise RunError("--batch and --repeats: at least 1")
    if args.rescale_to is not None:
        if args.rescale_to <= 0 or not args.device or not args.source:
            raise RunError("--rescale-to: a time > 0, with --device and --source saying what figure it is")
        result = profile.rescaled(profile.load(args.model, "cpu"), args.rescale_to, args.device, args.batch,
                                  args.source)
    else:
        result = profile.measure(args.model, args.batch, args.repeats)
    path = result.save(args.out or profile.profile_path(args.model, args.name))
    print(f"{args.model}: forward {result.forward_s * 1000:.1f} ms, backward {result.backward_s * 1000:.1f} ms "
          f"over {len(result.layers)} layers -> {path}")
    return 0
