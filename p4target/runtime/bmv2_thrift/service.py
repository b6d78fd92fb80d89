"""BMv2's runtime API (Thrift services `standard`, `simple_pre_lag`, `simple_switch`) on our switch.

`simple_switch_CLI` and p4-utils drive BMv2 through these calls; here they drive the switch's
State (tables, action profiles, counters, registers, meters, multicast, clone sessions, all by
control-plane name) and its traffic manager. The method names, argument field ids, structs and
error codes are those of BMv2's IDL (thrift_src/standard.thrift, simple_pre_lag.thrift,
targets/simple_switch/thrift/simple_switch.thrift); each handler below is named after its
method and takes the method's arguments in field-id order. Where BMv2 and the State differ:
- entry handles: BMv2 numbers entries per table; we hand out a number the first time a client
  sees an entry (added here, or listed, also when P4Runtime wrote it);
- priority: the CLI's lower number wins, the State's higher: state priority = PRIORITY_TOP - cli;
- member and group handles are the State's member and group ids;
- the PRE: `mc_node_create` nodes live here; a group's replicas (each node's ports with its rid)
  are written to the State's multicast group at every change. LAGs are refused;
- one queue per port: the per-priority queue calls set that queue;
- a table with an action profile has no default entry (as in the State).
What a client cannot do here (learning, config swap, parse value sets, custom CRCs, port
management) gets the method's declared error. A State error becomes the method's exception with
the closest code, and its text goes to the switch log, since the CLI prints only the code.
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from p4target import state as st
from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.program_json import bmv2_json, key_match_type
from p4target.runtime.bmv2_thrift.wire import BOOL, DOUBLE, I32, I64, LIST, MAP, STRING, STRUCT

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
_PARAM_TYPE = {"exact": 0, "lpm": 1, "ternary": 2, "range": 4}
ACTION_DATA, MBR_HANDLE, GRP_HANDLE = 1, 2, 3  # BmActionEntryType (0: none)
UNKNOWN_METHOD, INTERNAL_ERROR = 1, 6  # TApplicationException types


class ApiError(Exception):
    """The method's declared exception (result field 1, a struct holding the error code)."""

    def __init__(self, code: int, why: str = ""):
        super().__init__(why)
        self.code = code


# method name -> (handler, return type or None for void, number of arguments)
_METHODS: dict[str, tuple[Callable[..., Any], int | None, int]] = {}


