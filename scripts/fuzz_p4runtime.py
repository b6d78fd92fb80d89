"""P4Runtime writes fuzzed into a running `aggnet switch` over real gRPC.

For each program an `aggnet switch` process runs it; a client becomes primary and sends Write
batches built from the switch's own P4Info, seeded (a run repeats exactly): valid-looking
entities of every kind (table entries, action profile members and groups, counters, direct
counters, meters, direct meters, registers, multicast groups, clone sessions, digests, value
sets) with wrong ids, widths, match kinds, parameters, priorities, indexes and update orders
mixed in. Every answer must be a clean gRPC status (a Write batch: UNKNOWN with one p4.v1.Error
per update, each a code the spec allows), the switch must still answer a Read after each batch,
and at the end it must still take a valid entry and read it back. A finding prints the seed,
the batch number and the offending answer; the script then exits 1.

    python scripts/fuzz_p4runtime.py                          # the default programs, 20,000 updates
    python scripts/fuzz_p4runtime.py --updates 2000 --seed 7 --programs p4src/aggnet.p4
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import grpc
from finsy.proto import p4d, p4i, p4r, rpc_status

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))  # procs: starting and stopping a switch process, p4rt_raw: the raw client

from p4rt_raw import RawClient  # noqa: E402
from procs import running_switch  # noqa: E402

PROGRAMS = ["p4src/aggnet.p4", "tests/data/runtime/profiles.p4", "tests/data/p4info/control_plane.p4"]
# What a Write may answer per update: OK, the codes the spec names for refused entities, and ABORTED
# for the updates of an atomic batch rolled back because another failed.
ALLOWED = {grpc.StatusCode[name].value[0] for name in (
    "OK", "INVALID_ARGUMENT", "NOT_FOUND", "ALREADY_EXISTS", "OUT_OF_RANGE", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "UNIMPLEMENTED", "PERMISSION_DENIED", "ABORTED")}
UPDATE_TYPES = (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE, p4r.Update.UNSPECIFIED)


@dataclass
class Result:
    program: str
    updates: int
    accepted: int
    findings: list[str]

    @property
    def line(self) -> str:
        return (f"{self.program}: {self.updates} updates, {self.accepted} accepted, "
                f"{len(self.findings)} findings")


class Fuzzer:
    """Valid-looking entities for one P4Info, each with a chance of one thing wrong."""

    def __init__(self, info: p4i.P4Info, rng: random.Random):
        self.info = info
        self.rng = rng
        self.actions = {a.preamble.id: a for a in info.actions}
        self.mutate = False
        self.recent: list[p4r.Entity] = []  # entities made lately, reused for duplicates, modifies, deletes

    # -- values ------------------------------------------------------------------------
    def _wrong(self, p: float) -> bool:
        """Whether to get this part wrong: only in updates picked for mutation (self.mutate)."""
        return self.mutate and self.rng.random() < p

    def _id(self, valid: list[int]) -> int:
        """A valid id; when wrong, one of another kind, zero, or a random one."""
        if valid and not self._wrong(0.3):
            return self.rng.choice(valid)
        return self.rng.choice([0, self.rng.getrandbits(32), (valid[0] ^ 0x01000000) if valid else 1])

    def _bytes(self, bitwidth: int, value: int | None = None) -> bytes:
        """A bitwidth-bit value in canonical form; when wrong, too wide, padded or empty."""
        width = max(bitwidth, 1)
        value = self.rng.getrandbits(width) if value is None else value
        if self._wrong(0.2):
            return self.rng.choice([b"", bytes(self.rng.getrandbits(8) for _ in range(self.rng.randint(1, 20))),
                                    b"\x00" + value.to_bytes((width + 7) // 8, "big")])
        return value.to_bytes((value.bit_length() + 7) // 8 or 1, "big")

    def _small(self, size: int) -> int:
        """An index into something of `size` cells; when wrong, past its end or negative."""
        if not self._wrong(0.3):
            return self.rng.randrange(max(size, 1))
        return self.rng.choice([size, size + 1, -1, 1 << 40, -(1 << 62)])

    def _params(self, action_id: int) -> list[p4r.Action.Param]:
        action = self.actions.get(action_id)
        params = list(action.params) if action else []
        out = [p4r.Action.Param(param_id=p.id, value=self._bytes(p.bitwidth)) for p in params]
        if self._wrong(0.3):
            if out and self.rng.random() < 0.5:
                out.pop(self.rng.randrange(len(out)))
            else:
                out.append(out[0] if out else p4r.Action.Param(param_id=self.rng.randint(0, 9), value=b"\x01"))
        return out

    def _action(self, action_ids: list[int]) -> p4r.Action:
        action_id = self._id(action_ids)
        return p4r.Action(action_id=action_id, params=self._params(action_id))

    # -- entities ------------------------------------------------------------------------
    def _field_match(self, mf: p4i.MatchField) -> p4r.FieldMatch | None:
        """A canonical match on `mf` (None: a don't-care left out); when wrong, any kind and values."""
        kinds = ["exact", "lpm", "ternary", "range", "optional"]
        declared = p4i.MatchField.MatchType.Name(mf.match_type).lower()
        kind = self.rng.choice(kinds) if self._wrong(0.1) else declared
        fm = p4r.FieldMatch(field_id=self.rng.randint(0, 99) if self._wrong(0.05) else mf.id)
        width = max(mf.bitwidth, 1)
        full = (1 << width) - 1
        if kind == "exact":
            fm.exact.value = self._bytes(width)
        elif kind == "lpm":
            plen = self.rng.randint(1, width)
            mask = full ^ (full >> plen)
            fm.lpm.value = self._bytes(width, self.rng.getrandbits(width) & mask)
            fm.lpm.prefix_len = self.rng.choice([width + 1, -1, 0]) if self._wrong(0.2) else plen
        elif kind == "ternary":
            mask = self.rng.getrandbits(width) or 1
            fm.ternary.value = self._bytes(width, self.rng.getrandbits(width) & mask)
            fm.ternary.mask = self._bytes(width, mask)
        elif kind == "range":
            low, high = sorted(self.rng.getrandbits(width) for _ in range(2))
            if (low, high) == (0, full):
                return None
            fm.range.low, fm.range.high = self._bytes(width, low), self._bytes(width, high)
        elif kind == "optional":
            fm.optional.value = self._bytes(width)
        else:
            return None  # a kind P4Runtime has no field for (unspecified, other)
        return fm

    def table_entry(self) -> p4r.Entity:
        tables = list(self.info.tables)
        table = self.rng.choice(tables) if tables else None
        entry = p4r.TableEntry(table_id=self._id([table.preamble.id] if table else []))
        if table is not None:
            fields = [fm for mf in table.match_fields if (fm := self._field_match(mf)) is not None]
            if fields and self._wrong(0.1):
                fields.append(fields[0]) if self.rng.random() < 0.5 else fields.pop()
            entry.match.extend(fields)
            refs = [r.id for r in table.action_refs]
            if table.implementation_id and not self._wrong(0.2):
                if self.rng.random() < 0.5:
                    entry.action.action_profile_member_id = self.rng.randint(0, 8)
                else:
                    entry.action.action_profile_group_id = self.rng.randint(0, 8)
            else:
                entry.action.action.CopyFrom(self._action(refs))
            entry.is_default_action = self.rng.random() < 0.05
            needs_priority = any(mf.match_type in (p4i.MatchField.TERNARY, p4i.MatchField.RANGE,
                                                   p4i.MatchField.OPTIONAL) for mf in table.match_fields)
            entry.priority = self.rng.randint(1, 100) if needs_priority else 0
        if self._wrong(0.2):
            entry.priority = self.rng.choice([0, 1, -5, (1 << 31) - 1, -(1 << 31)])
        if self.rng.random() < 0.05:
            entry.idle_timeout_ns = self.rng.choice([1, 10**9, -1])
        if self.rng.random() < 0.05:
            entry.counter_data.packet_count = self.rng.randint(-1, 1000)
        if self.rng.random() < 0.05:
            entry.meter_config.cir, entry.meter_config.cburst = self.rng.randint(-1, 10**6), self.rng.randint(-1, 10**4)
            entry.meter_config.pir, entry.meter_config.pburst = self.rng.randint(-1, 10**6), self.rng.randint(-1, 10**4)
        return p4r.Entity(table_entry=entry)

    def profile_member(self) -> p4r.Entity:
        profiles = list(self.info.action_profiles)
        table_actions = [r.id for t in self.info.tables for r in t.action_refs]
        return p4r.Entity(action_profile_member=p4r.ActionProfileMember(
            action_profile_id=self._id([p.preamble.id for p in profiles]), member_id=self.rng.randint(0, 8),
            action=self._action(table_actions)))

    def profile_group(self) -> p4r.Entity:
        profiles = list(self.info.action_profiles)
        group = p4r.ActionProfileGroup(action_profile_id=self._id([p.preamble.id for p in profiles]),
                                       group_id=self.rng.randint(0, 8), max_size=self.rng.choice([0, 1, 4, 1 << 20, -1]))
        for _ in range(self.rng.randint(0, 4)):
            group.members.add(member_id=self.rng.randint(0, 8), weight=self.rng.choice([1, 1, 2, 0, -1]))
        return p4r.Entity(action_profile_group=group)

    def _indexed(self, things: list) -> tuple[int, int]:
        """(id, index) of one of `things` (counters, meters, registers)."""
        thing = self.rng.choice(things) if things else None
        return self._id([thing.preamble.id] if thing else []), self._small(thing.size if thing else 1)

    def counter(self) -> p4r.Entity:
        counter_id, index = self._indexed(list(self.info.counters))
        entry = p4r.CounterEntry(counter_id=counter_id, data=p4r.CounterData(
            byte_count=self.rng.randint(-1, 10**6), packet_count=self.rng.randint(-1, 10**6)))
        if self.rng.random() < 0.9:
            entry.index.index = index
        return p4r.Entity(counter_entry=entry)

    def meter(self) -> p4r.Entity:
        meter_id, index = self._indexed(list(self.info.meters))
        config = p4r.MeterConfig(cir=self.rng.randint(-1, 10**6), cburst=self.rng.randint(-1, 10**4),
                                 pir=self.rng.randint(-1, 10**6), pburst=self.rng.randint(-1, 10**4))
        return p4r.Entity(meter_entry=p4r.MeterEntry(meter_id=meter_id, index=p4r.Index(index=index), config=config))

    def register(self) -> p4r.Entity:
        registers = list(self.info.registers)
        register = self.rng.choice(registers) if registers else None
        register_id = self._id([register.preamble.id] if register else [])
        index = self._small(register.size if register else 1)
        width = register.type_spec.bitstring.bit.bitwidth if register else 32
        data = p4d.P4Data(bitstring=self._bytes(width)) if self.rng.random() < 0.9 else p4d.P4Data(bool=True)
        return p4r.Entity(register_entry=p4r.RegisterEntry(register_id=register_id, index=p4r.Index(index=index),
                                                           data=data))

    def direct(self) -> p4r.Entity:
        table = self.table_entry().table_entry
        if self.rng.random() < 0.5:
            return p4r.Entity(direct_counter_entry=p4r.DirectCounterEntry(
                table_entry=table, data=p4r.CounterData(packet_count=self.rng.randint(-1, 99))))
        return p4r.Entity(direct_meter_entry=p4r.DirectMeterEntry(
            table_entry=table, config=p4r.MeterConfig(cir=self.rng.randint(-1, 99), cburst=1, pir=99, pburst=1)))

    def _replicas(self) -> list[p4r.Replica]:
        replicas = []
        for _ in range(self.rng.randint(0, 5)):
            replica = p4r.Replica(instance=self.rng.choice([1 << 16, 1 << 31]) if self._wrong(0.2) else
                                  self.rng.randint(0, 3))
            if self.rng.random() < 0.8:
                replica.egress_port = self.rng.choice([511, 1 << 20]) if self._wrong(0.2) else self.rng.randint(1, 8)
            else:
                replica.port = self._bytes(9, self.rng.randint(1, 8))
            replicas.append(replica)
        if replicas and self._wrong(0.2):
            replicas.append(replicas[0])
        return replicas

    def replication(self) -> p4r.Entity:
        pre = p4r.PacketReplicationEngineEntry()
        if self.rng.random() < 0.6:
            pre.multicast_group_entry.multicast_group_id = (self.rng.choice([0, 1 << 16, 1 << 31]) if self._wrong(0.2)
                                                            else self.rng.randint(1, 6))
            pre.multicast_group_entry.replicas.extend(self._replicas())
        else:
            pre.clone_session_entry.session_id = (self.rng.choice([0, 1 << 16, 1 << 31]) if self._wrong(0.2)
                                                  else self.rng.randint(1, 6))
            pre.clone_session_entry.replicas.extend(self._replicas())
            pre.clone_session_entry.packet_length_bytes = (self.rng.choice([-1, 1 << 20]) if self._wrong(0.2)
                                                           else self.rng.choice([0, 64]))
        return p4r.Entity(packet_replication_engine_entry=pre)

    def digest(self) -> p4r.Entity:
        digests = list(self.info.digests)
        config = p4r.DigestEntry.Config(max_timeout_ns=self.rng.randint(-1, 10**9),
                                        max_list_size=self.rng.randint(-1, 100), ack_timeout_ns=self.rng.randint(-1, 10**9))
        return p4r.Entity(digest_entry=p4r.DigestEntry(digest_id=self._id([d.preamble.id for d in digests]),
                                                       config=config))

    def value_set(self) -> p4r.Entity:
        sets = list(self.info.value_sets)
        entry = p4r.ValueSetEntry(value_set_id=self._id([v.preamble.id for v in sets]))
        for _ in range(self.rng.randint(0, 3)):
            member = entry.members.add()
            member.match.extend([p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=self._bytes(16)))])
        return p4r.Entity(value_set_entry=entry)

    def _kinds(self) -> list:
        """Entity makers: those of what the program has; in a mutated update, every kind."""
        info = self.info
        has = [(self.table_entry, 6, info.tables), (self.direct, 1, info.tables),
               (self.profile_member, 1, info.action_profiles), (self.profile_group, 1, info.action_profiles),
               (self.counter, 1, info.counters), (self.meter, 1, info.meters), (self.register, 1, info.registers),
               (self.replication, 2, True), (self.digest, 1, info.digests), (self.value_set, 1, info.value_sets)]
        return [make for make, weight, present in has if present or self.mutate for _ in range(weight)]

    def update(self) -> p4r.Update:
        """One update; a third of them have something wrong on purpose, a quarter reuse a recent
        entity (a duplicate insert, a modify or delete of what may exist)."""
        self.mutate = self.rng.random() < 0.35
        if self.recent and self.rng.random() < 0.25:
            entity = self.rng.choice(self.recent)
        else:
            entity = self.rng.choice(self._kinds())()
            self.recent = [*self.recent[-49:], entity]
        kind = entity.WhichOneof("entity")
        if self.mutate:
            update_type = self.rng.choice(UPDATE_TYPES)
        elif kind in ("counter_entry", "register_entry", "meter_entry", "direct_counter_entry", "direct_meter_entry"):
            update_type = p4r.Update.MODIFY  # cells exist; they are only ever modified
        else:
            update_type = self.rng.choices(UPDATE_TYPES[:3], weights=[6, 2, 2])[0]
        return p4r.Update(type=update_type, entity=entity)


