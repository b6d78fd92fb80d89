"""The v1model packet flow around a compiled program, as BMv2's simple_switch runs it.

    parser -> verifyChecksum -> ingress -> [packet replication engine] -> egress
           -> computeChecksum -> deparser

`ingress(port, data)` runs the first half and returns `EgressItem`s (one per copy the
replication engine makes: unicast, multicast replicas, I2E clones, resubmits already
re-run). The switch process queues them per egress port (traffic manager) and later
calls `egress(item, enq_qdepth, deq_qdepth)`, which returns the packets that leave
`[(port, bytes)]`; E2E clones and recirculations run inside that call. `process` is
the two back to back with empty queues (STF tests, benchmarks).

Thread-safety: both halves hold `state.lock` (an RLock) for their whole run, and every
State write takes it too, so the control plane never sees or changes half a packet.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

from p4target import state as st
from p4target.backends.python import compile_program
from p4target.constants import DROP_PORT, E2E_CLONE, I2E_CLONE, MAX_LOOPS, NORMAL, RECIRCULATED, REPLICATED, RESUBMITTED
from p4target.errors import JumpLimit, PacketError
from p4target.lowered import model as lowered

TIMESTAMP_MASK = (1 << 48) - 1


@dataclass
class EgressItem:
    """One packet copy between the replication engine and egress."""

    frame: list  # the packet's slots (see p4target.backends.layout)
    egress_port: int
    length: int  # bytes, for queue accounting
    generation: int = 0  # how many resubmit/recirculate/clone hops led here
    packet_id: int = 0  # the event log's id of the packet it came from (--nanolog; set by the switch)


class Pipeline:
    """A program compiled once, its State, and the v1model flow (see module docstring)."""

    engine_name = "python"

    def __init__(self, program: lowered.Program, schema: st.ProgramSchema, seed: int = 0, vectorize: bool = True):
        """`program`: the lowered form (p4target.load makes it and its schema, once); `vectorize`: numpy code for
        unrolled lane runs (off only to compare with plain code)."""
        self.program = program
        self.rng = random.Random(seed)
        self.state = st.State(schema)
        compiled = compile_program(program, self.state, self.rng, vectorize)
        self.source = compiled.source  # the generated Python, for debugging
        self._init = compiled.frame
        self._sm = compiled.sm
        self._hid = compiled.hidden
        self._field_lists = compiled.field_lists
        self._meta = compiled.meta_range
        self._jump_limited: set[str] = set()  # actions whose jump limit dropped a packet (logged the first time)
        # The slots every packet touches, as plain ints: no dict lookups on the per-packet path.
        sm = self._sm
        self._s_ingress_port, self._s_instance_type = sm["ingress_port"], sm["instance_type"]
        self._s_packet_length, self._s_ingress_ts = sm["packet_length"], sm["ingress_global_timestamp"]
        self._s_mcast_grp, self._s_egress_spec = sm["mcast_grp"], sm["egress_spec"]
        self._s_egress_port, self._s_egress_rid = sm["egress_port"], sm["egress_rid"]
        self._s_enq_qdepth, self._s_deq_qdepth = sm["enq_qdepth"], sm["deq_qdepth"]
        self._s_egress_ts = sm["egress_global_timestamp"]
        hid = self._hid
        self._s_payload, self._s_truncate, self._s_recirculate = hid["payload"], hid["truncate"], hid["recirculate"]
        self._s_clone_session, self._s_clone_type, self._s_resubmit = \
            hid["clone_session"], hid["clone_type"], hid["resubmit"]
        self._parse = compiled.fn("parse")
        self._verify = None if "verify" in compiled.empty else compiled.fn("verify")
        self._ingress_ctl = compiled.fn("ingress")
        self._egress_ctl = None if "egress" in compiled.empty else compiled.fn("egress")
        self._compute = None if "compute" in compiled.empty else compiled.fn("compute")
        self._deparse = compiled.fn("deparse")
        self._t0 = time.monotonic_ns()

    def _now_us(self) -> int:
        return ((time.monotonic_ns() - self._t0) // 1000) & TIMESTAMP_MASK

    # ------------------------------------------------------------------ ingress half

    def ingress(self, port: int, data: bytes) -> list[EgressItem]:
        """Parse and run ingress for a packet arriving on `port`; the copies bound for egress."""
        with self.state.lock:
            return self._receive(port, data)

    def _receive(self, port: int, data: bytes) -> list[EgressItem]:
        stats = self.state.port(port)
        stats.rx_packets += 1
        stats.rx_bytes += len(data)
        out: list[EgressItem] = []
        self._run_ingress(port, data, NORMAL, (), 0, out)
        return out

    def _parsed(self, port: int, data: bytes, instance_type: int, carry) -> list:
        """A fresh frame with standard metadata set, preserved fields restored, parsed."""
        F = self._init[:]
        F[self._s_ingress_port] = port
        F[self._s_instance_type] = instance_type
        F[self._s_packet_length] = len(data)
        F[self._s_ingress_ts] = self._now_us()
        for slot, value in carry:
            F[slot] = value
        offset = self._parse(F, data)
        F[self._s_payload] = data[offset:]
        return F

    def _run_ingress(self, port: int, data: bytes, instance_type: int, carry, gen: int,
                     out: list[EgressItem]) -> None:
        try:
            F = self._parsed(port, data, instance_type, carry)
            if self._verify is not None:
                self._verify(F)
            self._ingress_ctl(F)
        except (PacketError, ArithmeticError, IndexError) as exc:
            self._packet_error("ingress", exc)
            return
        if F[self._s_clone_session] is not None and F[self._s_clone_type] == "I2E":
            self._clone_i2e(F, port, data, gen, out)
        F[self._s_clone_session] = None
        if F[self._s_resubmit] is not None:
            if gen < MAX_LOOPS:
                self._run_ingress(port, data, RESUBMITTED, self._carry(F, F[self._s_resubmit]), gen + 1, out)
            return
        group = F[self._s_mcast_grp]
        if group:
            for eport, rid in self.state.multicast_groups.get(group, ()):
                R = F[:]
                R[self._s_egress_port] = R[self._s_egress_spec] = eport
                R[self._s_egress_rid] = rid
                R[self._s_instance_type] = REPLICATED
                out.append(EgressItem(R, eport, len(data), gen))
            return
        eport = F[self._s_egress_spec]
        if eport == DROP_PORT:
            return
        F[self._s_egress_port] = eport
        out.append(EgressItem(F, eport, len(data), gen))

    def _carry(self, F: list, field_list: int | None) -> list[tuple[int, object]]:
        """(slot, value) of the user metadata a field list preserves across packets."""
        if field_list is None or field_list < 0:
            return []
        return [(s, F[s]) for s in self._field_lists.get(field_list, ())]

    def _clone_i2e(self, F: list, port: int, data: bytes, gen: int, out: list[EgressItem]) -> None:
        """I2E clone: the packet as it arrived (re-parsed), to every replica of the session."""
        session = self.state.clone_sessions.get(F[self._hid["clone_session"]])
        if session is None or gen >= MAX_LOOPS:
            return
        sm = self._sm
        try:
            C = self._parsed(port, data, I2E_CLONE, self._carry(F, F[self._hid["clone_fl"]]))
        except (PacketError, ArithmeticError, IndexError) as exc:
            self._packet_error("I2E clone parser", exc)
            return
        C[self._hid["truncate"]] = session.packet_length or None
        for eport, instance in session.replicas:
            R = C[:]
            R[sm["egress_port"]] = R[sm["egress_spec"]] = eport
            R[sm["egress_rid"]] = instance
            out.append(EgressItem(R, eport, len(data), gen + 1))

    # ------------------------------------------------------------------ egress half

    def egress(self, item: EgressItem, enq_qdepth: int = 0, deq_qdepth: int = 0) -> list[tuple[int, bytes]]:
        """Run egress, checksum update and deparser for one copy; the packets that leave."""
        with self.state.lock:
            out: list[tuple[int, bytes]] = []
            self._run_egress(item, enq_qdepth, deq_qdepth, out)
            return out

    def _run_egress(self, item: EgressItem, enq_qdepth: int, deq_qdepth: int, out: list[tuple[int, bytes]]) -> None:
        F = item.frame
        F[self._s_enq_qdepth] = enq_qdepth
        F[self._s_deq_qdepth] = deq_qdepth
        F[self._s_egress_ts] = self._now_us()
        try:
            if self._egress_ctl is not None:
                self._egress_ctl(F)
            if F[self._s_clone_session] is not None and F[self._s_clone_type] == "E2E":
                self._clone_e2e(F, item.generation, out)
            if F[self._s_egress_spec] == DROP_PORT:
                return
            if self._compute is not None:
                self._compute(F)
            data = b"".join(self._deparse(F)) + F[self._s_payload]
        except (PacketError, ArithmeticError, IndexError) as exc:
            self._packet_error("egress", exc)
            return
        if F[self._s_truncate]:
            data = data[:F[self._s_truncate]]
        if F[self._s_recirculate] is not None:
            if item.generation < MAX_LOOPS:
                items: list[EgressItem] = []
                carry = self._carry(F, F[self._s_recirculate])
                self._run_ingress(F[self._s_ingress_port], data, RECIRCULATED, carry, item.generation + 1, items)
                for it in items:
                    self._run_egress(it, 0, 0, out)
            return
        port = F[self._s_egress_port]
        stats = self.state.port(port)
        stats.tx_packets += 1
        stats.tx_bytes += len(data)
        out.append((port, data))

    def _clone_e2e(self, F: list, gen: int, out: list[tuple[int, bytes]]) -> None:
        """E2E clone: the egress-processed packet with metadata reset, through egress again."""
        hid, sm = self._hid, self._sm
        session = self.state.clone_sessions.get(F[hid["clone_session"]])
        F[hid["clone_session"]] = None
        if session is None or gen >= MAX_LOOPS:
            return
        carry = self._carry(F, F[hid["clone_fl"]])
        m0, m1 = self._meta
        C = F[:]
        C[m0:m1] = self._init[m0:m1]
        for name, slot in sm.items():
            if name not in ("ingress_port", "packet_length", "ingress_global_timestamp"):
                C[slot] = self._init[slot]
        for slot, value in carry:
            C[slot] = value
        C[sm["instance_type"]] = E2E_CLONE
        C[hid["truncate"]] = session.packet_length or None
        C[hid["recirculate"]] = None
        for eport, instance in session.replicas:
            R = C[:]
            R[sm["egress_port"]] = R[sm["egress_spec"]] = eport
            R[sm["egress_rid"]] = instance
            self._run_egress(EgressItem(R, eport, F[sm["packet_length"]], gen + 1), 0, 0, out)

    # ------------------------------------------------------------------ both

    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """The whole pipeline with empty queues: the packets that leave, in order."""
        with self.state.lock:
            out: list[tuple[int, bytes]] = []
            for item in self._receive(port, data):
                self._run_egress(item, 0, 0, out)
            return out

    def _packet_error(self, stage: str, exc: Exception) -> None:
        """A packet the program cannot process is dropped and logged, never fatal; an action's jump limit is logged
        once (a client's looping packets must not flood the log)."""
        if isinstance(exc, JumpLimit):
            if exc.action in self._jump_limited:
                return
            self._jump_limited.add(exc.action)
        self.state.log.append(f"packet dropped in {stage}: {type(exc).__name__}: {exc}")
