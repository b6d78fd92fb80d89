"""Control-plane write sequences fuzzed on the native engine against the Python engine, then under the sanitizers.

The packet fuzzer (scripts/fuzz_engine.py) replays one test's writes; an engine bug that only a sequence of
writes reaches (an entry modified to an action with more parameters, a handle reused after a delete) slips
past it. Here each program gets a seeded random sequence of State writes, through the API the runtime
uses, drawn from its schema: entries inserted, modified (to other actions, with more or fewer parameters),
deleted and inserted again; default actions; action profile members and groups (entries naming deleted
ones); register, counter, meter, multicast, clone session and value set writes; whole resets; and a share
of invalid writes, which both engines must refuse with the same exception. Packets run in between: frames
resent, mutated and random, and entries are built from the keys packets were looked up with, so they hit.
Every packet's outputs must be the same on the native and the Python engine, and so must the registers and
counters at the end; then the native run's Trace is replayed by the sanitized driver (tests/engine_fuzz.py's run),
which ASan, UBSan and LeakSanitizer watch. Each program runs in a child process, so an engine that corrupts the
heap is a finding too. One line per program; a finding names its seed. The harness: the command line is
scripts/fuzz_control_plane.py, tests/test_native_cp_fuzz.py runs it bounded.
"""
from __future__ import annotations

import collections
import copy
import json
import random
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import engine_fuzz as fz
from engine_fuzz import mutate

from p4target import load
from p4target import state as st
from p4target.frontend import load_program
from p4target.lowered.from_ir import lower_program
from p4target.native.binding import Trace

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "scripts" / "fuzz_control_plane.py"  # its --one runs fuzz_program in a child process

PROGRAMS = {
    "aggnet": REPO / "p4src" / "aggnet.p4",
    "basic": REPO / "tests" / "data" / "tutorial_basic" / "basic.p4",
    **{n: REPO / "tests" / "data" / "runtime" / f"{n}.p4" for n in ("profiles", "ipv4_cpu", "value_sets", "l2_learn")},
    **{n: REPO / "tests" / "data" / "native" / f"{n}.p4" for n in ("profile", "selector")},
    # every match kind, direct counters and meters, a range over a 96-bit key
    "matches": REPO / "tests" / "data" / "p4rt" / "matches.p4",
    "meters": REPO / "tests" / "data" / "interp" / "meters.p4",
    "tables": REPO / "tests" / "data" / "interp" / "tables.p4",
    "wide_range": REPO / "tests" / "data" / "native_gaps" / "wide_range.p4",
    # corpus programs with tables the control plane may write (the table-entries-* ones are const)
    **{n: fz.CORPUS / f"{n}.p4" for n in (
        "ternary2-bmv2", "v1model-special-ops-bmv2", "ipv6-switch-ml-bmv2", "flag_lost-bmv2", "issue1814-1-bmv2",
        "issue3488-bmv2", "match-on-exprs-bmv2", "gauntlet_switch_nested_table_apply-bmv2", "key-bmv2")},
}
ETHER_TYPES = (0x0800, 0x86DD, 0x0806, 0x8100, 0x1234, 0x88B5)  # frames carry these; value sets get them too
SMALL_IDS = 12  # member, group, session and multicast ids come from a few, so they are reused
FRAMES_AFTER = 2_000  # fuzzed frames the sanitized driver runs after replaying a trace


class Finding(Exception):
    """The engines disagree, or one raised what the other did not."""


@dataclass
class Outcome:
    name: str
    ok: bool
    line: str
    counts: collections.Counter = field(default_factory=collections.Counter)


