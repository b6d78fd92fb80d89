"""Reference runs on BMv2's `simple_switch`, for differential tests against the embedded target.

`Bmv2Switch(json, schema)` runs one p4c-compiled program and looks like an embedded `Pipeline`
to the code that drives it: `.state` takes the same control-plane calls as `p4target.state.State`
(`insert_entry`, `set_default`, `profile_member_insert`, `profile_group_insert`, `mc_group_insert`,
`clone_session_insert`, `register_write`, `register_read`, `counter_read`, ...) and turns each into `simple_switch_CLI` commands, and
`.process(port, data)` returns the packets that left. So the STF runner (`p4target.stf.StfRunner`)
and the aggnet test fixtures program and drive BMv2 unchanged. `observe()` runs packets through
either target and returns what a differential test compares.

How a run is made deterministic (found by reading simple_switch and by experiment):

- Packets go in through BMv2's packet-in device manager (`--packet-in`, one nanomsg PAIR
  socket, here driven with ctypes): every packet carries its ingress port, and one socket read
  by one receive thread gives BMv2 exactly our order across all ports. (With `--use-files` the
  pcap reader merges per-port files by timestamp, but it blocks on every port's next packet, so
  a run cannot pause between packets for control-plane commands; veth ports lose the order
  across ports.)
- simple_switch runs ingress on one thread, in arrival order, so stateful ingress code (all of
  aggnet's registers) sees the same packet order as the embedded target. Each egress port is
  served by one egress thread from a FIFO queue, so the packets out of one port keep their
  order; only the interleaving across ports varies, which is why outputs are compared per port.
- Egress queues drop silently when full (64 packets by default), so every run first sets
  `set_queue_depth` far above any batch.

How we know all packets are done: simple_switch logs (at level debug, read from its stdout)
every point where a packet copy is born or dies: `Cloning packet to egress port` and the
replication engine's `number of packets replicated : N` (births, logged before the copies are
queued), `Dropping packet at the end of ingress|egress`, `Multicast requested for packet`,
`Transmitting packet` (deaths); resubmit and recirculate replace a copy by another. The harness
counts copies alive (packets sent + births - deaths); a batch is done when none is alive and
every transmitted packet has come back over the socket. A multicast's death is booked together
with its replica count (same thread, next line), so the count never touches zero in between.
No timing assumption: a run takes as long as BMv2 needs, within a generous timeout that names
what is still missing. The messages are simple_switch 1.15's (tests/test_bmv2_ref_accounting.py
holds them); a BMv2 that words them differently shows up as that timeout, not as a wrong result.
Debug logging costs BMv2 some speed; aggnet.p4 at 364 lanes still runs a few hundred packets a second.
"""
from __future__ import annotations

import collections
import concurrent.futures
import ctypes
import ctypes.util
import functools
import hashlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from controller.p4c import CompileError
from p4target import state as st

TOOLS = ("p4c", "simple_switch", "simple_switch_CLI")
NANOMSG = ctypes.util.find_library("nanomsg")


def missing() -> str:
    """Why BMv2 reference runs cannot happen here ('' when they can): a pytest skip reason."""
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if absent:
        return f"needs {', '.join(absent)} on PATH (source /opt/p4ref/env.sh)"
    if NANOMSG is None:
        return "needs libnanomsg (BMv2's packet-in socket library)"
    return ""


BMV2_P4_STUBS = Path("/opt/p4ref/lib/python3.11/site-packages/p4")  # BMv2's Python tree: p4.tmp, p4.config, ...


def p4_stubs_path(folder: Path) -> Path:
    """`folder`, made to hold only a `p4` link to BMv2's Python stubs: a path entry for `from p4.tmp import
    p4config_pb2` (BMv2's P4DeviceConfig). Only `p4`: the tree's `google` would shadow protobuf.
    Callers skip when BMV2_P4_STUBS does not exist."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "p4").symlink_to(BMV2_P4_STUBS)
    return folder


class Bmv2Error(Exception):
    """BMv2 or its CLI failed, or a batch did not finish: one line saying what happened."""


# --------------------------------------------------------------------------- compiling

def p4c_backend() -> str:
    """What `p4c --target bmv2 --arch v1model` runs after its driver (p4c-bm2-ss, beside p4c): called directly,
    it writes the same JSON and P4Info without the driver's Python start-up."""
    p4c = shutil.which("p4c") or "p4c"
    backend = os.path.join(os.path.dirname(p4c), "p4c-bm2-ss")
    return backend if os.access(backend, os.X_OK) else p4c


