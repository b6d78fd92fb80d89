"""The one interface between Python and a native engine: ctypes calls into the engine library.

`Engine` owns one engine instance of a built program library. Everything the control
plane and the switch do to native state goes through its methods; registers and
counters are also exposed as numpy views of the native arrays (no call per access).
Writers must hold the engine lock (`lock()`/`unlock()`, taken by NativeState.lock).
"""
from __future__ import annotations

import array
import ctypes
from ctypes import POINTER, c_char_p, c_double, c_int, c_int64, c_uint8, c_uint32, c_uint64, c_void_p
from pathlib import Path
from typing import Any

import numpy as np

EVENT_BUFFER = 1 << 17
_U64 = POINTER(c_uint64)
_U32 = POINTER(c_uint32)

_SIGNATURES = {
    "eng_new": (c_void_p, [c_uint64]),
    "eng_free": (None, [c_void_p]),
    "eng_lock": (None, [c_void_p]),
    "eng_unlock": (None, [c_void_p]),
    "eng_table_setup": (None, [c_void_p, c_int, c_int, c_int, c_int]),
    "eng_table_add": (c_int, [c_void_p, c_int, _U64, _U64, _U64, POINTER(c_uint8), c_int64, c_int, _U64, c_int]),
    "eng_table_modify": (c_int, [c_void_p, c_int, c_int, _U64, c_int]),
    "eng_table_delete": (None, [c_void_p, c_int, c_int]),
    "eng_table_batch": (c_int, [c_void_p, c_int, c_int, POINTER(c_uint8), POINTER(c_int), _U64, _U64, _U64,
                                POINTER(c_uint8), POINTER(c_int64), POINTER(c_int), POINTER(c_int), _U64, POINTER(c_int)]),
    "eng_table_default": (c_int, [c_void_p, c_int, c_int, _U64, c_int]),
    "eng_entry_counters": (_U64, [c_void_p, c_int]),
    "eng_entry_last_hit": (POINTER(c_double), [c_void_p, c_int]),
    "eng_member_set": (c_int, [c_void_p, c_int, c_int, _U64, c_int]),
    "eng_member_delete": (None, [c_void_p, c_int]),
    "eng_group_set": (c_int, [c_void_p, c_int, POINTER(c_int), c_int]),
    "eng_group_delete": (None, [c_void_p, c_int]),
    "eng_entry_names": (None, [c_void_p, c_int, c_int, c_int]),
    "eng_register": (_U64, [c_void_p, c_int]),
    "eng_counter": (_U64, [c_void_p, c_int, c_int]),
    "eng_meter_set": (None, [c_void_p, c_int, c_uint64, c_int, c_double, c_double, c_double, c_double]),
    "eng_direct_meter_set": (None, [c_void_p, c_int, c_int, c_double, c_double, c_double, c_double]),
    "eng_mc_set": (c_int, [c_void_p, c_int, c_int, _U32, _U32]),
    "eng_clone_set": (c_int, [c_void_p, c_uint64, c_int, _U32, _U32, c_uint32]),
    "eng_process": (c_int, [c_void_p, c_uint32, c_char_p, c_uint32]),
    "eng_output": (POINTER(c_uint8), [c_void_p, c_int, _U32, _U32]),
    "eng_clear_outputs": (None, [c_void_p]),
    "eng_event": (c_int, [c_void_p, POINTER(c_int), POINTER(c_uint8), c_uint32, _U32]),
    "eng_event_fd": (c_int, [c_void_p]),
    "eng_event_wake": (None, [c_void_p]),
    "eng_port_add": (c_int, [c_void_p, c_int, c_int, c_char_p, c_char_p]),
    "eng_port_stats": (None, [c_void_p, c_int, _U64]),
    "eng_set_cpu_port": (None, [c_void_p, c_int]),
    "eng_set_pcap_cap": (None, [c_void_p, c_uint64]),
    "eng_set_event_log": (None, [c_void_p, c_void_p, c_int, c_uint64, c_uint64]),
    "eng_event_log_next_id": (c_uint64, [c_void_p]),
    "eng_run": (c_int, [c_void_p]),
    "eng_ports_release": (None, [c_void_p]),
    "eng_stop": (None, [c_void_p]),
    "eng_inject": (c_int, [c_void_p, c_uint32, c_char_p, c_uint32, c_uint32, c_uint64]),
    "eng_q_rate": (None, [c_void_p, c_int, c_int, c_double]),
    "eng_q_depth": (None, [c_void_p, c_int, c_uint32]),
    "eng_q_delay": (None, [c_void_p, c_int, c_double]),
    "eng_q_ingress_delay": (None, [c_void_p, c_int, c_double]),
    "eng_q_loss": (None, [c_void_p, c_int, c_double, _U32, c_int]),
    "eng_q_stats": (None, [c_void_p, c_int, _U64]),
    "eng_dropped_no_port": (c_uint64, [c_void_p]),
    "eng_pipeline_errors": (c_uint64, [c_void_p]),
}


