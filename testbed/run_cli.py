"""`aggnet run`: one experiment on the emulated network, shown live, summed up at the end.

    aggnet run                                    # star4, 4 workers, in-network, digits MLP
    aggnet run --workload allreduce --elements 1000000 --loss 1
    aggnet run --topo tree2 --workers 8 --scheme ring --link-mbps 20

Shows a progress bar over the training steps (epoch, loss, test accuracy, step time), then
the switch counters (per job, per port), and leaves runs/<ts>/ with results.json, logs/
and PNG plots. Exit 0 on success, 1 when the run failed (the failing process or switch is
named) or an all-reduce sum was wrong, 2 on bad input. The experiment itself lives in
testbed/experiment.py; this module is the command line and the live display.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `aggnet run` (also used by `aggnet compare`)."""
    from hosts.pacing import PACING_CHOICES
    from protocol.wire import LANE_COUNTS, program_name
    from testbed.experiment import WORKLOADS, RunConfig

    d = RunConfig()
    parser.add_argument("--topo", default=d.topo, metavar="F",
                        help=f"topology file, or a name under topologies/ (default {d.topo})")
    who = parser.add_mutually_exclusive_group()
    who.add_argument("--workers", type=int, metavar="N", help="use the first N hosts as workers (default: all)")
    who.add_argument("--worker-hosts", metavar="H1,H2,...", help="these hosts as workers, in rank order")
    parser.add_argument("--target", default=d.target, help="P4 target: embedded (default) or bmv2")
    parser.add_argument("--algo", default=d.algo, help=f"placement algorithm (default {d.algo})")
    parser.add_argument("--k", type=int, default=d.k, help=f"aggregating switches besides the root (default {d.k})")
    parser.add_argument("--scheme", default=d.scheme,
                        help="innet (default; host aggregation when the switches have no slots for it), ps, ring "
                             "or hostagg")
    parser.add_argument("--staleness", type=int, default=d.staleness, metavar="S",
                        help="host aggregation: sum a gradient up to S rounds late rather than wait (default 0)")
    parser.add_argument("--straggler", action="append", default=[], metavar="HOST=DELAY_S",
                        help="worker HOST computes DELAY_S seconds longer every step (repeatable)")
    parser.add_argument("--workload", default=d.workload, choices=WORKLOADS, help="train (default) or allreduce")
    parser.add_argument("--model", default=d.model, help="mlp (default) or cnn")
    parser.add_argument("--dataset", default=d.dataset, help="digits (default) or synthetic")
    parser.add_argument("--steps", type=int, default=d.steps, help=f"training steps (default {d.steps})")
    parser.add_argument("--batch-size", type=int, default=d.batch_size, help="per-worker batch size")
    parser.add_argument("--lr", type=float, default=d.lr, help=f"learning rate (default {d.lr})")
    parser.add_argument("--elements", type=int, default=d.elements,
                        help=f"all-reduce workload: int32 elements per worker (default {d.elements})")
    parser.add_argument("--dtype", default=d.dtype, choices=("int32", "float32"),
                        help="all-reduce workload: vector type (float32 is quantized in-network)")
    parser.add_argument("--lanes", type=int, default=d.lanes, choices=LANE_COUNTS,
                        help="values per aggregation packet (" + ", ".join(f"{program_name(n)}: {n}" for n in LANE_COUNTS) + ")")
    parser.add_argument("--slots", type=int, default=d.slots, help=f"the job's slot window (default {d.slots})")
    parser.add_argument("--min-rto", type=float, default=d.min_rto_s, metavar="S",
                        help=f"in-network all-reduce: smallest retransmission timeout (default {d.min_rto_s} s)")
    parser.add_argument("--pacing", default=d.pacing, choices=PACING_CHOICES,
                        help="in-network: keep the whole slot window in flight (fixed) or pace it with AIMD "
                             "from the results (aimd: backs off behind a full queue instead of losing the window)")
    parser.add_argument("--link-mbps", type=float, metavar="R", help="shape every link to R Mbit/s")
    parser.add_argument("--loss", type=float, metavar="P", help="drop P percent of packets at every switch port")
    parser.add_argument("--seed", type=int, default=d.seed, help="seed of model, data and vectors")
    parser.add_argument("--timeout", type=float, default=d.timeout_s, help="give up after this many seconds")
    parser.add_argument("--out", default=d.out, metavar="DIR", help="runs go to DIR/<timestamp>/ (default runs)")