@functools.cache
def p4c_version() -> str:
    return subprocess.run([p4c_backend(), "--version"], capture_output=True, text=True).stdout.strip()


def _source_key(program: Path) -> str:
    """Hash of p4c's version and every .p4 file next to the program (what it may include)."""
    h = hashlib.sha256(p4c_version().encode())
    for path in sorted(program.parent.glob("*.p4")):
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Compiled:
    """What p4c made of one program: its BMv2 JSON and P4Info (paths), and what it printed (warnings)."""

    json: str
    p4info: str
    output: str


def compile_p4c(program: str, cache_dir: str) -> Compiled:
    """p4c's BMv2 JSON and P4Info for `program`, compiled once per source version into `cache_dir` (a program p4c
    rejects raises CompileError with p4c's first error line, also when that is what the cache holds)."""
    path = Path(program).resolve()
    out = Path(cache_dir) / f"{path.stem}-{_source_key(path)}"
    if not out.is_dir():
        for stale in Path(cache_dir).glob(f"{path.stem}-*"):  # earlier versions of the same program
            shutil.rmtree(stale, ignore_errors=True)
        with tempfile.TemporaryDirectory(prefix=f".{path.stem}-", dir=cache_dir) as tmp:
            made = Path(tmp) / "out"
            made.mkdir()
            backend = p4c_backend()
            target = ["-o", str(made / f"{path.stem}.json")] if backend.endswith("p4c-bm2-ss") else \
                ["--target", "bmv2", "-o", str(made)]  # the driver names the JSON after the program
            done = subprocess.run([backend, "--arch", "v1model", *target, "--p4runtime-files",
                                   str(made / f"{path.stem}.p4info.txtpb"), str(path)], capture_output=True, text=True)
            (made / "p4c.out").write_text(done.stdout + done.stderr)
            if done.returncode != 0:
                lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
                first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no output")
                (made / "error").write_text(f"{path}: p4c failed (exit {done.returncode}): {first}")
            os.replace(made, out)  # whole or not at all: another session may share the cache folder
    if (out / "error").exists():
        raise CompileError((out / "error").read_text())
    return Compiled(str(out / f"{path.stem}.json"), str(out / f"{path.stem}.p4info.txtpb"), (out / "p4c.out").read_text())


def compile_json(program: str, cache_dir: str) -> str:
    """p4c's BMv2 JSON for `program`, compiled once per source version into `cache_dir`."""
    return compile_p4c(program, cache_dir).json


class Compiler:
    """`compile_p4c` for a test session, with compiles started ahead of the tests that need them.

    p4c takes up to half a minute for aggnet.p4 at 364 lanes; background threads work through
    `prefetch`ed programs in order while earlier tests run, each program once however many tests
    (the P4Info, BMv2 and engine tests) want it. Use as a context manager: leaving it drops the
    compiles not started yet.
    """

    def __init__(self, cache_dir: str, workers: int = 1):
        """`workers`: p4c processes at once (one keeps the tests' order; more for many small programs)."""
        self.cache_dir = cache_dir
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="p4c")
        self._jobs: dict[str, concurrent.futures.Future] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> Compiler:
        return self

    def __exit__(self, *exc) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def prefetch(self, programs: Iterable[str]) -> None:
        """Queue these programs for compiling, in this order."""
        for program in programs:
            self._job(program)

    def compiled(self, program: str) -> Compiled:
        """What p4c made of the program, waiting for its compile (queued now if it was not)."""
        return self._job(program).result()

    def json(self, program: str) -> str:
        """The program's BMv2 JSON (path)."""
        return self.compiled(program).json

    def _job(self, program: str) -> concurrent.futures.Future:
        key = str(Path(program).resolve())
        with self._lock:
            if key not in self._jobs:
                self._jobs[key] = self._pool.submit(compile_p4c, key, self.cache_dir)
            return self._jobs[key]


# --------------------------------------------------------------------------- the packet socket

