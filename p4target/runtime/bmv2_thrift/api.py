"""What the BMv2 Thrift services share: error codes, method registration, entry handles, the
API's view of a State (ProgramView) and ApiBase, the part of BmRuntime every service uses."""
from __future__ import annotations

import contextlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from p4target import state as st
from p4target.runtime.bmv2_thrift.program_json import bmv2_json
from p4target.runtime.bmv2_thrift.wire import DOUBLE, I32, STRUCT

log = logging.getLogger("aggnet.thrift")

PRIORITY_TOP = (1 << 31) - 1

# TableOperationErrorCode
TABLE_FULL, INVALID_HANDLE, COUNTERS_DISABLED, METERS_DISABLED, AGEING_DISABLED = 1, 2, 4, 5, 6
INVALID_TABLE_NAME, INVALID_ACTION_NAME, WRONG_TABLE_TYPE, INVALID_MBR_HANDLE, MBR_STILL_USED = 7, 8, 9, 10, 11
MBR_ALREADY_IN_GRP, MBR_NOT_IN_GRP, INVALID_GRP_HANDLE, GRP_STILL_USED, EMPTY_GRP = 12, 13, 14, 15, 16
DUPLICATE_ENTRY = 17
BAD_MATCH_KEY, INVALID_METER_OPERATION, DEFAULT_ACTION_IS_CONST, INVALID_ACTION_PROFILE_NAME = 18, 19, 20, 23
NO_ACTION_PROFILE_SELECTION, IMMUTABLE_TABLE_ENTRIES, BAD_ACTION_DATA, TABLE_ERROR = 24, 25, 26, 100
# Counter/Register/MeterOperationErrorCode: the name is unknown, the index out of range
INVALID_NAME, INVALID_INDEX = 1, 2
BAD_RATES_LIST, INVALID_INFO_RATE_VALUE, INVALID_BURST_SIZE_VALUE = 3, 4, 5
# McOperationErrorCode
INVALID_MGID, INVALID_MGRP_HANDLE, INVALID_L1_HANDLE, MC_ERROR = 2, 3, 4, 5
SESSION_NOT_FOUND = 1  # MirroringOperationErrorCode
INVALID_RESOURCE_NAME = 1  # IdLookupErrorCode
# BmMatchParamType; a BmMatchParam holds its value in field (type + 2)
PARAM_TYPE = {"exact": 0, "lpm": 1, "ternary": 2, "range": 4}
ACTION_DATA, MBR_HANDLE, GRP_HANDLE = 1, 2, 3  # BmActionEntryType (0: none)
UNKNOWN_METHOD, INTERNAL_ERROR = 1, 6  # TApplicationException types


class ApiError(Exception):
    """The method's declared exception (result field 1, a struct holding the error code)."""

    def __init__(self, code: int, why: str = ""):
        super().__init__(why)
        self.code = code


# method name -> (handler, return type or None for void, per argument: its annotation, see `argument`).
METHODS: dict[str, tuple[Callable[..., Any], int | None, tuple[str, ...]]] = {}

# A handler parameter's annotation -> (the Python type its Thrift field decodes to, a factory of the value the
# handler gets when the field is absent or of another wire type). BMv2's generated code skips a field of the
# wrong type and leaves the argument at its default; so does this API, and no handler sees a value of a type
# it does not take. Thrift sends `string` and `binary` alike: `str` parameters get text, `bytes` the bytes.
_ARGUMENTS: dict[str, tuple[type, Callable[[], Any]]] = {
    "int": (int, int), "bool": (bool, bool), "str": (bytes, str), "str | None": (bytes, lambda: None),
    "bytes": (bytes, bytes), "list": (list, list), "wire.Struct": (dict, dict)}


def argument(value: Any, annotation: str) -> Any:
    """A decoded Thrift field as the handler parameter annotated `annotation` takes it (see _ARGUMENTS)."""
    kind, default = _ARGUMENTS[annotation]
    if type(value) is not kind:  # exactly: a bool is no int here, as it is not on the wire
        return default()
    return value.decode("utf-8", "replace") if isinstance(value, bytes) and annotation.startswith("str") else value


