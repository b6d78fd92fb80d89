"""Leftover cleanup: `aggnet clean`, an `mn -c` that only touches what AggNet made.

Every running Testbed keeps a record in STATE_DIR (its own pid, its network namespace, its run slot
and the kernel's interface group of that slot (testbed.slots), the pids of its switch processes and
Mininet host shells with their start times, its interfaces), and starts its
switch processes with TESTBED_ENV=`PID:START` naming itself. Leftovers are what a dead
testbed recorded, plus root-namespace veths named like Mininet's (`*-eth*`), orphaned
Mininet host shells, and switch processes a testbed started that no live testbed claims.
A switch someone started by hand (`aggnet switch` under nohup or systemd) carries no such
mark and is never touched. Running it twice is harmless. `aggnet clean --run RUN` tears down one
network (its run folder, slot or testbed pid), running or not, and touches no other.

`aggnet clean --runs 7d` does something else: it removes the run folders not written to for
7 days (testbed.prune), or with `--dry-run` lists them.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable

STATE_DIR = "/run/aggnet"
SWITCH_MARKERS = ("testbed.cli switch", "aggnet switch", "simple_switch_grpc", "testbed.launcher")
NFT_TABLE = "aggnet"  # nftables netdev table of BMv2 link loss (testbed.network.kernel_loss_script)
HOST_SHELL_MARKER = "mininet:"
TESTBED_ENV = "AGGNET_TESTBED"  # in a switch process's environment: the testbed that started it
PRIVATE_STATE_ENV = "AGGNET_PRIVATE_STATE"  # set where STATE_DIR is a mount of our own (aggnet soak --isolate)


def _stat_field(pid: int, index: int) -> int | None:
    """Field `index` of /proc/PID/stat counted after the command name (0 = state); None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[index])
    except (OSError, IndexError, ValueError):
        return None


def process_start_time(pid: int) -> int | None:
    """The kernel's start time of `pid` (clock ticks since boot), None if it is gone: also when it has exited
    and nobody reaped it yet (a zombie; under a pid namespace's first process, which may never reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else int(fields[19])


def _ppid(pid: int) -> int | None:
    return _stat_field(pid, 1)


def process_argv(pid: int) -> list[str]:
    """The command line of `pid` as a list of arguments; empty if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def testbed_environment() -> dict[str, str]:
    """The environment a testbed starts its switch processes with: this one, marked as ours; not marked
    when our STATE_DIR is private (PRIVATE_STATE_ENV): an `aggnet clean --all` outside, of a version
    that does not tell namespaces apart, would take the mark for one of its own testbeds."""
    me = os.getpid()
    env = {k: v for k, v in os.environ.items() if k != TESTBED_ENV}
    return env if os.environ.get(PRIVATE_STATE_ENV) else {**env, TESTBED_ENV: f"{me}:{process_start_time(me)}"}


def testbed_of(pid: int) -> tuple[int, int | None] | None:
    """(pid, start time) of the testbed that started process `pid`; None if no testbed did."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            entries = f.read().split(b"\0")
    except OSError:
        return None
    prefix = TESTBED_ENV.encode() + b"="
    for entry in entries:
        if entry.startswith(prefix):
            owner, _, start = entry[len(prefix):].decode(errors="replace").partition(":")
            if not owner.isdigit():
                return None
            return int(owner), int(start) if start.isdigit() else None
    return None


def record_path(owner_pid: int) -> str:
    return os.path.join(STATE_DIR, f"testbed-{owner_pid}.json")


def netns_inode(pid: str = "self") -> int | None:
    """The inode of `pid`'s network namespace (it names the namespace); None if not ours to see."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def _same_namespace(record: dict) -> bool:
    """Whether the record's testbed runs in our network namespace (records without one are from before)."""
    return record.get("netns") in (None, netns_inode())


def write_record(record: dict) -> None:
    """Atomically (re)write a testbed's record; `record["owner"]` is its pid. The record names the
    network namespace it runs in: `aggnet clean` leaves a live network of another namespace alone."""
    record.setdefault("netns", netns_inode())
    os.makedirs(STATE_DIR, exist_ok=True)
    path = record_path(record["owner"])
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)


