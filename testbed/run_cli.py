"""`aggnet run`: one experiment on the emulated network, shown live, summed up at the end.

    aggnet run                                    # star4, 4 workers, in-network, digits MLP
    aggnet run --workload allreduce --elements 1000000 --loss 1
    aggnet run --topo tree2 --workers 8 --scheme ring --link-mbps 20
    aggnet run --workers 2 --script train.py --epochs 3   # your torch.distributed script (last option)

Shows a progress bar over the training steps (epoch, loss, test accuracy, step time), then
the switch counters (per job, per port), and leaves runs/<ts>/ with results.json, logs/
and PNG plots. With --script, every worker host runs that script with torchrun's environment
(testbed.script_run; backend "aggnet" joins the run's job). Exit 0 on success, 1 when the run failed (the failing process or switch is
named) or an all-reduce sum was wrong, 2 on bad input. The run itself is testbed.run.Run;
this module is the command line and the live display.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from testbed.run import Reporter
from testbed.timescale import time_scale_of

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of one run (`aggnet run`, `aggnet compare`): one per field of testbed.config.RunConfig."""
    from config import add_options
    from testbed.config import RunConfig

    add_options(parser, RunConfig)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`aggnet run`'s options: a run's, and --script (last: everything after it is the script's)."""
    add_run_options(parser)
    parser.add_argument("--script", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS]",
                        help="run this torch.distributed script on every worker host, with torchrun's environment "
                             "(backend \"aggnet\" joins the run's job); the last option, the rest are its arguments")


def config_from_args(args: argparse.Namespace, defaults: Any = None) -> Any:
    """The RunConfig the options ask for, on top of `defaults` (ConfigError naming the option when one is bad)."""
    from config import from_options
    from testbed.config import RunConfig

    return from_options(RunConfig, args, defaults)


class RichReporter(Reporter):
    """Phases as lines, training as a progress bar with the latest epoch, loss, accuracy, step time."""

    def __init__(self, console: Any):
        self.console = console
        self.progress: Progress | None = None
        self.task: TaskID | None = None
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
        assert self.task is not None, "added with the progress bar"
        self.progress.update(self.task, completed=record["step"] + 1, info=info)

    def finished(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None


def summarize(results: dict, console: Any) -> None:
    """The lines after the counters: accuracy and step time, or the all-reduce verdict and goodput."""
    run_dir = results["run_dir"]
    factor = time_scale_of(results)
    if factor != 1:
        console.print(f"times below are the emulated cluster's: this machine ran {factor:g} times slower (--scale)")
    if results.get("staleness_bound") is not None:
        console.print(f"host aggregation on {', '.join(results['aggregators'])}, staleness bound "
                      f"{results['staleness_bound']}")
    if "script" in results:
        console.print(f"[bold]{' '.join(results['script'])}[/bold] finished on {results['workers']} workers; "
                      f"their output in {run_dir}/logs, results in {run_dir}/results.json")
    elif "iteration_s" in results:
        console.print(model_line(results) + f"; results in {run_dir}/results.json")
    elif "final_accuracy" in results:
        console.print(f"[bold]final test accuracy {results['final_accuracy']:.4f}[/bold] after {results['steps']} "
                      f"steps; median step {results['step_time_s'] * 1000:.1f} ms; results in {run_dir}/results.json")
    else:
        verdict = "exact" if results["allreduce_exact"] else ("within bound" if results["allreduce_correct"]
                                                              else "WRONG")
        console.print(f"[bold]all-reduce of {results['elements']:,} {results['dtype']} elements x "
                      f"{results['workers']} workers: {verdict}[/bold] in {results['seconds'] * 1000:,.1f} ms, "
                      f"{results['goodput_elements_per_s']:,.0f} elements/s per worker; "
                      f"results in {run_dir}/results.json")


def phases_line(phases: dict[str, float]) -> str:
    """Where a run's wall time went, one line: `time: start network 3.1 s, load pipelines 1.2 s, ...`."""
    return "time: " + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in phases.items()) + \
        f" (total {sum(phases.values()):.1f} s)"


def model_line(results: dict) -> str:
    """A model workload's iteration: measured, its compute and exposed communication, the analytic model."""
    prof = results.get("profile") or {}
    line = (f"[bold]{results['model']} on {results['workers']} workers ({results['scheme']}, profile "
            f"{prof.get('name')}: {prof.get('device')}, batch {prof.get('batch')}): iteration "
            f"{results['iteration_s'] * 1000:,.1f} ms[/bold] (compute {results['compute_s'] * 1000:,.1f} ms, exposed "
            f"communication {results['exposed_comm_s'] * 1000:,.1f} ms{'' if results['sums_correct'] else ', sums WRONG'})")
    if results.get("analytic_iteration_s"):
        line += (f"; analytic {results['analytic_iteration_s'] * 1000:,.1f} ms at "
                 f"{results['emulated_link_gbps']:g} Gb/s emulated (measured/analytic {results['measured_vs_analytic']:.2f})")
    return line


def plot_run(results: dict) -> None:
    """training.png (training runs) and link_bytes.png in the run folder."""
    from testbed import plots

    run_dir = Path(results["run_dir"])
    if "final_accuracy" in results:
        plots.plot_training(plots.load_metrics(run_dir / "logs"), run_dir / "training.png")
    plots.plot_link_bytes(results["link_bytes"], run_dir / "link_bytes.png")


def execute(cfg: Any, console: Any, script: list[str] | None = None) -> dict:
    """Run one experiment (`script` and its arguments on every worker, if given) with the live
    display; print counters and summary; write plots."""
    from testbed import report
    from testbed.run import Run
    from testbed.script_run import ScriptRun

    run = Run(cfg, RichReporter(console)) if script is None else ScriptRun(cfg, script, RichReporter(console))
    results = run.execute()
    report.print_counters(results["counters"], run.topo, console)
    plot_run(results)
    summarize(results, console)
    console.print(phases_line(results["phases_s"]))
    return results


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    execute(config_from_args(args), Console(), args.script)
    return 0