_AF_SP, _NN_PAIR, _NN_SOL_SOCKET, _NN_SNDTIMEO, _NN_RCVTIMEO = 1, 16, 0, 4, 5
_MSG_PACKET_IN, _MSG_PACKET_OUT = 3, 4
_HEADER = struct.Struct("<iii")  # type, port, length: bm_sim's packet-in message header
_MAX_FRAME = 1 << 16


class PacketSocket:
    """The nanomsg PAIR socket of BMv2's packet-in device manager (ctypes on libnanomsg)."""

    def __init__(self, address: str, timeout_ms: int = 100):
        self._nn = nn = ctypes.CDLL(NANOMSG, use_errno=True)
        nn.nn_socket.argtypes = [ctypes.c_int, ctypes.c_int]
        nn.nn_connect.argtypes = [ctypes.c_int, ctypes.c_char_p]
        nn.nn_send.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int]
        nn.nn_recv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        nn.nn_setsockopt.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
        self._fd = nn.nn_socket(_AF_SP, _NN_PAIR)
        for option, ms in ((_NN_RCVTIMEO, timeout_ms), (_NN_SNDTIMEO, 30_000)):
            value = ctypes.c_int(ms)
            nn.nn_setsockopt(self._fd, _NN_SOL_SOCKET, option, ctypes.byref(value), ctypes.sizeof(value))
        if self._fd < 0 or nn.nn_connect(self._fd, address.encode()) < 0:
            raise Bmv2Error(f"nanomsg: cannot connect to {address} (errno {ctypes.get_errno()})")
        self._buf = ctypes.create_string_buffer(_MAX_FRAME + _HEADER.size)

    def send(self, port: int, data: bytes) -> None:
        msg = _HEADER.pack(_MSG_PACKET_IN, port, len(data)) + data
        if self._nn.nn_send(self._fd, msg, len(msg), 0) != len(msg):
            raise Bmv2Error(f"nanomsg: packet for port {port} not sent (errno {ctypes.get_errno()})")

    def receive(self) -> tuple[int, bytes] | None:
        """The next packet out (port, bytes), or None after the receive timeout."""
        n = self._nn.nn_recv(self._fd, self._buf, len(self._buf), 0)
        if n < _HEADER.size:
            return None
        msg = ctypes.string_at(self._buf, n)
        kind, port, length = _HEADER.unpack_from(msg)
        if kind != _MSG_PACKET_OUT:
            return None
        return port, msg[_HEADER.size:_HEADER.size + length]

    def close(self) -> None:
        self._nn.nn_close(self._fd)


# --------------------------------------------------------------------------- simple_switch_CLI

CLI_PROMPT = b"RuntimeCmd: "
_CLI_ERROR = re.compile(r"^(Error|Invalid|Traceback|.*Error:)", re.MULTILINE)