def _api(rtype: int | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Serve the decorated method under its name; its parameters after self are fields 1, 2, ..."""
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        _METHODS[fn.__name__] = (fn, rtype, len(inspect.signature(fn).parameters) - 1)
        return fn
    return register


@contextlib.contextmanager
def _codes(default: int, **by_error: int) -> Iterator[None]:
    """State errors inside become ApiError: by_error maps a StateError class name to a code."""
    try:
        yield
    except st.StateError as exc:
        raise ApiError(by_error.get(type(exc).__name__, default), str(exc)) from None


def _bytes(value: int, bitwidth: int) -> bytes:
    return value.to_bytes((bitwidth + 7) // 8, "big")


def _int(data: Any) -> int:
    if not isinstance(data, bytes):
        raise ApiError(BAD_MATCH_KEY, "a match value is missing")
    return int.from_bytes(data, "big")


class _Handles:
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
        if entry is None or not _stored(table, entry):
            raise ApiError(INVALID_HANDLE, f"table {table.name}: no entry with handle {handle}")
        return entry

    def forget(self, handle: int) -> None:
        entry = self._entries.pop(handle)
        del self._by_object[id(entry)]

    def forget_deleted(self, table: st.Table) -> None:
        for handle, entry in list(self._entries.items()):
            if not _stored(table, entry):
                self.forget(handle)


def _stored(table: st.Table, entry: st.TableEntry) -> bool:
    try:
        return table.find(entry.match, entry.priority) is entry
    except st.StateError:
        return False


@dataclass
class _Node:
    """A PRE L1 node: a replication id and the ports it sends to; in at most one group."""

    rid: int
    ports: list[int]
    group: int | None = None


@dataclass
class _Program:
    """What the API keeps beside one State: entry handles, PRE nodes and groups, the JSON."""

    state: st.State
    config: dict[str, Any]
    handles: dict[str, _Handles] = field(default_factory=dict)
    nodes: dict[int, _Node] = field(default_factory=dict)
    groups: dict[int, list[int]] = field(default_factory=dict)  # mgid -> node handles

    @classmethod
    def of(cls, state: st.State) -> _Program:
        return cls(state, bmv2_json(state.schema), {name: _Handles() for name in state.tables})


def _lowest_free(used: Any) -> int:
    n = 0
    while n in used:
        n += 1
    return n


class BmRuntime:
    """The API on one switch (`tm`, `lock`, `state`, `ports`, `device_id`, `port_numbers()`)."""

    FIRST_BYTE = wire.FIRST_BYTE  # how a listener shared with another protocol tells Thrift clients apart

    def __init__(self, switch: Any, thrift_port: int):
        self.switch = switch
        self.thrift_port = thrift_port
        self._started = time.monotonic()
        self._lock = threading.Lock()  # one call at a time: handles and PRE nodes are shared
        self._program: _Program | None = None
        self._no_program = st.State(st.ProgramSchema())  # what calls see before a pipeline is set

    # -- serving -------------------------------------------------------------------------
    def serve(self, read: Callable[[int], bytes], write: Callable[[bytes], Any]) -> None:
        """Answer the calls of one connection until it closes (or sends what is not Thrift)."""
        reader = wire.Reader(read)
        try:
            while (msg := reader.message()) is not None:
                name, mtype, seqid, args = msg
                if mtype not in (wire.CALL, wire.ONEWAY):
                    raise wire.WireError(f"message type {mtype} from a client")
                method = name.rpartition(":")[2]
                reply_type, body = self.call(method, args)
                if mtype == wire.CALL:
                    write(wire.message(method, reply_type, seqid, body))
        except (wire.WireError, OSError) as exc:
            log.info("thrift connection dropped: %s", exc)

    def call(self, method: str, args: wire.Struct) -> tuple[int, wire.Struct]:
        """Run one method: (REPLY, result struct) or (EXCEPTION, application exception)."""
        found = _METHODS.get(method)
        if found is None:
            return wire.EXCEPTION, wire.app_exception(f"aggnet switch: no method {method!r}", UNKNOWN_METHOD)
        fn, rtype, n_args = found
        values = [args.get(i + 1) for i in range(n_args)]
        values = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values]
        try:
            with self._lock:
                result = fn(self, *values)
        except ApiError as exc:
            if str(exc):
                log.info("thrift %s: %s", method, exc)
            return wire.REPLY, {1: (STRUCT, {1: (I32, exc.code)})}
        except Exception as exc:  # a client's malformed call must not take the switch down
            log.warning("thrift %s failed: %r", method, exc)
            return wire.EXCEPTION, wire.app_exception(f"{method}: {exc!r}", INTERNAL_ERROR)
        return wire.REPLY, ({} if rtype is None else {0: (rtype, result)})

    # -- helpers -------------------------------------------------------------------------
    def _prog(self) -> _Program:
        """The API's view of the current State (a fresh one after a new pipeline; empty before one)."""
        state = self.switch.state
        if state is None:
            state = self._no_program
        if self._program is None or self._program.state is not state:
            self._program = _Program.of(state)
        return self._program

    def _table(self, name: str, indirect: bool | None = None) -> tuple[_Program, st.Table]:
        prog = self._prog()
        table = prog.state.tables.get(name)
        if table is None:
            raise ApiError(INVALID_TABLE_NAME, f"no table {name!r}")
        if indirect is not None and indirect != (table.profile is not None):
            raise ApiError(WRONG_TABLE_TYPE, f"table {name} {'has no' if indirect else 'has an'} action profile")
        return prog, table

    @staticmethod
    def _match(table: st.Table, params: list[wire.Struct], options: wire.Struct | None) -> tuple[dict, int]:
        """(match, state priority) of a BmMatchParams list and BmAddEntryOptions."""
        keys = table.schema.keys
        if not isinstance(params, list) or len(params) != len(keys):
            raise ApiError(BAD_MATCH_KEY, f"table {table.name} has {len(keys)} key fields")
        match: dict[str, st.Match] = {}
        for key, param in zip(keys, params):
            kind, ptype = key_match_type(key), _PARAM_TYPE[key_match_type(key)]
            body = param.get(ptype + 2) if isinstance(param, dict) else None
            if not isinstance(body, dict) or param.get(1) != ptype:
                raise ApiError(BAD_MATCH_KEY, f"key {key.name} is {kind}")
            full = (1 << key.bitwidth) - 1
            value = _int(body.get(1))
            if key.match_kind == "lpm":
                plen = body.get(2)
                if not isinstance(plen, int) or not 0 <= plen <= key.bitwidth:
                    raise ApiError(BAD_MATCH_KEY, f"key {key.name}: bad prefix length {plen}")
                other = full ^ (full >> plen)  # the prefix's mask: BMv2 ignores the bits after it
            else:
                other = _int(body.get(2)) if kind != "exact" else 0
            if value > full or other > full:
                raise ApiError(BAD_MATCH_KEY, f"key {key.name}: value wider than {key.bitwidth} bits")
            if key.match_kind == "exact":
                match[key.name] = st.Exact(value)
            elif key.match_kind == "lpm":
                match[key.name] = st.Lpm(value & other, body[2])
            elif key.match_kind == "range":
                if value > other:
                    raise ApiError(BAD_MATCH_KEY, f"key {key.name}: range start {value} > end {other}")
                match[key.name] = st.Range(value, other)
            elif key.match_kind == "ternary":
                match[key.name] = st.Ternary(value & other, other)
            elif other == full:  # optional: exact ...
                match[key.name] = st.Optional(value)
            elif other != 0:  # ... or wildcard
                raise ApiError(BAD_MATCH_KEY, f"optional key {key.name}: mask must be all ones or zero")
        if not table.needs_priority:
            return match, 0
        priority = (options or {}).get(1, 0)
        if not isinstance(priority, int) or not 0 <= priority < PRIORITY_TOP:
            raise ApiError(BAD_MATCH_KEY, f"priority {priority} out of range")
        return match, PRIORITY_TOP - priority

    @staticmethod
    def _params(state: st.State, allowed: tuple[str, ...], action: str, data: list[bytes]) -> dict[str, int]:
        if action not in allowed:
            raise ApiError(INVALID_ACTION_NAME, f"no action {action!r} here")
        params = state.schema.actions[action].params
        if not isinstance(data, list) or len(data) != len(params):
            raise ApiError(BAD_ACTION_DATA, f"action {action} takes {len(params)} parameters")
        out = {}
        for (name, width), raw in zip(params, data):
            value = int.from_bytes(raw, "big") if isinstance(raw, bytes) else -1
            if not 0 <= value < 1 << width:
                raise ApiError(BAD_ACTION_DATA, f"action {action} parameter {name}: not a {width}-bit value")
            out[name] = value
        return out

    @staticmethod
    def _data(state: st.State, action: str, params: dict[str, int]) -> tuple[int, tuple[int, list[bytes]]]:
        widths = state.schema.actions[action].params
        return LIST, (STRING, [_bytes(params[n], w) for n, w in widths])

    def _action_entry(self, state: st.State, entry: st.TableEntry | st.DefaultAction | None) -> wire.Struct:
        if entry is None:
            return {1: (I32, 0)}
        if isinstance(entry, st.TableEntry) and entry.member_id is not None:
            return {1: (I32, MBR_HANDLE), 4: (I32, entry.member_id)}
        if isinstance(entry, st.TableEntry) and entry.group_id is not None:
            return {1: (I32, GRP_HANDLE), 5: (I32, entry.group_id)}
        return {1: (I32, ACTION_DATA), 2: (STRING, entry.action), 3: self._data(state, entry.action, entry.params)}

    def _entry(self, prog: _Program, table: st.Table, entry: st.TableEntry) -> wire.Struct:
        """BmMtEntry of a stored entry (wildcards spelled as BMv2 does: mask 0, /0, full range)."""
        params = []
        for key in table.schema.keys:
            spec = entry.match.get(key.name)
            kind, w, full = key_match_type(key), key.bitwidth, (1 << key.bitwidth) - 1
            body: wire.Struct
            if kind == "exact":
                body = {1: (STRING, _bytes(spec.value if isinstance(spec, st.Exact) else 0, w))}
            elif kind == "lpm":
                value, plen = (spec.value, spec.prefix_len) if isinstance(spec, st.Lpm) else (0, 0)
                body = {1: (STRING, _bytes(value, w)), 2: (I32, plen)}
            elif kind == "range":
                low, high = (spec.low, spec.high) if isinstance(spec, st.Range) else (0, full)
                body = {1: (STRING, _bytes(low, w)), 2: (STRING, _bytes(high, w))}
            else:
                value, mask = ((spec.value, spec.mask) if isinstance(spec, st.Ternary) else
                               (spec.value, full) if isinstance(spec, st.Optional) else (0, 0))
                body = {1: (STRING, _bytes(value, w)), 2: (STRING, _bytes(mask, w))}
            ptype = _PARAM_TYPE[kind]
            params.append({1: (I32, ptype), ptype + 2: (STRUCT, body)})
        priority = PRIORITY_TOP - entry.priority if table.needs_priority else -1  # BMv2: -1, none
        life = None
        if entry.idle_timeout_ns:
            since_ms = min(int((time.monotonic() - entry.last_hit) * 1000), PRIORITY_TOP)
            life = {1: (I32, min(entry.idle_timeout_ns // 1_000_000, PRIORITY_TOP)), 2: (I32, since_ms)}
        return {1: (LIST, (STRUCT, params)), 2: (STRUCT, {1: (I32, priority)}),
                3: (I32, prog.handles[table.name].of(entry)), 4: (STRUCT, self._action_entry(prog.state, entry)),
                5: (STRUCT, life)}

    def _add(self, table_name: str, match_key: list, options: wire.Struct | None, indirect: bool,
             action: str = "", params: dict[str, int] | None = None, member_id: int | None = None,
             group_id: int | None = None) -> int:
        prog, table = self._table(table_name, indirect)
        match, priority = self._match(table, match_key, options)
        entry = st.TableEntry(match, action, params or {}, priority, member_id=member_id, group_id=group_id)
        with _codes(TABLE_ERROR, AlreadyExists=DUPLICATE_ENTRY, ResourceExhausted=TABLE_FULL,
                    PermissionDenied=IMMUTABLE_TABLE_ENTRIES, FailedPrecondition=EMPTY_GRP):
            prog.state.insert_entry(table.name, entry)
        return prog.handles[table.name].of(entry)

    def _modify(self, table_name: str, handle: int, indirect: bool, **change: Any) -> None:
        prog, table = self._table(table_name, indirect)
        old = prog.handles[table.name].entry(table, handle)
        new = st.TableEntry(old.match, old.action, old.params, old.priority, member_id=old.member_id,
                            group_id=old.group_id, idle_timeout_ns=old.idle_timeout_ns)
        for name, value in change.items():
            setattr(new, name, value)
        with _codes(TABLE_ERROR, PermissionDenied=IMMUTABLE_TABLE_ENTRIES):
            prog.state.modify_entry(table.name, new)

    def _delete(self, table_name: str, handle: int, indirect: bool) -> None:
        prog, table = self._table(table_name, indirect)
        entry = prog.handles[table.name].entry(table, handle)
        with _codes(TABLE_ERROR, PermissionDenied=IMMUTABLE_TABLE_ENTRIES):
            prog.state.delete_entry(table.name, entry)
        prog.handles[table.name].forget(handle)

    def _set_ttl(self, table_name: str, handle: int, timeout_ms: int, indirect: bool) -> None:
        if not self._table(table_name)[1].schema.support_timeout:
            raise ApiError(AGEING_DISABLED, f"table {table_name} has no support_timeout")
        self._modify(table_name, handle, indirect, idle_timeout_ns=max(timeout_ms, 0) * 1_000_000)

    def _profile(self, name: str) -> tuple[st.State, st.ActionProfile]:
        state = self._prog().state
        profile = state.action_profiles.get(name)
        if profile is None:
            raise ApiError(INVALID_ACTION_PROFILE_NAME, f"no action profile {name!r}")
        return state, profile

    def _group_members(self, name: str, group: int, change: Callable[[dict[int, int]], None]) -> None:
        state, profile = self._profile(name)
        if group not in profile.groups:
            raise ApiError(INVALID_GRP_HANDLE, f"{name}: no group {group}")
        members = dict(profile.groups[group].members)
        change(members)
        with _codes(TABLE_ERROR, NotFound=INVALID_MBR_HANDLE):
            state.profile_group_modify(name, group, members, profile.groups[group].max_size)

    def _direct(self, table_name: str, handle: int, what: str) -> tuple[st.State, st.TableEntry]:
        prog, table = self._table(table_name)
        if getattr(table.schema, what) is None:
            raise ApiError(COUNTERS_DISABLED if what == "direct_counter" else METERS_DISABLED,
                           f"table {table_name} has no {what.replace('_', ' ')}")
        return prog.state, prog.handles[table.name].entry(table, handle)

    # -- standard: tables ------------------------------------------------------------------
    @_api(I64)
    def bm_mt_get_num_entries(self, cxt_id: int, table_name: str) -> int:
        return len(self._table(table_name)[1])

    @_api()
    def bm_mt_clear_entries(self, cxt_id: int, table_name: str, reset_default_entry: bool) -> None:
        prog, table = self._table(table_name)
        with _codes(TABLE_ERROR, PermissionDenied=IMMUTABLE_TABLE_ENTRIES), prog.state.lock:
            for entry in table.entries():
                prog.state.delete_entry(table.name, entry)
            prog.handles[table.name].forget_deleted(table)
            if reset_default_entry and table.profile is None:
                prog.state.reset_default(table.name)

    @_api(I32)
    def bm_mt_add_entry(self, cxt_id: int, table_name: str, match_key: list, action_name: str,
                        action_data: list, options: wire.Struct) -> int:
        prog, table = self._table(table_name, indirect=False)
        params = self._params(prog.state, table.schema.actions, action_name, action_data)
        return self._add(table_name, match_key, options, False, action_name, params)

    @_api()
    def bm_mt_set_default_action(self, cxt_id: int, table_name: str, action_name: str, action_data: list) -> None:
        prog, table = self._table(table_name, indirect=False)
        params = self._params(prog.state, table.schema.actions, action_name, action_data)
        with _codes(TABLE_ERROR, PermissionDenied=DEFAULT_ACTION_IS_CONST):
            prog.state.set_default(table.name, action_name, params)

    @_api()
    def bm_mt_reset_default_entry(self, cxt_id: int, table_name: str) -> None:
        prog, table = self._table(table_name, indirect=False)
        prog.state.reset_default(table.name)

    @_api()
    def bm_mt_delete_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> None:
        self._delete(table_name, entry_handle, indirect=False)

    @_api()
    def bm_mt_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int, action_name: str,
                           action_data: list) -> None:
        prog, table = self._table(table_name, indirect=False)
        params = self._params(prog.state, table.schema.actions, action_name, action_data)
        self._modify(table_name, entry_handle, False, action=action_name, params=params)

    @_api()
    def bm_mt_set_entry_ttl(self, cxt_id: int, table_name: str, entry_handle: int, timeout_ms: int) -> None:
        self._set_ttl(table_name, entry_handle, timeout_ms, indirect=False)

    @_api(LIST)
    def bm_mt_get_entries(self, cxt_id: int, table_name: str) -> tuple[int, list]:
        prog, table = self._table(table_name)
        with prog.state.lock:
            prog.handles[table.name].forget_deleted(table)
            entries = sorted(table.entries(), key=prog.handles[table.name].of)
            return STRUCT, [self._entry(prog, table, e) for e in entries]

    @_api(STRUCT)
    def bm_mt_get_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> wire.Struct:
        prog, table = self._table(table_name)
        return self._entry(prog, table, prog.handles[table.name].entry(table, entry_handle))

    @_api(STRUCT)
    def bm_mt_get_default_entry(self, cxt_id: int, table_name: str) -> wire.Struct:
        prog, table = self._table(table_name)
        return self._action_entry(prog.state, table.default)

    @_api(STRUCT)
    def bm_mt_get_entry_from_key(self, cxt_id: int, table_name: str, match_key: list,
                                 options: wire.Struct) -> wire.Struct:
        prog, table = self._table(table_name)
        match, priority = self._match(table, match_key, options)
        with _codes(BAD_MATCH_KEY):
            return self._entry(prog, table, table.find(match, priority))

    # -- standard: action profiles and indirect tables -------------------------------------
    @_api(I32)
    def bm_mt_act_prof_add_member(self, cxt_id: int, act_prof_name: str, action_name: str,
                                  action_data: list) -> int:
        state, profile = self._profile(act_prof_name)
        params = self._params(state, profile.schema.actions, action_name, action_data)
        member = _lowest_free(profile.members)
        with _codes(TABLE_ERROR, ResourceExhausted=TABLE_FULL):
            state.profile_member_insert(act_prof_name, member, action_name, params)
        return member

    @_api()
    def bm_mt_act_prof_delete_member(self, cxt_id: int, act_prof_name: str, mbr_handle: int) -> None:
        state, _ = self._profile(act_prof_name)
        with _codes(TABLE_ERROR, NotFound=INVALID_MBR_HANDLE, FailedPrecondition=MBR_STILL_USED):
            state.profile_member_delete(act_prof_name, mbr_handle)

    @_api()
    def bm_mt_act_prof_modify_member(self, cxt_id: int, act_prof_name: str, mbr_handle: int, action_name: str,
                                     action_data: list) -> None:
        state, profile = self._profile(act_prof_name)
        params = self._params(state, profile.schema.actions, action_name, action_data)
        with _codes(TABLE_ERROR, NotFound=INVALID_MBR_HANDLE):
            state.profile_member_modify(act_prof_name, mbr_handle, action_name, params)

    @_api(I32)
    def bm_mt_act_prof_create_group(self, cxt_id: int, act_prof_name: str) -> int:
        state, profile = self._profile(act_prof_name)
        if not profile.schema.with_selector:
            raise ApiError(NO_ACTION_PROFILE_SELECTION, f"{act_prof_name} has no selector")
        group = _lowest_free(profile.groups)
        state.profile_group_insert(act_prof_name, group, {})
        return group

    @_api()
    def bm_mt_act_prof_delete_group(self, cxt_id: int, act_prof_name: str, grp_handle: int) -> None:
        state, _ = self._profile(act_prof_name)
        with _codes(TABLE_ERROR, NotFound=INVALID_GRP_HANDLE, FailedPrecondition=GRP_STILL_USED,
                    InvalidArgument=NO_ACTION_PROFILE_SELECTION):
            state.profile_group_delete(act_prof_name, grp_handle)

    @_api()
    def bm_mt_act_prof_add_member_to_group(self, cxt_id: int, act_prof_name: str, mbr_handle: int,
                                           grp_handle: int) -> None:
        def add(members: dict[int, int]) -> None:
            if mbr_handle in members:
                raise ApiError(MBR_ALREADY_IN_GRP)
            members[mbr_handle] = 1
        self._group_members(act_prof_name, grp_handle, add)

    @_api()
    def bm_mt_act_prof_remove_member_from_group(self, cxt_id: int, act_prof_name: str, mbr_handle: int,
                                                grp_handle: int) -> None:
        def remove(members: dict[int, int]) -> None:
            if members.pop(mbr_handle, None) is None:
                raise ApiError(MBR_NOT_IN_GRP)
        self._group_members(act_prof_name, grp_handle, remove)

    def _member(self, state: st.State, member_id: int, member: st.ProfileMember) -> wire.Struct:
        return {1: (I32, member_id), 2: (STRING, member.action), 3: self._data(state, member.action, member.params)}

    @_api(LIST)
    def bm_mt_act_prof_get_members(self, cxt_id: int, act_prof_name: str) -> tuple[int, list]:
        state, profile = self._profile(act_prof_name)
        return STRUCT, [self._member(state, i, m) for i, m in sorted(profile.members.items())]

    @_api(STRUCT)
    def bm_mt_act_prof_get_member(self, cxt_id: int, act_prof_name: str, mbr_handle: int) -> wire.Struct:
        state, profile = self._profile(act_prof_name)
        if mbr_handle not in profile.members:
            raise ApiError(INVALID_MBR_HANDLE)
        return self._member(state, mbr_handle, profile.members[mbr_handle])

    @staticmethod
    def _group(group_id: int, group: st.ProfileGroup) -> wire.Struct:
        return {1: (I32, group_id), 2: (LIST, (I32, list(group.members)))}

    @_api(LIST)
    def bm_mt_act_prof_get_groups(self, cxt_id: int, act_prof_name: str) -> tuple[int, list]:
        _, profile = self._profile(act_prof_name)
        return STRUCT, [self._group(i, g) for i, g in sorted(profile.groups.items())]

    @_api(STRUCT)
    def bm_mt_act_prof_get_group(self, cxt_id: int, act_prof_name: str, grp_handle: int) -> wire.Struct:
        _, profile = self._profile(act_prof_name)
        if grp_handle not in profile.groups:
            raise ApiError(INVALID_GRP_HANDLE)
        return self._group(grp_handle, profile.groups[grp_handle])

    def _check_ref(self, table_name: str, *, member_id: int | None = None, group_id: int | None = None) -> None:
        profile = self._table(table_name, indirect=True)[1].profile
        assert profile is not None
        if member_id is not None and member_id not in profile.members:
            raise ApiError(INVALID_MBR_HANDLE, f"{profile.name}: no member {member_id}")
        if group_id is not None and group_id not in profile.groups:
            raise ApiError(INVALID_GRP_HANDLE, f"{profile.name}: no group {group_id}")

    @_api(I32)
    def bm_mt_indirect_add_entry(self, cxt_id: int, table_name: str, match_key: list, mbr_handle: int,
                                 options: wire.Struct) -> int:
        self._check_ref(table_name, member_id=mbr_handle)
        return self._add(table_name, match_key, options, True, member_id=mbr_handle)

    @_api()
    def bm_mt_indirect_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int, mbr_handle: int) -> None:
        self._check_ref(table_name, member_id=mbr_handle)
        self._modify(table_name, entry_handle, True, member_id=mbr_handle, group_id=None)

    @_api()
    def bm_mt_indirect_delete_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> None:
        self._delete(table_name, entry_handle, indirect=True)

    @_api()
    def bm_mt_indirect_set_entry_ttl(self, cxt_id: int, table_name: str, entry_handle: int, timeout_ms: int) -> None:
        self._set_ttl(table_name, entry_handle, timeout_ms, indirect=True)

    @_api()
    def bm_mt_indirect_reset_default_entry(self, cxt_id: int, table_name: str) -> None:
        self._table(table_name, indirect=True)  # nothing to reset: such a table has no default entry

    @_api(I32)
    def bm_mt_indirect_ws_add_entry(self, cxt_id: int, table_name: str, match_key: list, grp_handle: int,
                                    options: wire.Struct) -> int:
        self._check_ref(table_name, group_id=grp_handle)
        return self._add(table_name, match_key, options, True, group_id=grp_handle)

    @_api()
    def bm_mt_indirect_ws_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int, grp_handle: int) -> None:
        self._check_ref(table_name, group_id=grp_handle)
        self._modify(table_name, entry_handle, True, member_id=None, group_id=grp_handle)

    # -- standard: direct counters and meters ----------------------------------------------
    @_api(STRUCT)
    def bm_mt_read_counter(self, cxt_id: int, table_name: str, entry_handle: int) -> wire.Struct:
        _, entry = self._direct(table_name, entry_handle, "direct_counter")
        return {1: (I64, wire.signed64(entry.bytes)), 2: (I64, wire.signed64(entry.packets))}

    @_api()
    def bm_mt_reset_counters(self, cxt_id: int, table_name: str) -> None:
        prog, table = self._table(table_name)
        if table.schema.direct_counter is None:
            raise ApiError(COUNTERS_DISABLED)
        with prog.state.lock:
            for entry in table.entries():
                entry.packets = entry.bytes = 0

    @_api()
    def bm_mt_write_counter(self, cxt_id: int, table_name: str, entry_handle: int, value: wire.Struct) -> None:
        state, entry = self._direct(table_name, entry_handle, "direct_counter")
        with state.lock:
            entry.bytes, entry.packets = max(value.get(1, 0), 0), max(value.get(2, 0), 0)

    @_api()
    def bm_mt_set_meter_rates(self, cxt_id: int, table_name: str, entry_handle: int, rates: list) -> None:
        state, entry = self._direct(table_name, entry_handle, "direct_meter")
        config = _meter_config(rates, INVALID_METER_OPERATION)
        assert entry.meter is not None, "entries of a table with a direct meter each have a cell"
        with state.lock, _codes(INVALID_METER_OPERATION):
            entry.meter.configure(config, time.monotonic())

    @_api(LIST)
    def bm_mt_get_meter_rates(self, cxt_id: int, table_name: str, entry_handle: int) -> tuple[int, list]:
        _, entry = self._direct(table_name, entry_handle, "direct_meter")
        assert entry.meter is not None
        return _rates(entry.meter.config)

    # -- standard: counters, meters, registers ---------------------------------------------
    @_api(STRUCT)
    def bm_counter_read(self, cxt_id: int, counter_name: str, index: int) -> wire.Struct:
        state = self._prog().state
        with _codes(INVALID_INDEX, InvalidArgument=INVALID_NAME):
            packets, nbytes = state.counter_read(counter_name, index)
        return {1: (I64, wire.signed64(nbytes)), 2: (I64, wire.signed64(packets))}

    @_api()
    def bm_counter_reset_all(self, cxt_id: int, counter_name: str) -> None:
        state = self._prog().state
        with _codes(INVALID_INDEX, InvalidArgument=INVALID_NAME), state.lock:
            state.counter(counter_name).reset()

    @_api()
    def bm_counter_write(self, cxt_id: int, counter_name: str, index: int, value: wire.Struct) -> None:
        state = self._prog().state
        with _codes(INVALID_INDEX, InvalidArgument=INVALID_NAME):
            state.counter(counter_name)  # an unknown name before a bad value
            state.counter_write(counter_name, index, max(value.get(2, 0), 0), max(value.get(1, 0), 0))

    def _meter(self, name: str) -> tuple[st.State, st.MeterArray]:
        state = self._prog().state
        meter = state.meters.get(name)
        if meter is None:
            raise ApiError(INVALID_NAME, f"no meter {name!r}")
        return state, meter

    @_api()
    def bm_meter_array_set_rates(self, cxt_id: int, meter_array_name: str, rates: list) -> None:
        state, meter = self._meter(meter_array_name)
        config = _meter_config(rates, BAD_RATES_LIST)
        for index in range(meter.schema.size):
            state.meter_set(meter_array_name, index, config)

    @_api()
    def bm_meter_set_rates(self, cxt_id: int, meter_array_name: str, index: int, rates: list) -> None:
        state, _ = self._meter(meter_array_name)
        config = _meter_config(rates, BAD_RATES_LIST)
        with _codes(INVALID_INDEX):
            state.meter_set(meter_array_name, index, config)

    @_api(LIST)
    def bm_meter_get_rates(self, cxt_id: int, meter_array_name: str, index: int) -> tuple[int, list]:
        state, _ = self._meter(meter_array_name)
        with _codes(INVALID_INDEX):
            return _rates(state.meter_get(meter_array_name, index))

    def _register(self, name: str) -> tuple[st.State, st.RegisterArray]:
        state = self._prog().state
        register = state.registers.get(name)
        if register is None:
            raise ApiError(INVALID_NAME, f"no register {name!r}")
        return state, register

    @_api(I64)
    def bm_register_read(self, cxt_id: int, register_array_name: str, idx: int) -> int:
        _, register = self._register(register_array_name)
        with _codes(INVALID_INDEX):
            return wire.signed64(register.read(idx))

    @_api(LIST)
    def bm_register_read_all(self, cxt_id: int, register_array_name: str) -> tuple[int, list]:
        _, register = self._register(register_array_name)
        return I64, [wire.signed64(register.read(i)) for i in range(register.schema.size)]

    def _write_registers(self, name: str, indexes: range, value: int) -> None:
        state, register = self._register(name)
        value &= (1 << register.schema.bitwidth) - 1  # BMv2 keeps the low bits of what it is given
        if not indexes or not (0 <= indexes[0] and indexes[-1] < register.schema.size):
            raise ApiError(INVALID_INDEX, f"register {name}: index out of range 0..{register.schema.size - 1}")
        with state.lock:
            for i in indexes:
                register.write(i, value)

    @_api()
    def bm_register_write(self, cxt_id: int, register_array_name: str, index: int, value: int) -> None:
        self._write_registers(register_array_name, range(index, index + 1), value)

    @_api()
    def bm_register_write_range(self, cxt_id: int, register_array_name: str, start_index: int, end_index: int,
                                value: int) -> None:
        self._write_registers(register_array_name, range(start_index, end_index + 1), value)

    @_api()
    def bm_register_reset(self, cxt_id: int, register_array_name: str) -> None:
        state, register = self._register(register_array_name)
        with state.lock:
            register.reset()

    # -- standard: management ------------------------------------------------------------------
    @_api(STRUCT)
    def bm_mgmt_get_info(self) -> wire.Struct:
        return {1: (I64, self.switch.device_id), 2: (I32, self.thrift_port)}

    @_api(LIST)
    def bm_dev_mgr_show_ports(self) -> tuple[int, list]:
        return STRUCT, [{1: (I32, n), 2: (STRING, p.ifname), 3: (BOOL, True), 4: (MAP, (STRING, STRING, {}))}
                        for n, p in sorted(self.switch.ports.items())]

    @_api()
    def bm_reset_state(self) -> None:
        prog = self._prog()
        prog.state.reset()
        self._program = _Program.of(prog.state)

    @_api(STRING)
    def bm_get_config(self) -> str:
        return json.dumps(self._prog().config)

    @_api(STRING)
    def bm_get_config_md5(self) -> bytes:
        return hashlib.md5(self.bm_get_config().encode()).digest()

    @_api(I32)
    def bm_get_id_from_name(self, cxt_id: int, resource_type: int, resource_name: str) -> int:
        config = self._prog().config
        kinds = [config["pipelines"][0]["tables"], config["pipelines"][0]["action_profiles"],
                 config["counter_arrays"], config["meter_arrays"], config["register_arrays"], []]
        if not isinstance(resource_type, int) or not 0 <= resource_type < len(kinds):
            raise ApiError(0, f"resource type {resource_type}")  # INVALID_RESOURCE_TYPE
        for item in kinds[resource_type]:
            if item["name"] == resource_name:
                return item["id"]
        raise ApiError(INVALID_RESOURCE_NAME, f"no resource {resource_name!r}")

    # -- simple_pre_lag (and simple_pre: the same calls without lag maps) ------------------------
    def _sync_group(self, prog: _Program, mgid: int) -> None:
        replicas = [(port, prog.nodes[h].rid) for h in prog.groups[mgid] for port in prog.nodes[h].ports]
        with _codes(MC_ERROR):
            prog.state.mc_group_modify(mgid, replicas)

    @staticmethod
    def _ports(port_map: str | None, lag_map: str | None) -> list[int]:
        """Ports of a BMv2 port map: a string of 0/1, port 0 the last character."""
        if not isinstance(port_map, str) or set(port_map) - {"0", "1"}:
            raise ApiError(MC_ERROR, f"bad port map {port_map!r}")
        if lag_map and "1" in lag_map:
            raise ApiError(MC_ERROR, "LAGs are not supported by the aggnet switch")
        return [i for i, bit in enumerate(reversed(port_map)) if bit == "1"]

    def _node(self, prog: _Program, l1_handle: int) -> _Node:
        node = prog.nodes.get(l1_handle)
        if node is None:
            raise ApiError(INVALID_L1_HANDLE, f"no multicast node {l1_handle}")
        return node

    @_api(I32)
    def bm_mc_mgrp_create(self, cxt_id: int, mgrp: int) -> int:
        prog = self._prog()
        with _codes(INVALID_MGID, AlreadyExists=MC_ERROR):
            prog.state.mc_group_insert(mgrp, [])
        prog.groups[mgrp] = []
        return mgrp  # BMv2's group handle is the group id

    @_api()
    def bm_mc_mgrp_destroy(self, cxt_id: int, mgrp_handle: int) -> None:
        prog = self._prog()
        if mgrp_handle not in prog.groups:
            raise ApiError(INVALID_MGRP_HANDLE, f"no multicast group {mgrp_handle} made over Thrift")
        for h in prog.groups.pop(mgrp_handle):
            prog.nodes[h].group = None
        with contextlib.suppress(st.NotFound):  # gone already if P4Runtime deleted it
            prog.state.mc_group_delete(mgrp_handle)

    @_api(I32)
    def bm_mc_node_create(self, cxt_id: int, rid: int, port_map: str, lag_map: str | None) -> int:
        prog = self._prog()
        if not isinstance(rid, int) or not 0 <= rid < 1 << 16:
            raise ApiError(MC_ERROR, f"rid {rid} is not 16 bits")
        handle = _lowest_free(prog.nodes)
        prog.nodes[handle] = _Node(rid, self._ports(port_map, lag_map))
        return handle

    @_api()
    def bm_mc_node_update(self, cxt_id: int, l1_handle: int, port_map: str, lag_map: str | None) -> None:
        prog = self._prog()
        node = self._node(prog, l1_handle)
        node.ports = self._ports(port_map, lag_map)
        if node.group is not None:
            self._sync_group(prog, node.group)

    @_api()
    def bm_mc_node_associate(self, cxt_id: int, mgrp_handle: int, l1_handle: int) -> None:
        prog = self._prog()
        node = self._node(prog, l1_handle)
        if mgrp_handle not in prog.groups:
            raise ApiError(INVALID_MGRP_HANDLE, f"no multicast group {mgrp_handle} made over Thrift")
        if node.group is not None:
            raise ApiError(MC_ERROR, f"node {l1_handle} is in group {node.group} already")
        node.group = mgrp_handle
        prog.groups[mgrp_handle].append(l1_handle)
        self._sync_group(prog, mgrp_handle)

    @_api()
    def bm_mc_node_dissociate(self, cxt_id: int, mgrp_handle: int, l1_handle: int) -> None:
        prog = self._prog()
        node = self._node(prog, l1_handle)
        if mgrp_handle not in prog.groups:
            raise ApiError(INVALID_MGRP_HANDLE)
        if node.group != mgrp_handle:
            raise ApiError(INVALID_L1_HANDLE, f"node {l1_handle} is not in group {mgrp_handle}")
        node.group = None
        prog.groups[mgrp_handle].remove(l1_handle)
        self._sync_group(prog, mgrp_handle)

    @_api()
    def bm_mc_node_destroy(self, cxt_id: int, l1_handle: int) -> None:
        prog = self._prog()
        node = self._node(prog, l1_handle)
        if node.group is not None:
            self.bm_mc_node_dissociate(cxt_id, node.group, l1_handle)
        del prog.nodes[l1_handle]

    @_api(STRING)
    def bm_mc_get_entries(self, cxt_id: int) -> str:
        prog = self._prog()
        return json.dumps({
            "mgrps": [{"id": g, "l1_handles": hs} for g, hs in sorted(prog.groups.items())],
            "l1_handles": [{"handle": h, "rid": n.rid, "l2_handle": h} for h, n in sorted(prog.nodes.items())],
            "l2_handles": [{"handle": h, "ports": n.ports, "lags": []} for h, n in sorted(prog.nodes.items())],
            "lags": []})

    # -- simple_switch -----------------------------------------------------------------------
    def _queues(self, port: int | None, apply: Callable[[Any], None]) -> int:
        """Apply to one port's queue (all ports: None); 0, or 1 for a refused value (as BMv2 returns)."""
        ports = self.switch.port_numbers() if port is None else [port]
        try:
            with self.switch.lock:
                for p in ports:
                    apply(self.switch.tm.queue(p))
        except ValueError as exc:
            log.info("thrift queue setting refused: %s", exc)
            return 1
        return 0

    @_api(I32)
    def set_egress_queue_depth(self, port_num: int, depth_pkts: int) -> int:
        return self._queues(port_num, lambda q: q.set_depth(depth_pkts))

    @_api(I32)
    def set_egress_priority_queue_depth(self, port_num: int, priority: int, depth_pkts: int) -> int:
        return self._queues(port_num, lambda q: q.set_depth(depth_pkts))

    @_api(I32)
    def set_all_egress_queue_depths(self, depth_pkts: int) -> int:
        return self._queues(None, lambda q: q.set_depth(depth_pkts))

    @_api(I32)
    def set_egress_queue_rate(self, port_num: int, rate_pps: int) -> int:
        return self._queues(port_num, lambda q: q.set_rate_pps(rate_pps))

    @_api(I32)
    def set_egress_priority_queue_rate(self, port_num: int, priority: int, rate_pps: int) -> int:
        return self._queues(port_num, lambda q: q.set_rate_pps(rate_pps))

    @_api(I32)
    def set_all_egress_queue_rates(self, rate_pps: int) -> int:
        return self._queues(None, lambda q: q.set_rate_pps(rate_pps))

    @_api(I64)
    def get_time_elapsed_us(self) -> int:
        return int((time.monotonic() - self._started) * 1e6)

    @_api(I64)
    def get_time_since_epoch_us(self) -> int:
        return int(time.monotonic() * 1e6)  # BMv2's clock is a steady clock too

    @_api()
    def mirroring_session_add(self, mirror_id: int, config: wire.Struct) -> None:
        port = config.get(1) if isinstance(config, dict) else None
        if port is None:
            raise ApiError(SESSION_NOT_FOUND, "mirroring to a multicast group is not supported; give a port")
        state = self._prog().state
        with _codes(SESSION_NOT_FOUND), state.lock:
            if mirror_id in state.clone_sessions:
                state.clone_session_modify(mirror_id, [(port, 0)])
            else:
                state.clone_session_insert(mirror_id, [(port, 0)])

    @_api()
    def mirroring_session_delete(self, mirror_id: int) -> None:
        with _codes(SESSION_NOT_FOUND):
            self._prog().state.clone_session_delete(mirror_id)

    @_api(STRUCT)
    def mirroring_session_get(self, mirror_id: int) -> wire.Struct:
        session = self._prog().state.clone_sessions.get(mirror_id)
        if session is None or not session.replicas:
            raise ApiError(SESSION_NOT_FOUND)
        return {1: (I32, session.replicas[0][0])}

    @_api(I32)
    def mirroring_mapping_add(self, mirror_id: int, egress_port: int) -> int:
        try:
            self.mirroring_session_add(mirror_id, {1: egress_port})
        except ApiError:
            return 1
        return 0

    @_api(I32)
    def mirroring_mapping_delete(self, mirror_id: int) -> int:
        try:
            self.mirroring_session_delete(mirror_id)
        except ApiError:
            return 1
        return 0

    @_api(I32)
    def mirroring_mapping_get_egress_port(self, mirror_id: int) -> int:
        session = self._prog().state.clone_sessions.get(mirror_id)
        return session.replicas[0][0] if session is not None and session.replicas else -1


def _refuse(code: int) -> Callable[..., None]:
    def refused(self: BmRuntime, *args: Any) -> None:
        raise ApiError(code)
    return refused


# What the aggnet switch does not have: the method's declared error (LearnOperationErrorCode
# INVALID_LIST_ID, SwapOperation CONFIG_SWAP_DISABLED, ParseVSet INVALID_PARSE_VSET_NAME, DevMgr
# ERROR, Crc/ToeplitzHash INVALID_CALCULATION_NAME; default members/groups of indirect tables; LAGs).
for _name, _code in [("bm_learning_ack", 1), ("bm_learning_ack_buffer", 1), ("bm_learning_set_timeout", 1),
                     ("bm_learning_set_buffer_size", 1), ("bm_load_new_config", 1), ("bm_swap_configs", 1),
                     ("bm_parse_vset_add", 1), ("bm_parse_vset_remove", 1), ("bm_parse_vset_get", 1),
                     ("bm_parse_vset_clear", 1), ("bm_dev_mgr_add_port", 1), ("bm_dev_mgr_remove_port", 1),
                     ("bm_set_crc16_custom_parameters", 1), ("bm_set_crc32_custom_parameters", 1),
                     ("bm_set_toeplitz_hash_key", 1), ("bm_mt_indirect_set_default_member", TABLE_ERROR),
                     ("bm_mt_indirect_ws_set_default_group", TABLE_ERROR), ("bm_mc_set_lag_membership", MC_ERROR)]:
    _METHODS[_name] = (_refuse(_code), None, 0)


def _meter_config(rates: Any, bad_list: int) -> st.MeterConfig:
    """A MeterConfig of BMv2's [committed, peak] BmMeterRateConfig list (rates in units per microsecond)."""
    if not isinstance(rates, list) or len(rates) != 2 or not all(isinstance(r, dict) for r in rates):
        raise ApiError(bad_list, "meters take two rates: committed and peak")
    (cir, cburst), (pir, pburst) = [(round(r.get(1, 0.0) * 1e6), r.get(2, 0)) for r in rates]
    if min(cir, pir) < 0 or pir < cir:
        raise ApiError(INVALID_INFO_RATE_VALUE, "rates must be >= 0, the peak rate at least the committed")
    if min(cburst, pburst) < 0:
        raise ApiError(INVALID_BURST_SIZE_VALUE, "burst sizes must be >= 0")
    return st.MeterConfig(cir, cburst, pir, pburst)


def _rates(config: st.MeterConfig | None) -> tuple[int, list]:
    if config is None:
        return STRUCT, []
    return STRUCT, [{1: (DOUBLE, rate / 1e6), 2: (I32, min(burst, PRIORITY_TOP))}
                    for rate, burst in ((config.cir, config.cburst), (config.pir, config.pburst))]