def config_from_args(args: argparse.Namespace, **override: Any) -> Any:
    """A RunConfig from parsed options (`override` replaces some, e.g. scheme and out for compare)."""
    from testbed.experiment import RunConfig, parse_stragglers

    hosts = tuple(h.strip() for h in args.worker_hosts.split(",") if h.strip()) if args.worker_hosts else ()
    values = dict(topo=args.topo, workers=args.workers, worker_hosts=hosts, target=args.target, algo=args.algo,
                  k=args.k, scheme=args.scheme, workload=args.workload, model=args.model, dataset=args.dataset,
                  steps=args.steps, batch_size=args.batch_size, lr=args.lr, elements=args.elements,
                  dtype=args.dtype, lanes=args.lanes, slots=args.slots, min_rto_s=args.min_rto, pacing=args.pacing, link_mbps=args.link_mbps, loss=args.loss,
                  seed=args.seed, timeout_s=args.timeout, out=args.out, staleness=args.staleness,
                  stragglers=parse_stragglers(args.straggler))
    values.update(override)
    return RunConfig(**values)


class RichReporter:
    """Phases as lines, training as a progress bar with the latest epoch, loss, accuracy, step time."""

    def __init__(self, console: Any):
        self.console = console
        self.progress = None
        self.task = None
        self.accuracy = "-"

    def status(self, message: str) -> None:
        from rich.markup import escape

        self.console.print(f"[bold]aggnet[/bold] {escape(message)}", soft_wrap=True)  # one line, however long

    def training_step(self, record: dict, total_steps: int) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        if self.progress is None:
            self.progress = Progress(TextColumn("training"), BarColumn(), MofNCompleteColumn(),
                                     TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=self.console)
            self.progress.start()
            self.task = self.progress.add_task("train", total=total_steps, info="")
        if "test_accuracy" in record:
            self.accuracy = f"{record['test_accuracy']:.3f}"
            self.console.print(f"  epoch {record['epoch']:>3}  step {record['step'] + 1:>5}  loss {record['loss']:.4f}"
                               f"  test accuracy {self.accuracy}  step {record['step_time_s'] * 1000:.1f} ms")
        info = (f"epoch {record['epoch']}  loss {record['loss']:.4f}  acc {self.accuracy}  "
                f"step {record['step_time_s'] * 1000:.1f} ms")
        self.progress.update(self.task, completed=record["step"] + 1, info=info)

    def finished(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def summarize(results: dict, console: Any) -> None:
    """The lines after the counters: accuracy and step time, or the all-reduce verdict and goodput."""
    run_dir = results["run_dir"]
    if results.get("staleness_bound") is not None:
        console.print(f"host aggregation on {', '.join(results['aggregators'])}, staleness bound "
                      f"{results['staleness_bound']}")
    if "final_accuracy" in results:
        console.print(f"[bold]final test accuracy {results['final_accuracy']:.4f}[/bold] after {results['steps']} "
                      f"steps; median step {results['step_time_s'] * 1000:.1f} ms; results in {run_dir}/results.json")
    else:
        verdict = "exact" if results["allreduce_exact"] else ("within bound" if results["allreduce_correct"]
                                                              else "WRONG")
        console.print(f"[bold]all-reduce of {results['elements']:,} {results['dtype']} elements x "
                      f"{results['workers']} workers: {verdict}[/bold] in {results['seconds']:.2f} s, "
                      f"{results['goodput_elements_per_s']:,.0f} elements/s per worker; "
                      f"results in {run_dir}/results.json")


def plot_run(results: dict) -> None:
    """training.png (training runs) and link_bytes.png in the run folder."""
    from testbed import plots

    run_dir = Path(results["run_dir"])
    if "final_accuracy" in results:
        plots.plot_training(plots.load_metrics(run_dir / "logs"), run_dir / "training.png")
    plots.plot_link_bytes(results["link_bytes"], run_dir / "link_bytes.png")


def execute(cfg: Any, console: Any) -> dict:
    """Run one experiment with the live display; print counters and summary; write plots."""
    from controller.topology import load_topology
    from testbed import report
    from testbed.experiment import resolve_topology, run_experiment

    results = run_experiment(cfg, RichReporter(console))
    report.print_counters(results["counters"], load_topology(resolve_topology(cfg.topo)), console)
    plot_run(results)
    summarize(results, console)
    return results


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    execute(config_from_args(args), Console())
    return 0