class Cli:
    """One `simple_switch_CLI` process kept open: a command in, the text it printed out.

    Starting the CLI costs about a second (Python start, JSON fetch), a command about a
    millisecond, so a switch keeps one for its whole run.
    """

    def __init__(self, thrift_port: int, timeout_s: float = 60.0):
        self.timeout_s = timeout_s
        self._proc = subprocess.Popen(["simple_switch_CLI", "--thrift-port", str(thrift_port)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self._read_to_prompt("start")

    def _read_to_prompt(self, what: str) -> str:
        buf = bytearray()
        deadline = time.monotonic() + self.timeout_s
        fd = self._proc.stdout.fileno()
        while not buf.endswith(CLI_PROMPT):
            if time.monotonic() > deadline:
                raise Bmv2Error(f"simple_switch_CLI: no prompt after {what!r} within {self.timeout_s:g} s")
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                tail = buf.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise Bmv2Error(f"simple_switch_CLI exited at {what!r}: {tail[0]}")
            buf += chunk
        return buf[:-len(CLI_PROMPT)].decode(errors="replace").strip()

    def run(self, command: str) -> str:
        """What the CLI printed for `command`. An error it reports raises InvalidArgument (a
        StateError, as State raises for a bad write), naming the command."""
        self._proc.stdin.write(command.encode() + b"\n")
        self._proc.stdin.flush()
        output = self._read_to_prompt(command)
        if _CLI_ERROR.search(output):
            raise st.InvalidArgument(f"simple_switch_CLI {command!r}: {output.splitlines()[0]}")
        return output

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.stdin.close()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()


# --------------------------------------------------------------------------- the control plane

# BMv2 ternary priorities: the smallest number wins; P4Runtime's (State's): the largest.
_BMV2_TOP_PRIORITY = (1 << 30)


class _Register:
    """`state.register(name)` as the STF runner uses it (`.reset()`)."""

    def __init__(self, state: Bmv2State, name: str):
        self._state, self.name = state, name

    def reset(self) -> None:
        self._state.cli.run(f"register_reset {self.name}")


class Bmv2State:
    """The write/read calls of `p4target.state.State`, carried out on BMv2 through its CLI.

    Names are control-plane names, as in State; p4c's BMv2 JSON uses the same ones. Match
    keys follow the table's key order in the JSON; wildcarded fields get a match-all value.
    """

    def __init__(self, cli: Cli, schema: st.ProgramSchema, bmv2_json: dict):
        self.cli = cli
        self.schema = schema
        self.multicast_groups: dict[int, list[tuple[int, int]]] = {}  # as State's (the STF runner reads it)
        tables = [t for p in bmv2_json["pipelines"] for t in p["tables"]]
        self._json_keys = {t["name"]: [k["match_type"] for k in t["key"]] for t in tables}
        self._json_kind = {t["name"]: t["match_type"] for t in tables}
        self._mc_nodes: dict[int, list[int]] = {}  # group -> node handles
        self._direct: list[tuple[str, st.TableEntry, int]] = []  # (direct counter, entry, handle)
        self._entries: dict[tuple[str, str, int], int] = {}  # (table, match, priority) -> BMv2's entry handle
        self._profile_handles: dict[tuple[str, str, int], int] = {}  # (profile, "member"|"group", id) -> BMv2's
        self._group_members: dict[tuple[str, int], list[int]] = {}  # (profile, group id) -> member ids

    # -- tables

    def _match(self, table: str, entry: st.TableEntry) -> str:
        schema = self._table(table)
        return " ".join(self._key(k, entry.match.get(k.name), kind) for k, kind in zip(schema.keys, self._json_keys[table]))

    def insert_entry(self, table: str, entry: st.TableEntry) -> None:
        schema = self._table(table)
        keys = self._match(table, entry)
        if schema.implementation is None:
            command = f"table_add {table} {entry.action} {keys} => {self._args(entry.action, entry.params)}"
        else:  # the entry names a member or a group of the table's profile
            named = ("member", entry.member_id) if entry.member_id is not None else ("group", entry.group_id)
            command = (f"table_indirect_add{'_with_group' if named[0] == 'group' else ''} {table} {keys} => "
                       f"{self._profile_handles[(schema.implementation, *named)]}")
        if self._json_kind[table] in ("ternary", "range"):  # the tables BMv2 wants a priority for
            command += f" {_BMV2_TOP_PRIORITY - entry.priority}"
        output = self.cli.run(" ".join(command.split()))
        handle = int(re.search(r"added with handle (\d+)", output).group(1))
        self._entries[(table, keys, entry.priority)] = handle
        if schema.direct_counter:
            self._direct.append((schema.direct_counter, entry, handle))

    def delete_entry(self, table: str, entry: st.TableEntry) -> None:
        handle = self._entries.pop((table, self._match(table, entry), entry.priority))
        indirect = "indirect_" if self.schema.tables[table].implementation is not None else ""
        self.cli.run(f"table_{indirect}delete {table} {handle}")

    def set_default(self, table: str, action: str, params: dict[str, int] | None = None) -> None:
        self._table(table)
        self.cli.run(f"table_set_default {table} {action} {self._args(action, params or {})}".strip())

    def _table(self, name: str) -> st.TableSchema:
        schema = self.schema.tables.get(name)
        if schema is None or name not in self._json_keys:
            raise st.InvalidArgument(f"unknown table {name!r}")
        if len(schema.keys) != len(self._json_keys[name]):
            raise st.InvalidArgument(f"table {name}: {len(schema.keys)} keys here, "
                                     f"{len(self._json_keys[name])} in p4c's JSON")
        return schema

    def _args(self, action: str, params: dict[str, int]) -> str:
        declared = self.schema.actions[action].params
        return " ".join(hex(params[name]) for name, _ in declared)

    @staticmethod
    def _key(key: st.KeyField, match: st.Match | None, json_kind: str) -> str:
        full = (1 << key.bitwidth) - 1
        if match is None:  # a wildcard: whatever matches everything in BMv2's syntax
            return {"lpm": "0/0", "range": f"0->{hex(full)}"}.get(json_kind, "0&&&0")
        if isinstance(match, (st.Exact, st.Optional)):  # p4c gives optional keys BMv2's ternary kind
            return hex(match.value) if json_kind == "exact" else f"{hex(match.value)}&&&{hex(full)}"
        if isinstance(match, st.Lpm):
            return f"{hex(match.value)}/{match.prefix_len}"
        if isinstance(match, st.Ternary):
            return f"{hex(match.value)}&&&{hex(match.mask)}"
        return f"{hex(match.low)}->{hex(match.high)}"

    # -- action profiles and selectors (BMv2's CLI puts a member in a group once: weights are 1)

    def profile_member_insert(self, profile: str, member_id: int, action: str, params: dict[str, int]) -> None:
        output = self.cli.run(f"act_prof_create_member {profile} {action} {self._args(action, params)}".strip())
        self._profile_handles[(profile, "member", member_id)] = int(re.search(r"handle (\d+)", output).group(1))

    def profile_member_modify(self, profile: str, member_id: int, action: str, params: dict[str, int]) -> None:
        handle = self._profile_handles[(profile, "member", member_id)]
        self.cli.run(f"act_prof_modify_member {profile} {action} {handle} {self._args(action, params)}".strip())

    def profile_member_delete(self, profile: str, member_id: int) -> None:
        self.cli.run(f"act_prof_delete_member {profile} {self._profile_handles.pop((profile, 'member', member_id))}")

    def profile_group_insert(self, profile: str, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        output = self.cli.run(f"act_prof_create_group {profile}")
        self._profile_handles[(profile, "group", group_id)] = int(re.search(r"handle (\d+)", output).group(1))
        self._group_members[(profile, group_id)] = []
        self.profile_group_modify(profile, group_id, members, max_size)

    def profile_group_modify(self, profile: str, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        if set(members.values()) - {1}:
            raise st.InvalidArgument("BMv2's CLI takes each group member once (weight 1)")
        group = self._profile_handles[(profile, "group", group_id)]
        for verb, ids in (("remove_member_from", self._group_members[(profile, group_id)]), ("add_member_to", members)):
            for member_id in ids:
                self.cli.run(f"act_prof_{verb}_group {profile} {self._profile_handles[(profile, 'member', member_id)]} "
                             f"{group}")
        self._group_members[(profile, group_id)] = list(members)

    def profile_group_delete(self, profile: str, group_id: int) -> None:
        self.profile_group_modify(profile, group_id, {})
        del self._group_members[(profile, group_id)]
        self.cli.run(f"act_prof_delete_group {profile} {self._profile_handles.pop((profile, 'group', group_id))}")

    # -- packet replication engine

    def mc_group_insert(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        self.cli.run(f"mc_mgrp_create {group_id}")
        self.multicast_groups[group_id] = []
        self._mc_nodes[group_id] = []
        self.mc_group_modify(group_id, replicas)

    def mc_group_modify(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Replace the group's nodes: one node per run of replicas with the same rid."""
        self._drop_nodes(group_id)
        nodes = []
        for rid, run in _runs_by_rid(replicas):
            output = self.cli.run(f"mc_node_create {rid} {' '.join(str(p) for p in run)}")
            node = int(re.search(r"created with handle (\d+)", output).group(1))
            self.cli.run(f"mc_node_associate {group_id} {node}")
            nodes.append(node)
        self._mc_nodes[group_id] = nodes
        self.multicast_groups[group_id] = list(replicas)

    def mc_group_delete(self, group_id: int) -> None:
        self._drop_nodes(group_id)
        self.cli.run(f"mc_mgrp_destroy {group_id}")
        del self.multicast_groups[group_id], self._mc_nodes[group_id]

    def _drop_nodes(self, group_id: int) -> None:
        for node in self._mc_nodes[group_id]:
            self.cli.run(f"mc_node_dissociate {group_id} {node}")
            self.cli.run(f"mc_node_destroy {node}")
        self._mc_nodes[group_id] = []

    def clone_session_insert(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        """One replica with instance 0 is a port mirror; more go through a multicast group."""
        if packet_length:
            raise st.InvalidArgument("clone session truncation: simple_switch_CLI cannot set it")
        if len(replicas) == 1 and replicas[0][1] == 0:
            self.cli.run(f"mirroring_add {session_id} {replicas[0][0]}")
        else:
            group = next((g for g, r in self.multicast_groups.items() if r == replicas), None)
            if group is None:
                group = max(self.multicast_groups, default=0) + 1
                self.mc_group_insert(group, replicas)
            self.cli.run(f"mirroring_add_mc {session_id} {group}")

    # -- registers and counters

    def register(self, name: str) -> _Register:
        return _Register(self, name)

    def register_write(self, name: str, index: int, value: int) -> None:
        self.cli.run(f"register_write {name} {index} {value}")

    def register_read(self, name: str, index: int) -> int:
        output = self.cli.run(f"register_read {name} {index}")
        return int(output.rsplit("=", 1)[1])

    def register_values(self, name: str) -> list[int]:
        """The whole register array, in one CLI command."""
        output = self.cli.run(f"register_read {name}")
        return [int(v) for v in output.split("=", 1)[1].split(",")]

    def counter_read(self, name: str, index: int) -> tuple[int, int]:
        output = self.cli.run(f"counter_read {name} {index}")
        nbytes, packets = re.search(r"\((\d+) bytes, (\d+) packets\)", output).groups()
        return int(packets), int(nbytes)

    def sync_direct_counters(self) -> None:
        """Copy BMv2's direct-counter cells into our entries, where the STF runner reads them."""
        for name, entry, handle in self._direct:
            entry.packets, entry.bytes = self.counter_read(name, handle)


def _runs_by_rid(replicas: Sequence[tuple[int, int]]) -> list[tuple[int, list[int]]]:
    runs: list[tuple[int, list[int]]] = []
    for port, rid in replicas:
        if runs and runs[-1][0] == rid:
            runs[-1][1].append(port)
        else:
            runs.append((rid, [port]))
    return runs


# --------------------------------------------------------------------------- the switch

_LOG_LINE = re.compile(r"\[thread (\d+)\] (?:\[[\d.]+\] \[cxt \d+\] )?(.*)")
_REPLICATED = re.compile(r"number of packets replicated : (\d+)")
BIRTHS = ("Cloning packet to egress port",)  # replicas are born with `number of packets replicated`
DEATHS = ("Dropping packet at the end of ingress", "Dropping packet at the end of egress",
          "Transmitting packet of size", "Priority out of range, dropping packet")
UNKNOWN_GROUP = "which is not known to the PRE"


class Accounting:
    """Packet copies alive inside BMv2, from its debug log (see the module docstring)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.alive = 0
        self.transmitted = 0
        self.outputs: list[tuple[int, bytes]] = []
        self.tail: collections.deque[str] = collections.deque(maxlen=20)  # BMv2's last log lines
        self.ended = False  # its output ended: simple_switch exited (or crashed)
        self._pending: dict[str, int] = {}  # thread -> copies that die once its replication is known

    def log_line(self, line: str) -> None:
        self.tail.append(line.rstrip())
        m = _LOG_LINE.search(line)
        if not m:
            return
        thread, message = m.groups()
        with self.cond:
            if message.startswith(BIRTHS):
                self.alive += 1
            elif message.startswith(DEATHS):
                self.alive -= 1
                self.transmitted += message.startswith("Transmitting")
            elif message.startswith("Multicast requested"):
                self._pending[thread] = 1  # the original dies when its replicas are born
            elif message.startswith("Cloning packet to MGID"):
                self._pending[thread] = 0
            else:
                replicated = _REPLICATED.search(message)
                if not replicated and UNKNOWN_GROUP not in message:
                    return
                self.alive += (int(replicated.group(1)) if replicated else 0) - self._pending.pop(thread, 0)
            self.cond.notify_all()

    def output(self, port: int, data: bytes) -> None:
        with self.cond:
            self.outputs.append((port, data))
            self.cond.notify_all()

    def done(self) -> bool:
        return self.alive == 0 and len(self.outputs) == self.transmitted


def _free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Bmv2Switch:
    """simple_switch running one program, driven like an embedded Pipeline (module docstring).

    Use as a context manager; the process, its CLI and its temporary files go at exit.
    """

    def __init__(self, json_path: str, schema: st.ProgramSchema, timeout_s: float = 120.0):
        self.timeout_s = timeout_s
        self._dir = tempfile.mkdtemp(prefix="h4-bmv2-")
        self._acct = Accounting()
        self._stop = threading.Event()
        self.thrift_port = _free_tcp_port()
        address = f"ipc://{self._dir}/packets.ipc"
        self._proc = subprocess.Popen(
            ["simple_switch", "--packet-in", address, "--thrift-port", str(self.thrift_port),
             "--notifications-addr", f"ipc://{self._dir}/notifications.ipc", "--log-console", "-L", "debug",
             json_path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        self._threads = [threading.Thread(target=self._read_log, daemon=True)]
        self._threads[0].start()
        try:
            self._wait_for_thrift()
            self._socket = PacketSocket(address)
            self._threads.append(threading.Thread(target=self._receive, daemon=True))
            self._threads[1].start()
            self.cli = Cli(self.thrift_port)
            self.cli.run("set_queue_depth 1000000")  # full egress queues drop silently
            with open(json_path) as fh:
                self.state = Bmv2State(self.cli, schema, json.load(fh))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Bmv2Switch:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _wait_for_thrift(self) -> None:
        """Until simple_switch listens, however long it takes to start (the per-test timeout ends a hang)."""
        while True:
            if self._proc.poll() is not None:
                raise Bmv2Error(f"simple_switch exited with {self._proc.returncode}: {self._last_log()}")
            try:
                socket.create_connection(("127.0.0.1", self.thrift_port), 0.2).close()
                return
            except OSError:
                time.sleep(0.05)

    def _last_log(self) -> str:
        self._threads[0].join(1)  # the process is gone: its output ends soon
        return self._acct.tail[-1] if self._acct.tail else "no log output"

    def _read_log(self) -> None:
        for line in self._proc.stdout:
            self._acct.log_line(line)
        with self._acct.cond:  # a batch waiting for a switch that crashed fails now, not at its timeout
            self._acct.ended = True
            self._acct.cond.notify_all()

    def _receive(self) -> None:
        while not self._stop.is_set():
            got = self._socket.receive()
            if got is not None:
                self._acct.output(*got)

    # -- packets

    def process_all(self, packets: Iterable[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
        """Feed the packets in order, wait until BMv2 is done with all of them; what left.

        The list is in BMv2's transmit order: per port that is the packets' order, across
        ports it may vary (see the module docstring), so compare `per_port(...)`.
        """
        acct = self._acct
        with acct.cond:
            start = len(acct.outputs)
        count = 0
        for port, data in packets:
            with acct.cond:
                acct.alive += 1
            self._socket.send(port, data)
            count += 1
        deadline = time.monotonic() + self.timeout_s
        with acct.cond:
            while not acct.done():
                if acct.ended:
                    raise Bmv2Error(f"simple_switch exited with {self._proc.wait()} during a batch of {count}: "
                                    f"{acct.tail[-1] if acct.tail else 'no log output'}")
                if not acct.cond.wait(timeout=max(0.0, deadline - time.monotonic())) and \
                        time.monotonic() >= deadline:
                    raise Bmv2Error(f"BMv2 not done after {self.timeout_s:g} s: {acct.alive} packet copies alive, "
                                    f"{acct.transmitted - len(acct.outputs)} transmitted but not received; "
                                    f"BMv2's last log line: {acct.tail[-1] if acct.tail else '-'}")
            out = acct.outputs[start:]
        self.state.sync_direct_counters()
        return out

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """One packet through the switch, as `Pipeline.process` (what the STF runner calls)."""
        return self.process_all([(port, data)])

    def close(self) -> None:
        self._stop.set()
        if getattr(self, "cli", None) is not None:
            self.cli.close()
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for thread in self._threads:
            thread.join(5)
        if getattr(self, "_socket", None) is not None:
            self._socket.close()
        shutil.rmtree(self._dir, ignore_errors=True)


# --------------------------------------------------------------------------- comparing targets

def per_port(outputs: Iterable[tuple[int, bytes]]) -> dict[int, list[bytes]]:
    """Packets out, grouped by port, each port's in order."""
    ports: dict[int, list[bytes]] = {}
    for port, data in outputs:
        ports.setdefault(port, []).append(bytes(data))
    return ports


@dataclass
class Observation:
    """What a differential test compares: packets out per port, chosen register and counter cells."""

    outputs: dict[int, list[bytes]]
    registers: dict[str, list[int]] = field(default_factory=dict)
    counters: dict[str, list[tuple[int, int]]] = field(default_factory=dict)


def observe(target, packets: Sequence[tuple[int, bytes]], registers: dict[str, Sequence[int]] | None = None,
            counters: dict[str, Sequence[int]] | None = None) -> Observation:
    """Run `packets` through `target` (a Bmv2Switch or an embedded Pipeline) and read its state.

    `registers`/`counters` map names to the indexes to read; counters read as (packets, bytes).
    """
    if isinstance(target, Bmv2Switch):
        outputs = target.process_all(packets)
    else:
        outputs = [out for port, data in packets for out in target.process(port, data)]
    return Observation(per_port(outputs), *read_cells(target, registers or {}, counters or {}))


def read_cells(target, registers: dict[str, Sequence[int]], counters: dict[str, Sequence[int]]
               ) -> tuple[dict[str, list[int]], dict[str, list[tuple[int, int]]]]:
    """The register values and counter (packets, bytes) at the given indexes of either target."""
    if isinstance(target, Bmv2Switch):  # one CLI command per register, not one per cell
        reg = {name: [values[i] for i in idx] for name, idx in registers.items()
               for values in [target.state.register_values(name)]}
    else:
        reg = {name: [target.state.register_read(name, i) for i in idx] for name, idx in registers.items()}
    return reg, {name: [target.state.counter_read(name, i) for i in idx] for name, idx in counters.items()}


# BMv2's Thrift API carries register values as i64: wider cells read back clamped to 2**63 - 1.
THRIFT_REGISTER_BITS = 63


def all_cells(schema: st.ProgramSchema) -> tuple[dict[str, range], dict[str, range]]:
    """Every register and indirect counter cell of a program BMv2's CLI can read, for `read_cells`
    (wider registers show in the packets a test's program writes them into)."""
    return ({name: range(r.size) for name, r in schema.registers.items() if r.bitwidth <= THRIFT_REGISTER_BITS},
            {name: range(c.size) for name, c in schema.counters.items()})


def first_difference(ours: Observation, bmv2: Observation) -> str:
    """'' when the observations are equal, else one readable paragraph about the first difference."""
    for port in sorted(set(ours.outputs) | set(bmv2.outputs)):
        a, b = ours.outputs.get(port, []), bmv2.outputs.get(port, [])
        for i in range(max(len(a), len(b))):
            pa, pb = (a[i] if i < len(a) else None), (b[i] if i < len(b) else None)
            if pa != pb:
                return (f"port {port}, packet #{i + 1} (of {len(a)} embedded, {len(b)} BMv2):\n"
                        f"  embedded: {pa.hex() if pa is not None else 'nothing'}\n"
                        f"  BMv2:     {pb.hex() if pb is not None else 'nothing'}"
                        + _first_byte(pa, pb))
    for kind, mine, theirs in (("register", ours.registers, bmv2.registers),
                               ("counter", ours.counters, bmv2.counters)):
        for name in sorted(set(mine) | set(theirs)):
            a, b = mine.get(name), theirs.get(name)
            if a != b:
                at = next((i for i, (x, y) in enumerate(zip(a or [], b or [])) if x != y), None)
                return (f"{kind} {name}: first differing read #{at}: embedded {a[at] if at is not None else a}, "
                        f"BMv2 {b[at] if at is not None else b}")
    return ""


def _first_byte(a: bytes | None, b: bytes | None) -> str:
    if a is None or b is None:
        return ""
    at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"\n  first difference at byte {at} (lengths {len(a)} / {len(b)})"