def _u64s(values: tuple | list) -> ctypes.Array:
    return (c_uint64 * max(1, len(values)))(*values)


def _array(ctype, typecode: str, values: list | tuple) -> ctypes.Array:
    """A list as a C array: through array.array, a tenth of the time ctypes takes to convert each value."""
    packed = array.array(typecode, values or (0,))
    return (ctype * len(packed)).from_buffer(packed)


class TableBatch:
    """A run of writes to one table, as eng_table_batch takes them (engine/api.h): ADD (key words, priority, action,
    argument words), MODIFY and DELETE of an entry's handle, or of -(j + 1) for the one the j-th op adds."""

    ADD, MODIFY, DELETE = 0, 1, 2

    def __init__(self) -> None:
        self.ops: list[tuple[int, int, int, int]] = []  # (op, handle, action, number of argument words)
        self.keys: list[tuple[int, int, int, int]] = []  # the adds' key words: (kind, value, mask, high)
        self.priorities: list[int] = []  # the adds'
        self.args: list[int] = []

    def add(self, keys: list[tuple[int, int, int, int]], priority: int, action: int, args: tuple[int, ...]) -> None:
        """An entry (keys as Engine.table_add takes them); later ops name it -(its op's index + 1)."""
        self.keys.extend(keys)
        self.priorities.append(priority)
        self.ops.append((self.ADD, -1, action, len(args)))
        self.args.extend(args)

    def modify(self, handle: int, action: int, args: tuple[int, ...]) -> None:
        self.ops.append((self.MODIFY, handle, action, len(args)))
        self.args.extend(args)

    def delete(self, handle: int) -> None:
        self.ops.append((self.DELETE, handle, 0, 0))


def _u32s(values) -> ctypes.Array:
    values = list(values)
    return (c_uint32 * max(1, len(values)))(*values)


def _meter_args(config) -> tuple:
    """(on, cir, cburst, pir, pburst) of a state.MeterConfig or None."""
    if config is None:
        return 0, 0.0, 0.0, 0.0, 0.0
    return 1, float(config.cir), float(config.cburst), float(config.pir), float(config.pburst)


def seed_key(seed: int) -> list[int]:
    """Python's random.seed(int) key: abs(seed) as 32-bit words, least significant first."""
    n = abs(seed)
    key = []
    while True:
        key.append(n & 0xFFFFFFFF)
        n >>= 32
        if not n:
            return key


class Trace:
    """The calls that change an engine's state, and its packets with their outputs, as text lines a C program can
    replay (the sanitizer and fuzz driver, p4target/native/fuzz/driver.c): `name arg...`, an array as its length
    then its values, bytes as their length then hex. Register cells written outside the engine (numpy views) are
    `reg RID INDEX VALUE` lines before the next packet, for the arrays given to `watch`: the cells that differ from
    what the last packet left (a cell written back to its value before that packet is a write too)."""

    RECORDED = ("eng_table_setup", "eng_table_add", "eng_table_modify", "eng_table_delete", "eng_table_batch",
                "eng_table_default",
                "eng_member_set", "eng_member_delete", "eng_group_set", "eng_group_delete", "eng_entry_names",
                "eng_meter_set", "eng_direct_meter_set", "eng_mc_set", "eng_clone_set", "eng_set_cpu_port",
                "eng_process")

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._registers: list[tuple[int, np.ndarray, np.ndarray]] = []

    def watch(self, rid: int, values: np.ndarray) -> None:
        self._registers.append((rid, values, values.copy()))

    def call(self, fn, name: str, args: tuple):
        if name == "eng_process":
            self._register_writes()
        result = fn(*args)
        if name == "eng_process":  # what the packet wrote the replay writes too: later lines are the control plane's
            for _, values, seen in self._registers:
                seen[:] = values
        if name in self.RECORDED:
            self.lines.append(" ".join([name.removeprefix("eng_"), *map(_token, args[1:])]))
        elif name == "eng_output":  # args: engine, index, byref(port), byref(length)
            port, length = args[2]._obj.value, args[3]._obj.value
            self.lines.append(f"out {port} {_token(ctypes.string_at(result, length))}")
        return result

    def _register_writes(self) -> None:
        for rid, values, seen in self._registers:
            for i in np.flatnonzero(values != seen):
                self.lines.append(f"reg {rid} {i} {int(values[i])}")
            seen[:] = values

    def text(self) -> str:
        self._register_writes()
        return "\n".join(self.lines) + "\n"