def _details(error: grpc.RpcError) -> list[int] | None:
    """The p4.v1.Error codes in an error's google.rpc.Status details, None without a status."""
    for key, value in error.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            codes = []
            for detail in status.details:
                err = p4r.Error()
                if not detail.Unpack(err):
                    return None
                codes.append(err.canonical_code)
            return codes
    return None


def check_answer(client: RawClient, updates: list[p4r.Update], atomicity: int) -> tuple[int, str | None]:
    """(updates accepted, finding or None) of one Write batch."""
    try:
        client.write(updates, atomicity=atomicity)
    except grpc.RpcError as exc:
        code = exc.code()
        if code != grpc.StatusCode.UNKNOWN:
            allowed = code.value[0] in ALLOWED
            return 0, None if allowed else f"Write answered {code.name}: {exc.details()}"
        codes = _details(exc)
        if codes is None or len(codes) != len(updates):
            return 0, f"Write answered UNKNOWN without one p4.v1.Error per update: {exc.details()}"
        bad = [c for c in codes if c not in ALLOWED]
        if bad:
            return 0, f"Write answered per-update codes {bad}: {exc.details()}"
        return codes.count(0), None
    return len(updates), None


def read_all(client: RawClient) -> int:
    """Entities a wildcard read of every table's entries returns (raises on an error)."""
    entities = [p4r.Entity(table_entry=p4r.TableEntry())]
    responses = client.stub.Read(p4r.ReadRequest(device_id=client.device_id, entities=entities))
    return sum(len(r.entities) for r in responses)