def _frames(rng: random.Random, name: str, path: Path) -> list[tuple[int, bytes]]:
    """Frames to start from: Ethernet with IPv4/IPv6/ARP and random EtherTypes, the program's STF packets,
    aggregation packets for aggnet.p4."""
    from scapy.layers.inet import ICMP, IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Dot1Q, Ether

    def l2() -> Ether:
        return Ether(dst=f"02:00:00:00:00:{rng.randrange(8):02x}", src=f"02:00:00:00:00:{rng.randrange(8):02x}")

    frames = []
    for _ in range(24):
        ip = IP(src=f"10.0.{rng.randrange(3)}.{rng.randrange(1, 6)}", dst=f"10.0.{rng.randrange(3)}.{rng.randrange(1, 6)}",
                ttl=rng.choice([1, 64]))
        frames += [l2() / ip / rng.choice([UDP(sport=rng.randrange(1, 4), dport=rng.randrange(1, 4)),
                                           TCP(sport=rng.randrange(1, 4), dport=80), ICMP()]),
                   l2() / IPv6(dst=f"fe80::{rng.randrange(4)}") / UDP(), l2() / ARP(pdst=f"10.0.0.{rng.randrange(4)}"),
                   l2() / Dot1Q(vlan=rng.randrange(4)) / ip,
                   Ether(dst="02:00:00:00:00:01", type=rng.choice(ETHER_TYPES))
                   / bytes(rng.randrange(4) for _ in range(rng.randrange(4, 40)))]
    out = [(rng.randrange(1, 5), bytes(f)) for f in frames]
    stf = path.with_suffix(".stf")
    if stf.is_file():
        out += [(int(words[1]), bytes.fromhex("".join(words[2:]).replace("*", "0")))
                for words in (ln.split() for ln in stf.read_text().splitlines()) if words[:1] == ["packet"]]
    if name == fz.AGGNET:
        import fabric as fb
        out += [(src, fb.packet(job, rng.randrange(8), rng.randrange(64), [rng.randrange(-4, 4) for _ in range(32)],
                                pool=rng.randrange(2), retx=rng.random() < 0.2, src=src))
                for job in (1, 2) for src in range(1, 5) for _ in range(3)]
    return out


