"""`aggnet counters [SWITCH] [--run DIR] [--topo FILE] [--job ID]`: counters of a running network.

The network is found through the records running testbeds keep in /run/aggnet
(testbed/clean.py): the record names the run folder and the switch processes, and each
switch's command line (`--device-id`, `-i PORT@IFACE`, `--grpc-server-addr`, the same flags
for the embedded switch and simple_switch_grpc) says where its P4Runtime server listens and
which ports it has (a switch started with `--grpc-server-ssl` is read over TLS with the controller's
certificate that `aggnet run --tls` left beside the switch's CA). Counters are read over P4Runtime by a read-only
`controller.p4rt.SwitchConnection` (`read_only=True`): it never asks to be primary, so the
controller of the run keeps its session. With the topology (`--topo`, or RUN_DIR/topology.yaml) each port is labelled
with the node on its other end.
"""
from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

from p4target.tls import TlsFiles
from testbed import clean
from testbed.tls import pki_files


class CountersError(Exception):
    """Nothing to read (no network, unknown switch); one line, exit 1."""

    exit_code = 1


@dataclass
class SwitchProcess:
    """A running switch as its command line describes it."""

    name: str
    device_id: int
    grpc_address: str
    ports: dict[int, str] = field(default_factory=dict)  # port number -> interface
    tls: TlsFiles | None = None  # the controller's files when the switch serves TLS


def parse_switch_command(name: str, argv: list[str]) -> SwitchProcess | None:
    """The switch a command line starts; None when it is not a switch (a Mininet host shell)."""
    device_id, address, ports, cacert = 0, None, {}, None
    for flag, value in zip(argv, argv[1:]):
        if flag == "--device-id":
            device_id = int(value)
        elif flag == "--grpc-server-addr":
            address = value
        elif flag == "-i" and "@" in value:
            port, iface = value.split("@", 1)
            ports[int(port)] = iface
        elif flag == "--grpc-server-cacert":
            cacert = value
    tls = None
    if "--grpc-server-ssl" in argv:
        tls = pki_files(os.path.dirname(cacert)).client if cacert else TlsFiles()
    return SwitchProcess(name, device_id, address, ports, tls) if address else None


def switch_processes(record: dict) -> list[SwitchProcess]:
    """The record's switches that are still running, with their P4Runtime addresses and ports."""
    from testbed.report import natural_key

    out = []
    for proc in record.get("processes", []):
        if clean.process_start_time(proc["pid"]) != proc.get("start"):
            continue
        switch = parse_switch_command(proc["name"], clean.process_argv(proc["pid"]))
        if switch is not None:
            out.append(switch)
    return sorted(out, key=lambda s: natural_key(s.name))


def pick_network(run_dir: str | None) -> dict:
    """The running network (the one in `run_dir` if given); CountersError when there is none."""
    records = clean.live_records()
    if run_dir is not None:
        wanted = os.path.abspath(run_dir)
        records = [r for r in records if r.get("run_dir") == wanted]
        if not records:
            raise CountersError(f"aggnet counters: no running AggNet network uses the run folder {run_dir}")
    if not records:
        raise CountersError("aggnet counters: no AggNet network is running (start one with `aggnet run`)")
    if len(records) > 1:
        folders = ", ".join(r.get("run_dir", "?") for r in records)
        raise CountersError(f"aggnet counters: several networks are running ({folders}); choose one with --run")
    return records[0]


def load_run_topology(topo_arg: str | None, run_dir: str | None) -> Any:
    """The topology from --topo, else RUN_DIR/topology.yaml, else None (ports are then unlabelled)."""
    from controller.topology import load_topology

    if topo_arg:
        return load_topology(topo_arg)
    candidate = os.path.join(run_dir or "", "topology.yaml")
    return load_topology(candidate) if run_dir and os.path.isfile(candidate) else None


def read_switches(switches: list[SwitchProcess], job_ids: list[int] | None = None) -> dict[str, dict]:
    """report.read_switch of each switch, over a read-only P4Runtime connection."""
    from controller.p4rt import EntityError, SwitchConnection
    from testbed import report

    counters = {}
    for sw in switches:
        with SwitchConnection(sw.grpc_address, sw.device_id, name=sw.name, read_only=True, tls=sw.tls) as reader:
            try:
                counters[sw.name] = report.read_switch(reader, sw.ports, job_ids)
            except EntityError as exc:  # the switch runs a program without aggnet.p4's counters
                raise CountersError(f"{exc} (is aggnet.p4 loaded?)") from None
    return counters


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("switch", nargs="?", metavar="SWITCH", help="only this switch (s1, ...); default: all")
    parser.add_argument("--run", metavar="DIR", help="the run folder of the network to read "
                                                     "(needed only when several networks run)")
    parser.add_argument("--topo", metavar="FILE", help="topology file, to name each port's peer "
                                                       "(default: RUN_DIR/topology.yaml if present)")
    parser.add_argument("--job", type=int, action="append", metavar="ID",
                        help="show this job id (repeatable); default: every job a switch has seen")


def run(args: argparse.Namespace) -> int:
    from testbed import report

    record = pick_network(args.run)
    switches = switch_processes(record)
    if args.switch is not None:
        chosen = [s for s in switches if s.name == args.switch]
        if not chosen:
            names = ", ".join(s.name for s in switches) or "none"
            raise CountersError(f"aggnet counters: no running switch {args.switch!r} (running: {names})")
        switches = chosen
    topology = load_run_topology(args.topo, record.get("run_dir"))
    counters = read_switches(switches, args.job)
    print(f"run folder {record.get('run_dir', '?')}")
    report.print_counters(counters, topology)
    return 0