def remove_record(owner_pid: int) -> None:
    _remove_file(record_path(owner_pid))


def _remove_file(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _record_files() -> list[str]:
    """Paths of the testbed records in STATE_DIR, in name order."""
    if not os.path.isdir(STATE_DIR):
        return []
    return [os.path.join(STATE_DIR, name) for name in sorted(os.listdir(STATE_DIR))
            if name.startswith("testbed-") and name.endswith(".json")]


def _load_record(path: str) -> dict | None:
    """The record in `path`; None if it cannot be read (gone, or garbage that clean() removes)."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("owner"), int) else None


def _owner_alive(record: dict) -> bool:
    return process_start_time(record["owner"]) == record.get("owner_start")


def live_records() -> list[dict]:
    """Records of testbeds whose owner process still runs; reads only, never removes anything."""
    records = (_load_record(path) for path in _record_files())
    return [r for r in records if r is not None and _owner_alive(r)]


def kill_process(pid: int, start_time: int | None, grace_s: float = 3.0) -> bool:
    """SIGTERM then SIGKILL `pid`, only if it is still the process that started at `start_time`."""
    if start_time is None or _gone(pid, start_time):
        return False
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            if _gone(pid, start_time):
                return True
            time.sleep(0.05)
    return _gone(pid, start_time)


def _gone(pid: int, start_time: int) -> bool:
    """Whether the process that started at `start_time` has ended: no such process, or a zombie (dead; only
    its parent can reap it, and an init that is not a real one, such as a test runner, never does)."""
    return process_start_time(pid) != start_time or _process_state(pid) == "Z"


def _process_state(pid: int) -> str | None:
    """The state letter of /proc/PID/stat (R, S, Z, ...); None if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def root_interfaces() -> list[str]:
    """Names of every interface in this process's network namespace."""
    return [name for _, name in socket.if_nameindex()]


def root_veths() -> list[str]:
    """Root-namespace veth interfaces named like Mininet's (`s1-eth1`)."""
    out = subprocess.run(["ip", "-o", "link", "show", "type", "veth"], capture_output=True, text=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    return [n for n in names if "-eth" in n]


def delete_interface(name: str) -> None:
    subprocess.run(["ip", "link", "del", name], capture_output=True)


def delete_group(group: int) -> list[str]:
    """Delete every interface of the kernel's interface `group` at once (a veth takes its peer along); their names."""
    out = subprocess.run(["ip", "-o", "link", "show", "group", str(group)], capture_output=True, text=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    if names:
        subprocess.run(["ip", "link", "del", "group", str(group)], capture_output=True)
    return names


def clean_record(record: dict) -> list[str]:
    """Kill a record's processes and delete its interfaces (those of our namespace's records only: the
    same names in another namespace are someone else's); return what was removed."""
    removed = []
    for proc in record.get("processes", []):
        if kill_process(proc["pid"], proc.get("start")):
            removed.append(f"process {proc['name']} (pid {proc['pid']})")
    if not _same_namespace(record):
        return removed
    if record.get("group"):
        removed += [f"interface {name}" for name in delete_group(record["group"])]
    existing = set(root_veths())
    for intf in record.get("interfaces", []):
        if intf in existing:
            delete_interface(intf)
            removed.append(f"interface {intf}")
    table = record.get("nft_table", NFT_TABLE)
    if delete_nft_table(table):
        removed.append(f"nftables table netdev {table}")
    return removed


def delete_nft_table(table: str = NFT_TABLE) -> bool:
    """Remove a network's link-loss table if it exists (each run slot has its own)."""
    try:
        done = subprocess.run(["nft", "delete", "table", "netdev", table], capture_output=True)
    except FileNotFoundError:  # no nftables: nothing of ours can exist
        return False
    return done.returncode == 0


def clean(all_records: bool = False) -> list[str]:
    """Remove leftovers of dead testbeds (and of live ones of our network namespace too with all_records)."""
    removed: list[str] = []
    claimed_pids: set[int] = set()
    claimed_intfs: set[str] = set()
    for path in _record_files():
        record = _load_record(path)
        if record is None:
            _remove_file(path)
            continue
        if _owner_alive(record) and not (all_records and _same_namespace(record)):
            claimed_pids.update(p["pid"] for p in record.get("processes", []))
            claimed_intfs.update(record.get("interfaces", []))
            continue
        removed += clean_record(record)
        remove_record(record["owner"])
    for pid, cmd in orphan_processes(claimed_pids, all_records):
        if kill_process(pid, process_start_time(pid)):
            removed.append(f"orphan process {cmd.strip()[:60]} (pid {pid})")
    for intf in root_veths():
        if intf not in claimed_intfs:
            delete_interface(intf)
            removed.append(f"interface {intf}")
    if not claimed_intfs and delete_nft_table():
        removed.append(f"nftables table netdev {NFT_TABLE}")
    return removed


def clean_run(run_dir: str) -> list[str]:
    """Tear down the network of the run in `run_dir` (running or not, in our network namespace); no other's.
    CleanError when no record names that folder."""
    wanted = os.path.abspath(run_dir)
    found, removed = clean_networks(lambda record: record.get("run_dir") == wanted)
    if not found:
        raise CleanError(f"aggnet clean: no network of run {run_dir} here (`aggnet counters` lists running ones)")
    return removed


def clean_networks(select: Callable[[dict], bool]) -> tuple[int, list[str]]:
    """Tear down the networks of our namespace whose records `select` picks, running or not (testbed
    processes use it for their own); how many, and what was removed."""
    found, removed = 0, []
    for path in _record_files():
        record = _load_record(path)
        if record is None or not _same_namespace(record) or not select(record):
            continue
        found += 1
        removed += clean_record(record)
        remove_record(record["owner"])
    return found, removed


def orphan_processes(claimed_pids: set[int], all_records: bool = False) -> list[tuple[int, str]]:
    """(pid, command line) of leftovers no live testbed claims: switch processes a testbed
    started (TESTBED_ENV) that is gone (with all_records, any testbed's in our network namespace),
    and Mininet host shells left to init. Unmarked switches are someone else's and never listed."""
    out = []
    for pid in (int(d) for d in os.listdir("/proc") if d.isdigit()):
        if pid in claimed_pids:
            continue
        cmd = " ".join(process_argv(pid))
        if any(m in cmd for m in SWITCH_MARKERS):
            owner = testbed_of(pid)
            alive = owner is not None and process_start_time(owner[0]) == owner[1]
            if owner is not None and (not alive or all_records and netns_inode(str(pid)) == netns_inode()):
                out.append((pid, cmd))
        elif HOST_SHELL_MARKER in cmd and _ppid(pid) == 1:
            out.append((pid, cmd))
    return out


class CleanError(Exception):
    """Nothing to clean where the user pointed (one line, exit 1)."""

    exit_code = 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--all", action="store_true",
                        help="also tear down networks whose testbed process is still running")
    parser.add_argument("--run", metavar="RUN_DIR",
                        help="tear down only the network of this run (its folder), running or not")
    parser.add_argument("--runs", metavar="OLDER_THAN",
                        help="instead: remove the run folders (RUNS_DIR/YYYYMMDD-HHMMSS) nothing was written to "
                             "for OLDER_THAN, e.g. 7d, 12h, 30m")
    parser.add_argument("--runs-dir", default="runs", help="the folder of run folders (default: runs)")
    parser.add_argument("--dry-run", action="store_true", help="with --runs: list what would be removed, remove nothing")


def run(args: argparse.Namespace) -> int:
    if args.runs is not None:
        return _prune(args.runs_dir, args.runs, args.dry_run)
    for item in clean_run(args.run) if args.run else clean(args.all):
        print(f"removed {item}")
    return 0


def _prune(root: str, older_than: str, dry_run: bool) -> int:
    from testbed.prune import describe, parse_age, prune_runs

    now = time.time()
    runs = prune_runs(root, parse_age(older_than), dry_run, now)
    verb = "would remove" if dry_run else "removed"
    for r in runs:
        print(f"{verb} {describe(r, now)}")
    print(f"{verb} {len(runs)} run folder(s), {sum(r.size for r in runs) / (1 << 20):.1f} MB "
          f"(not written for {older_than}, in {root})")
    return 0