def api_method(rtype: int | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Serve the decorated method under its name; its parameters after self are fields 1, 2, ..."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = list(inspect.signature(fn).parameters.values())[1:]
        annotations = tuple(str(p.annotation) for p in params)
        unknown = [a for a in annotations if a not in _ARGUMENTS]
        assert not unknown, f"{fn.__name__}: no Thrift argument kind for {unknown}"
        METHODS[fn.__name__] = (fn, rtype, annotations)
        return fn
    return register


@contextlib.contextmanager
def error_codes(default: int, **by_error: int) -> Iterator[None]:
    """State errors inside become ApiError: by_error maps a StateError class name to a code."""
    try:
        yield
    except st.StateError as exc:
        raise ApiError(by_error.get(type(exc).__name__, default), str(exc)) from None


def to_bytes(value: int, bitwidth: int) -> bytes:
    return value.to_bytes((bitwidth + 7) // 8, "big")


def to_int(data: Any) -> int:
    if not isinstance(data, bytes):
        raise ApiError(BAD_MATCH_KEY, "a match value is missing")
    return int.from_bytes(data, "big")


class EntryHandles:
    """Entry handles of one table: a number per entry object, given when a client first sees it."""

    def __init__(self) -> None:
        self._entries: dict[int, st.TableEntry] = {}
        self._by_object: dict[int, int] = {}  # id(entry) -> handle; _entries keeps the entry alive
        self._next = 0

    def of(self, entry: st.TableEntry) -> int:
        handle = self._by_object.get(id(entry))
        if handle is None:
            handle = self._by_object[id(entry)] = self._next
            self._entries[handle] = entry
            self._next += 1
        return handle

    def entry(self, table: st.Table, handle: int) -> st.TableEntry:
        entry = self._entries.get(handle)
        if entry is None or not stored(table, entry):
            raise ApiError(INVALID_HANDLE, f"table {table.name}: no entry with handle {handle}")
        return entry

    def forget(self, handle: int) -> None:
        entry = self._entries.pop(handle)
        del self._by_object[id(entry)]

    def forget_deleted(self, table: st.Table) -> None:
        for handle, entry in list(self._entries.items()):
            if not stored(table, entry):
                self.forget(handle)


def stored(table: st.Table, entry: st.TableEntry) -> bool:
    try:
        return table.find(entry.match, entry.priority) is entry
    except st.StateError:
        return False


@dataclass
class PreNode:
    """A PRE L1 node: a replication id and the ports it sends to; in at most one group."""

    rid: int
    ports: list[int]
    group: int | None = None


@dataclass
class ProgramView:
    """What the API keeps beside one State: entry handles, PRE nodes and groups, the JSON."""

    state: st.State
    config: dict[str, Any]
    handles: dict[str, EntryHandles] = field(default_factory=dict)
    nodes: dict[int, PreNode] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)  # mgid -> node handles

    @classmethod
    def of(cls, state: st.State) -> ProgramView:
        return cls(state, bmv2_json(state.schema), {name: EntryHandles() for name in state.tables})


def lowest_free(used: Any) -> int:
    n = 0
    while n in used:
        n += 1
    return n


class ApiBase:
    """The switch the services act on, the lock that serializes calls, and the State's view."""

    def __init__(self, switch: Any, thrift_port: int):
        self.switch = switch
        self.thrift_port = thrift_port
        self._started = time.monotonic()
        self._lock = threading.Lock()  # one call at a time: handles and PRE nodes are shared
        self._program: ProgramView | None = None
        self._no_program = st.State(st.ProgramSchema())  # what calls see before a pipeline is set

    def _prog(self) -> ProgramView:
        """The API's view of the current State (a fresh one after a new pipeline; empty before one)."""
        state = self.switch.state
        if state is None:
            state = self._no_program
        if self._program is None or self._program.state is not state:
            self._program = ProgramView.of(state)
        return self._program

    def _table(self, name: str, indirect: bool | None = None) -> tuple[ProgramView, st.Table]:
        prog = self._prog()
        table = prog.state.tables.get(name)
        if table is None:
            raise ApiError(INVALID_TABLE_NAME, f"no table {name!r}")
        if indirect is not None and indirect != (table.profile is not None):
            raise ApiError(WRONG_TABLE_TYPE, f"table {name} {'has no' if indirect else 'has an'} action profile")
        return prog, table


def meter_config(rates: Any, bad_list: int) -> st.MeterConfig:
    """A MeterConfig of BMv2's [committed, peak] BmMeterRateConfig list (rates in units per microsecond)."""
    if not isinstance(rates, list) or len(rates) != 2 or not all(isinstance(r, dict) for r in rates):
        raise ApiError(bad_list, "meters take two rates: committed and peak")
    (cir, cburst), (pir, pburst) = [(round(r.get(1, 0.0) * 1e6), r.get(2, 0)) for r in rates]
    if min(cir, pir) < 0 or pir < cir:
        raise ApiError(INVALID_INFO_RATE_VALUE, "rates must be >= 0, the peak rate at least the committed")
    if min(cburst, pburst) < 0:
        raise ApiError(INVALID_BURST_SIZE_VALUE, "burst sizes must be >= 0")
    return st.MeterConfig(cir, cburst, pir, pburst)


def meter_rates(config: st.MeterConfig | None) -> tuple[int, list]:
    if config is None:
        return STRUCT, []
    return STRUCT, [{1: (DOUBLE, rate / 1e6), 2: (I32, min(burst, PRIORITY_TOP))}
                    for rate, burst in ((config.cir, config.cburst), (config.pir, config.pburst))]