def fuzz_program(program: str, updates: int, seed: int) -> Result:
    """Fuzz one program on its own `aggnet switch` process."""
    with tempfile.TemporaryDirectory() as tmp, running_switch(REPO / program, Path(tmp) / "switch.log") as (_, port):
        return fuzz_switch(port, program, updates, seed)


def fuzz_switch(port: int, program: str, updates: int, seed: int, batch_max: int = 5) -> Result:
    """Fuzz the switch whose P4Runtime server listens on 127.0.0.1:port: `updates` in batches of
    1..batch_max, a wildcard read after each batch, a write that must succeed at the end."""
    rng = random.Random(f"{seed}:{program}")
    findings: list[str] = []
    accepted = sent = 0
    client = RawClient(port)
    try:
        client.arbitrate(10)
        info = client.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
            device_id=1, response_type=p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)).config.p4info
        fuzzer = Fuzzer(info, rng)
        batch_number = 0
        while sent < updates:
            batch = [fuzzer.update() for _ in range(min(rng.randint(1, batch_max), updates - sent))]
            atomicity = rng.choice([p4r.WriteRequest.CONTINUE_ON_ERROR, p4r.WriteRequest.ROLLBACK_ON_ERROR,
                                    p4r.WriteRequest.DATAPLANE_ATOMIC])
            ok, finding = check_answer(client, batch, atomicity)
            accepted += ok
            sent += len(batch)
            batch_number += 1
            if finding is not None:
                findings.append(f"{program} seed {seed} batch {batch_number}: {finding}")
            read_all(client)  # raises if the switch stopped answering
        findings += _still_serves(client)
    finally:
        client.close()
    return Result(program, sent, accepted, findings)