def _token(arg) -> str:
    if isinstance(arg, ctypes.Array):
        return " ".join([str(len(arg)), *(str(v) for v in arg)])
    if isinstance(arg, bytes):
        return f"{len(arg)} {arg.hex() or '-'}"
    return repr(float(arg)) if isinstance(arg, float) else str(int(arg))


class _Traced:
    """A loaded library whose calls also go to a Trace."""

    def __init__(self, lib: ctypes.CDLL, trace: Trace):
        self._lib, self._trace = lib, trace

    def __getattr__(self, name: str):
        fn = getattr(self._lib, name)
        return lambda *args: self._trace.call(fn, name, args)


class Engine:
    """One native engine instance (see module docstring); `trace` records what it is told (see Trace)."""

    def __init__(self, library: Path, seed: int = 0, trace: Trace | None = None):
        lib = ctypes.CDLL(str(library))
        for name, (restype, argtypes) in _SIGNATURES.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        self.lib = lib if trace is None else _Traced(lib, trace)
        self.ptr = self.lib.eng_new(seed & (2 ** 64 - 1))
        if not self.ptr:
            raise MemoryError("cannot create the native engine")
        self._event = (c_uint8 * EVENT_BUFFER)()

    def close(self) -> None:
        if self.ptr:
            self.lib.eng_free(self.ptr)
            self.ptr = None

    # -- lock
    def lock(self) -> None:
        self.lib.eng_lock(self.ptr)

    def unlock(self) -> None:
        self.lib.eng_unlock(self.ptr)

    # -- tables
    def table_setup(self, tid: int, lpm: int, lpm_width: int, prio_mode: bool) -> None:
        self.lib.eng_table_setup(self.ptr, tid, lpm, lpm_width, int(prio_mode))

    def table_add(self, tid: int, keys: list[tuple[int, int, int, int]], priority: int, action: int,
                  args: tuple[int, ...]) -> int:
        """keys: (kind 0 wildcard / 1 value&mask / 2 range / 3 lower word of a wider range, value or low, mask, high) per key word."""
        kinds, values, masks, highs = zip(*keys) if keys else ((0,), (0,), (0,), (0,))
        handle = self.lib.eng_table_add(self.ptr, tid, _u64s(values), _u64s(masks), _u64s(highs),
                                        (c_uint8 * len(kinds))(*kinds), priority, action, _u64s(args), len(args))
        if handle < 0:
            raise MemoryError("native engine: out of memory adding a table entry")
        return handle

    def table_modify(self, handle: int, action: int, args: tuple[int, ...]) -> None:
        if self.lib.eng_table_modify(self.ptr, handle, action, _u64s(args), len(args)):
            raise MemoryError("native engine: out of memory modifying a table entry")

    def table_delete(self, tid: int, handle: int) -> None:
        self.lib.eng_table_delete(self.ptr, tid, handle)

    def table_batch(self, tid: int, batch: TableBatch) -> list[int]:
        """A run of writes to table `tid` in one call (all or nothing: MemoryError and no change without memory);
        the handle each add made (-1 for the other ops)."""
        n = len(batch.ops)
        added = (c_int * max(1, n))()
        ops, handles, actions, nargs = zip(*batch.ops) if n else ((), (), (), ())
        kinds, values, masks, highs = zip(*batch.keys) if batch.keys else ((), (), (), ())
        if self.lib.eng_table_batch(self.ptr, tid, n, _array(c_uint8, "B", ops), _array(c_int, "i", handles),
                                    _array(c_uint64, "Q", values), _array(c_uint64, "Q", masks),
                                    _array(c_uint64, "Q", highs), _array(c_uint8, "B", kinds),
                                    _array(c_int64, "q", batch.priorities), _array(c_int, "i", actions),
                                    _array(c_int, "i", nargs), _array(c_uint64, "Q", batch.args), added):
            raise MemoryError("native engine: out of memory writing a batch of table entries")
        return list(added[:n])

    def table_default(self, tid: int, action: int, args: tuple[int, ...]) -> None:
        if self.lib.eng_table_default(self.ptr, tid, action, _u64s(args), len(args)):
            raise MemoryError("native engine: out of memory setting a default action")

    def entry_counters(self, handle: int) -> Any:
        """The (packets, bytes) direct-counter cells of an entry: a live pointer, [0] and [1]."""
        return self.lib.eng_entry_counters(self.ptr, handle)

    def entry_last_hit(self, handle: int) -> Any:
        """The time.monotonic() of an entry's last hit: a live pointer, [0]."""
        return self.lib.eng_entry_last_hit(self.ptr, handle)

    # -- action profiles and selectors: members and groups by handles the caller chooses (see NativeState)
    def member_set(self, handle: int, action: int, args: tuple[int, ...]) -> None:
        if self.lib.eng_member_set(self.ptr, handle, action, _u64s(args), len(args)):
            raise MemoryError("native engine: out of memory setting an action profile member")

    def member_delete(self, handle: int) -> None:
        self.lib.eng_member_delete(self.ptr, handle)

    def group_set(self, handle: int, members: list[int]) -> None:
        """Group `handle` picks among these member handles (a member once per unit of its weight)."""
        if self.lib.eng_group_set(self.ptr, handle, (c_int * max(1, len(members)))(*members), len(members)):
            raise MemoryError("native engine: out of memory setting an action selector group")

    def group_delete(self, handle: int) -> None:
        self.lib.eng_group_delete(self.ptr, handle)

    def entry_names(self, handle: int, member: int, group: int) -> None:
        """Entry `handle` (of a table with an action profile) runs member `member` or group `group` (-1: neither)."""
        self.lib.eng_entry_names(self.ptr, handle, member, group)

    # -- registers and counters, as numpy views of native memory
    @staticmethod
    def _view(cells: ctypes._Pointer, size: int) -> np.ndarray:
        return np.ctypeslib.as_array(cells, shape=(max(size, 1),))[:size]

    def register(self, rid: int, size: int) -> np.ndarray:
        return self._view(self.lib.eng_register(self.ptr, rid), size)

    def counter(self, cid: int, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(packets, bytes) cells of counter `cid`."""
        return self._view(self.lib.eng_counter(self.ptr, cid, 0), size), self._view(self.lib.eng_counter(self.ptr, cid, 1), size)

    # -- meters: config None = unconfigured (always green); buckets start full
    def meter_set(self, mid: int, index: int, config) -> None:
        self.lib.eng_meter_set(self.ptr, mid, index, *_meter_args(config))

    def direct_meter_set(self, handle: int, config) -> None:
        self.lib.eng_direct_meter_set(self.ptr, handle, *_meter_args(config))

    # -- packet replication engine
    def mc_set(self, group: int, replicas: list[tuple[int, int]] | None) -> None:
        """Set multicast group `group` to (port, rid) replicas; None deletes it."""
        reps = replicas or []
        if self.lib.eng_mc_set(self.ptr, group, -1 if replicas is None else len(reps),
                               _u32s(p for p, _ in reps), _u32s(r for _, r in reps)):
            raise MemoryError("native engine: out of memory setting a multicast group")

    def clone_set(self, session: int, replicas: list[tuple[int, int]] | None, packet_length: int = 0) -> None:
        reps = replicas or []
        if self.lib.eng_clone_set(self.ptr, session, -1 if replicas is None else len(reps),
                                  _u32s(p for p, _ in reps), _u32s(r for _, r in reps), packet_length):
            raise MemoryError("native engine: out of memory setting a clone session")

    # -- packets
    def process(self, port: int, data: bytes) -> list[tuple[int, bytes]]:
        """The whole pipeline for one packet with empty queues (caller holds the lock)."""
        n = self.lib.eng_process(self.ptr, port, data, len(data))
        out = []
        p, ln = c_uint32(), c_uint32()
        for i in range(n):
            ptr = self.lib.eng_output(self.ptr, i, ctypes.byref(p), ctypes.byref(ln))
            out.append((p.value, ctypes.string_at(ptr, ln.value)))
        self.lib.eng_clear_outputs(self.ptr)
        return out

    def events(self) -> list[tuple[int, int, bytes]]:
        """Drain (kind, argument, bytes) events: PacketIns, log lines, digests."""
        out: list[tuple[int, int, bytes]] = []
        arg, ln = c_int(), c_uint32()
        while True:
            kind = self.lib.eng_event(self.ptr, ctypes.byref(arg), self._event, EVENT_BUFFER, ctypes.byref(ln))
            if not kind:
                return out
            out.append((kind, arg.value, bytes(self._event[:ln.value])))

    def event_fd(self) -> int:
        return self.lib.eng_event_fd(self.ptr)

    def event_wake(self) -> None:
        self.lib.eng_event_wake(self.ptr)

    # -- the switch
    def port_add(self, number: int, fd: int, pcap_in: str | None, pcap_out: str | None) -> None:
        if self.lib.eng_port_add(self.ptr, number, fd, (pcap_in or "").encode(), (pcap_out or "").encode()):
            raise ValueError(f"native engine: cannot add port {number}")

    def port_stats(self, number: int) -> dict[str, int]:
        out = _u64s([0] * 6)
        self.lib.eng_port_stats(self.ptr, number, out)
        names = ("rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "tx_errors", "rx_errors")
        return dict(zip(names, out))

    def set_cpu_port(self, port: int) -> None:
        self.lib.eng_set_cpu_port(self.ptr, port)

    def set_pcap_cap(self, nbytes: int) -> None:
        """Stop capturing into a pcap file once it holds `nbytes` (0: no cap)."""
        self.lib.eng_set_pcap_cap(self.ptr, nbytes)

    def set_event_log(self, send: int, sock: int, device_id: int, first_id: int) -> None:
        """Publish BMv2's packet-in/packet-out events with `send` (the address of libnanomsg's nn_send) on the
        bound PUB socket `sock`, numbering packets from `first_id` (p4target.nanolog)."""
        self.lib.eng_set_event_log(self.ptr, send, sock, device_id, first_id)

    def event_log_next_id(self) -> int:
        """The id the next packet would get (the Python loop continues from it)."""
        return self.lib.eng_event_log_next_id(self.ptr)

    def run(self) -> None:
        """Move packets until stop() (blocks; ctypes releases the GIL meanwhile)."""
        if self.lib.eng_run(self.ptr):
            raise MemoryError("native engine: out of memory starting the packet loop")

    def stop(self) -> None:
        self.lib.eng_stop(self.ptr)

    def ports_release(self) -> None:
        """Give the ports' sockets back (their receive rings closed) once run() has returned, for the
        Python loop or another engine."""
        self.lib.eng_ports_release(self.ptr)

    def inject(self, port: int, data: bytes, max_frames: int, max_bytes: int) -> bool:
        """Queue a frame for ingress on `port` unless the queue would pass `max_frames` or `max_bytes` (False:
        it was dropped)."""
        result = self.lib.eng_inject(self.ptr, port, data, len(data), max_frames, max_bytes)
        if result < 0:
            raise MemoryError("native engine: out of memory queueing a PacketOut")
        return result == 0

    def queue_rate(self, port: int, rate: float | None, bits: bool) -> None:
        self.lib.eng_q_rate(self.ptr, port, int(bits), float(rate or 0))

    def queue_depth(self, port: int, depth: int) -> None:
        self.lib.eng_q_depth(self.ptr, port, depth)

    def queue_delay(self, port: int, seconds: float) -> None:
        self.lib.eng_q_delay(self.ptr, port, seconds)

    def ingress_delay(self, port: int, seconds: float) -> None:
        """Hold frames received on `port` this long before ingress."""
        self.lib.eng_q_ingress_delay(self.ptr, port, seconds)

    def queue_loss(self, port: int, probability: float, seed: int | None) -> None:
        key = seed_key(seed) if seed is not None else []
        self.lib.eng_q_loss(self.ptr, port, probability, _u32s(key), len(key))

    def queue_stats(self, port: int) -> dict[str, int]:
        out = _u64s([0] * 5)
        self.lib.eng_q_stats(self.ptr, port, out)
        return dict(zip(("enqueued", "dequeued", "tail_drops", "loss_drops", "qdepth"), out))

    def counts(self) -> tuple[int, int]:
        """(packets dropped for want of a port, packets dropped by pipeline errors)."""
        return self.lib.eng_dropped_no_port(self.ptr), self.lib.eng_pipeline_errors(self.ptr)