class Sequence:
    """One program on both engines and the random writes and packets given to both (see module docstring)."""

    def __init__(self, name: str, path: Path, seed: int):
        self.name, self.rng = name, random.Random(f"{name}/{seed}")
        program = lower_program(load_program(str(path)))  # both engines run the same lowered form
        self.python = load.pipeline(program, "python")
        self.trace = Trace()
        self.native = load.native(program, trace=self.trace)
        self.state = self.python.state  # the model to draw writes from (both states hold the same)
        self.schema = self.state.schema
        self.frames = _frames(self.rng, name, path)
        self.sent: list[tuple[int, bytes]] = []
        self.looked_up: dict[str, list[tuple]] = collections.defaultdict(list)  # keys packets were looked up with
        self.matches: dict[str, list[tuple[dict, int]]] = collections.defaultdict(list)  # (match, priority) written
        self.counts: collections.Counter = collections.Counter()
        self.tables = [t for t in self.state.tables.values() if t.schema.keys]

    # -- running one step on both engines

    def write(self, method: str, *args, kind: str = "") -> bool:
        """`state.<method>(*args)` on both engines (each its own copy): True if both accepted it."""
        raised = []
        for pipeline in (self.native, self.python):
            try:
                getattr(pipeline.state, method)(*copy.deepcopy(args))
                raised.append(None)
            except Exception as exc:  # noqa: BLE001 - any exception is compared, a non-StateError is a finding
                raised.append(exc)
        what = f"{method}{args!r}"
        names = [type(e).__name__ if e else "accepted" for e in raised]
        if names[0] != names[1]:
            raise Finding(f"{what}: native {names[0]} ({raised[0]}), python {names[1]} ({raised[1]})")
        if raised[0] is not None and not isinstance(raised[0], st.StateError):
            raise Finding(f"{what}: both raised {names[0]}, not a StateError: {raised[0]}")
        self.counts[(kind or method) if raised[0] is None else "refused"] += 1
        return raised[0] is None

    def packet(self) -> None:
        roll = self.rng.random()
        if roll < 0.5 and self.sent:
            port, data = self.rng.choice(self.sent)
        else:
            port, data = self.rng.choice(self.frames)
            if roll > 0.85:
                data = mutate(self.rng, data)
            elif roll > 0.8:
                data = bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(64)))
            if self.rng.random() < 0.1:
                port = self.rng.randrange(16)
            if len(self.sent) < 256:
                self.sent.append((port, data))
        for table in self.tables:
            self._observe(table)
        native, python = self.native.process(port, data), self.python.process(port, data)
        if native != python:
            raise Finding(f"packet on port {port} {data.hex()}: native sent {native}, python {python}")
        self.counts["packets"] += 1

    def _observe(self, table: st.Table) -> None:
        """Wrap the Python engine's lookup of `table` (again after a reset rebinds it): keys seen, hits counted."""
        lookup = table.lookup
        if getattr(lookup, "observed", False):
            return
        seen, counts = self.looked_up[table.name], self.counts

        def observed(key: tuple) -> st.TableEntry | None:
            entry = lookup(key)
            if len(seen) < 32 and key not in seen:
                seen.append(key)
            counts["hits" if entry is not None else "misses"] += 1
            return entry

        observed.observed = True
        table.lookup = observed

    def compare_state(self) -> None:
        """Registers, indirect counters and every entry's direct counters the same on both engines."""
        def cells(s: st.State) -> dict:
            out = {n: [int(v) for v in (r.read(i) for i in range(r.schema.size))] for n, r in s.registers.items()}
            out.update({n: [c.read(i) for i in range(c.schema.size)] for n, c in s.counters.items()})
            out.update({n: sorted((repr(e.match), e.priority, int(e.packets), int(e.bytes)) for e in t.entries())
                        for n, t in s.tables.items()})
            return out
        native, python = cells(self.native.state), cells(self.python.state)
        for name in python:
            if native[name] != python[name]:
                raise Finding(f"{name} differs at the end: native {native[name]}, python {python[name]}")

    # -- values drawn from the schema

    def value(self, width: int) -> int:
        roll = self.rng.random()
        if roll < 0.3:
            return self.rng.randrange(min(4, 1 << width))
        if roll < 0.4:
            return (1 << width) - 1
        if roll < 0.5:
            return self.rng.choice(ETHER_TYPES) & ((1 << width) - 1)
        return self.rng.getrandbits(width)

    def bad(self) -> bool:
        """Whether this write is to be an invalid one."""
        return self.rng.random() < 0.06

    def params(self, action: str) -> dict[str, int]:
        params = {p: self.value(w) for p, w in self.schema.actions[action].params}
        if self.bad() and params:
            name, width = self.rng.choice(self.schema.actions[action].params)
            params[name] = 1 << width  # a bit too wide
        elif self.bad():
            params["no_such_param"] = 1
        return params

    def match(self, table: st.Table) -> tuple[dict, int]:
        """(match, priority) for a new entry: from a looked-up key (so packets hit it), or random."""
        keys = table.schema.keys
        seen = self.looked_up.get(table.name)
        values = list(self.rng.choice(seen)) if seen and self.rng.random() < 0.7 else [self.value(k.bitwidth) for k in keys]
        match = {}
        for key, v in zip(keys, values):
            w, full = key.bitwidth, (1 << key.bitwidth) - 1
            if key.match_kind == "exact":
                match[key.name] = st.Exact(v)
            elif key.match_kind == "lpm":
                plen = self.rng.choice([w, w, self.rng.randrange(w + 1)])
                match[key.name] = st.Lpm(v & (full ^ (full >> plen)), plen)
            elif key.match_kind == "ternary":
                mask = self.rng.choice([full, self.rng.getrandbits(w), 0])
                match[key.name] = st.Ternary(v & mask, mask)
            elif key.match_kind == "range":
                match[key.name] = st.Range(self.rng.randint(0, v), self.rng.randint(v, full))
            elif self.rng.random() < 0.7:  # optional: else a wildcard
                match[key.name] = st.Optional(v)
        priority = self.rng.randint(1, 8) if table.needs_priority else 0
        if self.bad():
            key = self.rng.choice(keys)
            match[key.name] = st.Exact(1 << key.bitwidth) if key.match_kind == "exact" else st.Exact(0)
        elif self.bad():
            priority = 0 if table.needs_priority else 1
        return match, priority

    def entry_match(self, table: st.Table) -> tuple[dict, int]:
        """An entry's match: mostly one in the table, else one written before (maybe deleted since) or new."""
        roll, entries = self.rng.random(), table.entries()
        if roll < 0.7 and entries:
            e = self.rng.choice(entries)
            return dict(e.match), e.priority
        if roll < 0.9 and self.matches[table.name]:
            return self.rng.choice(self.matches[table.name])
        return self.match(table)

    def target(self, table: st.Table) -> dict:
        """What an entry runs: an action and its parameters, or a member or group of the table's profile."""
        if table.profile is None:
            actions = [a for a in table.schema.actions if a not in table.schema.default_only]
            action = self.rng.choice(actions if actions and not self.bad() else list(table.schema.actions))
            return {"action": action, "params": self.params(action)}
        profile = table.profile
        groups = list(profile.groups) if profile.schema.with_selector else []
        if groups and self.rng.random() < 0.5:
            return {"action": "", "group_id": self.rng.choice(groups) if not self.bad() else self.rng.randrange(SMALL_IDS)}
        members = list(profile.members)
        return {"action": "", "member_id": self.rng.choice(members) if members and not self.bad()
                else self.rng.randrange(SMALL_IDS)}

    # -- the writes

    def entry_write(self) -> None:
        table = self.rng.choice(self.tables)
        roll = self.rng.random()
        if roll < 0.45:
            match, priority = self.match(table) if self.rng.random() < 0.6 else self.entry_match(table)
            if self.write("insert_entry", table.name, st.TableEntry(match, priority=priority, **self.target(table)),
                          kind="inserts"):
                self.matches[table.name].append((match, priority))
        elif roll < 0.8:
            match, priority = self.entry_match(table)
            before = self._find(table, match, priority)
            was = before.action if before is not None else None  # the write changes `before` in place
            to = self.target(table)
            if self.write("modify_entry", table.name, st.TableEntry(match, priority=priority, **to), kind="modifies") \
                    and to["action"] != was:
                self.counts["action-changing modifies"] += 1
        else:
            match, priority = self.entry_match(table)
            self.write("delete_entry", table.name, st.TableEntry(match, "", priority=priority), kind="deletes")

    @staticmethod
    def _find(table: st.Table, match: dict, priority: int) -> st.TableEntry | None:
        try:
            return table.find(match, priority)
        except st.StateError:
            return None

    def default_write(self) -> None:
        table = self.rng.choice(list(self.state.tables.values()))
        if self.rng.random() < 0.2:
            self.write("reset_default", table.name, kind="defaults")
            return
        actions = [a for a in table.schema.actions if a not in table.schema.table_only]
        action = self.rng.choice(actions if actions and not self.bad() else list(table.schema.actions))
        self.write("set_default", table.name, action, self.params(action), kind="defaults")

    def profile_write(self) -> None:
        profile = self.rng.choice(list(self.state.action_profiles.values()))
        name, roll = profile.name, self.rng.random()
        if roll < 0.5 or not profile.schema.with_selector:
            op = self.rng.choice(["insert", "insert", "modify", "delete"])
            existing = list(profile.members) if op != "insert" and self.rng.random() < 0.7 else []
            member = self.rng.choice(existing) if existing else self.rng.randrange(SMALL_IDS)
            if op == "delete":
                self.write("profile_member_delete", name, member, kind="member ops")
            else:
                action = self.rng.choice(list(profile.schema.actions))
                was = profile.members[member].action if member in profile.members else None
                if self.write(f"profile_member_{op}", name, member, action, self.params(action), kind="member ops") \
                        and op == "modify" and action != was:
                    self.counts["action-changing member modifies"] += 1
            return
        group, op = self.rng.randrange(SMALL_IDS), self.rng.choice(["insert", "modify", "modify", "delete"])
        if op == "delete":
            self.write("profile_group_delete", name, group, kind="group ops")
            return
        ids = list(profile.members) + ([self.rng.randrange(SMALL_IDS)] if self.bad() else [])
        members = {m: self.rng.choice([1, 1, 2, 3]) for m in self.rng.sample(ids, self.rng.randint(0, len(ids)))}
        max_size = self.rng.choice([0, 0, sum(members.values()), 2])
        self.write(f"profile_group_{op}", name, group, members, max_size, kind="group ops")

    def extern_write(self) -> None:
        s, rng = self.schema, self.rng
        choices = [k for k, present in (("register", s.registers), ("counter", s.counters), ("meter", s.meters),
                                        ("direct meter", s.direct_meters), ("value set", s.value_sets)) if present]
        kind = rng.choice(choices + ["multicast", "clone"])
        if kind == "register":
            r = s.registers[rng.choice(list(s.registers))]
            index = rng.randrange(r.size + (1 if self.bad() else 0))
            self.write("register_write", r.name, index, 1 << r.bitwidth if self.bad() else self.value(r.bitwidth),
                       kind="register writes")
        elif kind == "counter":
            c = s.counters[rng.choice(list(s.counters))]
            self.write("counter_write", c.name, rng.randrange(c.size + (1 if self.bad() else 0)),
                       rng.randrange(100), rng.randrange(10_000), kind="counter writes")
        elif kind == "meter":
            m = s.meters[rng.choice(list(s.meters))]
            self.write("meter_set", m.name, rng.randrange(m.size), self.meter_config(), kind="meter configs")
        elif kind == "direct meter":
            m = s.direct_meters[rng.choice(list(s.direct_meters))]
            match, priority = self.entry_match(self.state.tables[m.table])
            self.write("direct_meter_set", m.name, match, priority, self.meter_config(), kind="meter configs")
        elif kind == "value set":
            v = s.value_sets[rng.choice(list(s.value_sets))]
            members = [tuple(self.value(w) for w in v.bitwidths) for _ in range(rng.randint(0, v.size + self.bad()))]
            self.write("value_set_write", v.name, members, kind="value set writes")
        else:
            replicas = [(rng.choice([rng.randrange(8), 511 if self.bad() else 1]), rng.randrange(4))
                        for _ in range(rng.randrange(4))]
            op, number = rng.choice(["insert", "insert", "modify", "delete"]), rng.randrange(SMALL_IDS)
            if kind == "multicast":
                args = (number,) if op == "delete" else (number, replicas)
                self.write(f"mc_group_{op}", *args, kind="multicast writes")
            else:
                args = (number,) if op == "delete" else (number, replicas, rng.choice([0, 0, 14, 64]))
                self.write(f"clone_session_{op}", *args, kind="clone writes")

    def meter_config(self) -> st.MeterConfig | None:
        """A configuration whose colours do not depend on time: no refill, or so fast buckets never empty (or
        an invalid one, pir < cir)."""
        rng = self.rng
        if rng.random() < 0.2:
            return None
        if self.bad():
            return st.MeterConfig(10, 100, 5, 100)
        if rng.random() < 0.5:
            cburst = rng.choice([0, 100, 10_000])
            return st.MeterConfig(0, cburst, 0, cburst + rng.choice([0, 1_000]))
        return st.MeterConfig(10**12, 10**9, 10**12, 10**9)

    def step(self) -> None:
        roll = self.rng.random()
        if roll < 0.3:
            self.packet()
        elif roll < 0.7 and self.tables:
            self.entry_write()
        elif roll < 0.75 and self.state.tables:
            self.default_write()
        elif roll < 0.87 and self.state.action_profiles:
            self.profile_write()
        elif roll < 0.998:
            self.extern_write()
        else:
            self.write("reset", kind="resets")

    def close(self) -> None:
        self.native.close()