def _still_serves(client: RawClient) -> list[str]:
    """After the fuzzing: the device still answers reads and takes a write it must take (a clone session)."""
    session = p4r.CloneSessionEntry(session_id=77, replicas=[p4r.Replica(egress_port=1, instance=1)])
    pre = p4r.PacketReplicationEngineEntry(clone_session_entry=session)
    entity = p4r.Entity(packet_replication_engine_entry=pre)
    kind = p4r.Update.MODIFY if _exists(client, entity) else p4r.Update.INSERT  # the fuzzer may have made it
    client.write([p4r.Update(type=kind, entity=entity)])
    if not _exists(client, entity):
        return ["the switch took a clone session after fuzzing but does not read it back"]
    return []


def _exists(client: RawClient, entity: p4r.Entity) -> bool:
    responses = client.stub.Read(p4r.ReadRequest(device_id=client.device_id, entities=[entity]))
    return any(len(r.entities) for r in responses)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--updates", type=int, default=20_000, help="updates per program")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--programs", default=",".join(PROGRAMS), help="comma-separated P4 programs (repo paths)")
    args = parser.parse_args(argv)
    failed = False
    for program in args.programs.split(","):
        failed |= reported(fuzz_program(program, args.updates, args.seed))
    return 1 if failed else 0


def reported(result) -> bool:
    """Print a fuzz result's line and its first 20 findings; whether it has any."""
    print(result.line, flush=True)
    for finding in result.findings[:20]:
        print("  " + finding)
    return bool(result.findings)


if __name__ == "__main__":
    sys.exit(main())
