"""`aggnet run --script train.py [ARGS]`: the user's own torch.distributed script on every worker host.

A variant of testbed.run.Run (same network, pipeline, trees, servers, watch and teardown) whose
workers run the script instead of AggNet's agent. Each worker host runs `python SCRIPT ARGS`
(from the repository folder) with torchrun's environment, RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE and MASTER_ADDR/MASTER_PORT (rank 0's host), plus what AggNet adds:
$AGGNET_CONFIG, the job's agent config that backend "aggnet" (hosts.torch_backend) joins;
$AGGNET_OUT, where the backend writes each rank's summary; GLOO_SOCKET_IFNAME, the host's
interface, so that plain "gloo" finds the emulated network too; PYTHONPATH, so the script can
import AggNet. results.json names the script and holds each worker's backend summary.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from testbed.config import RunConfig
from testbed.run import REPO, HostProcess, JobRun, Run, RunError, read_json, start_process

MASTER_PORT = 29500  # torchrun's default; every host is a namespace of its own


class ScriptRun(Run):
    """`aggnet run` with `script` (the script's path, then its arguments) as every worker."""

    def __init__(self, cfg: RunConfig, script: list[str], reporter: Any = None):
        if not script:
            raise RunError("--script: name the script to run (aggnet run [OPTIONS] --script train.py [ARGS])")
        if cfg.workload.workload != "train":
            raise RunError(f"--script: the script is the workload; drop --workload {cfg.workload.workload}")
        if cfg.scale != 1:
            raise RunError("--scale: a script's compute is its own, AggNet cannot slow it; run it without --scale")
        path = Path(script[0]).resolve()
        if not path.is_file():
            raise RunError(f"--script: no file {script[0]!r}")
        self.script = [str(path), *script[1:]]
        super().__init__(cfg, reporter)

    def start_worker(self, job: JobRun, rank: int, config: Path) -> HostProcess:
        host, hosts = job.workers[rank], self.topo.hosts
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(len(job.workers)), LOCAL_RANK="0",
                   LOCAL_WORLD_SIZE="1", MASTER_ADDR=hosts[job.workers[0]].ip, MASTER_PORT=str(MASTER_PORT),
                   AGGNET_CONFIG=str(config), AGGNET_OUT=str(job.out),
                   GLOO_SOCKET_IFNAME=self.tb.host(host).defaultIntf().name,
                   PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        self.logs.mkdir(parents=True, exist_ok=True)
        return start_process(self.tb, host, f"{job.prefix}{host}", self.script, self.logs, env)

    def workload_results(self, job: JobRun) -> dict:
        """The script and what backend "aggnet" did on each worker (nothing for other backends)."""
        return {"script": self.script,
                "per_worker": {h: read_json(job.out / f"{h}.backend.json") or {} for h in job.workers}}

    def write_results(self, results: dict) -> None:
        from testbed import report

        report.write_results(self.run_dir, results, "script")