def fuzz_program(name: str, path: Path, ops: int, seed: int, frames: int = FRAMES_AFTER) -> Outcome:
    """`ops` random steps of `name` on both engines, then its trace under the sanitized driver."""
    seq = Sequence(name, path, seed)
    try:
        for i in range(ops):
            try:
                seq.step()
            except Finding as exc:
                return Outcome(name, False, f"FINDING at step {i} (seed {seed}): {exc}", seq.counts)
        try:
            seq.compare_state()
        except Finding as exc:
            return Outcome(name, False, f"FINDING at the end (seed {seed}): {exc}", seq.counts)
        source, text = seq.native.source, seq.trace.text()  # reads the registers: before the engine is freed
    finally:
        seq.close()
    result = fz.run(name, source, text, frames, seed)
    counts = ", ".join(f"{n} {k}" for k, n in sorted(seq.counts.items()))
    if not result.ok:
        return Outcome(name, False, f"FINDING under the sanitizers (seed {seed}): {result.line}", seq.counts)
    return Outcome(name, True, f"{counts}; sanitized replay: {result.line}", seq.counts)


def isolated(name: str, ops: int, seed: int, frames: int = FRAMES_AFTER) -> Outcome:
    """fuzz_program in a child process: heap corruption in the engine (it runs in-process, unsanitized) kills the
    child, and is reported as a finding with its seed, not as the end of the run (or of a later test)."""
    proc = subprocess.run([sys.executable, str(SCRIPT), "--one", name, "--ops", str(ops), "--seed", str(seed),
                           "--frames", str(frames)], capture_output=True, text=True)
    if proc.returncode == 0:
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        return Outcome(name, report["ok"], report["line"], collections.Counter(report["counts"]))
    how = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
    why = " | ".join(proc.stderr.strip().splitlines()[-3:])
    return Outcome(name, False, f"FINDING: the fuzzer died ({how}) (seed {seed}): {why}")
