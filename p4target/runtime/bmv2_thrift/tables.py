"""BMv2's `standard` service, tables: match tables and indirect tables, and their direct counters and meters,
on the State's tables by control-plane name (action profiles: profiles.py)."""
from __future__ import annotations

import time
from typing import Any

from p4target import state as st
from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.api import (
    ACTION_DATA,
    AGEING_DISABLED,
    BAD_ACTION_DATA,
    BAD_MATCH_KEY,
    COUNTERS_DISABLED,
    DEFAULT_ACTION_IS_CONST,
    DUPLICATE_ENTRY,
    EMPTY_GRP,
    GRP_HANDLE,
    IMMUTABLE_TABLE_ENTRIES,
    INVALID_ACTION_NAME,
    INVALID_GRP_HANDLE,
    INVALID_MBR_HANDLE,
    INVALID_METER_OPERATION,
    MBR_HANDLE,
    METERS_DISABLED,
    PARAM_TYPE,
    PRIORITY_TOP,
    TABLE_ERROR,
    TABLE_FULL,
    ApiBase,
    ApiError,
    ProgramView,
    api_method,
    error_codes,
    meter_config,
    meter_rates,
    to_bytes,
    to_int,
)
from p4target.runtime.bmv2_thrift.program_json import key_match_type
from p4target.runtime.bmv2_thrift.wire import I32, I64, LIST, STRING, STRUCT


def action_params(state: st.State, allowed: tuple[str, ...], action: str, data: list[bytes]) -> dict[str, int]:
    """A call's action data as the action's parameters (BAD_ACTION_DATA unless each fits its width)."""
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

def action_data(state: st.State, action: str, params: dict[str, int]) -> tuple[int, tuple[int, list[bytes]]]:
    """An action's parameters as a reply's action data."""
    widths = state.schema.actions[action].params
    return LIST, (STRING, [to_bytes(params[n], w) for n, w in widths])


class TableApi(ApiBase):
    """Table calls: entries by handle, default actions, direct resources."""

    @staticmethod
    def _match(table: st.Table, params: list[wire.Struct], options: wire.Struct | None) -> tuple[dict, int]:
        """(match, state priority) of a BmMatchParams list and BmAddEntryOptions."""
        keys = table.schema.keys
        if not isinstance(params, list) or len(params) != len(keys):
            raise ApiError(BAD_MATCH_KEY, f"table {table.name} has {len(keys)} key fields")
        match: dict[str, st.Match] = {}
        for key, param in zip(keys, params):
            kind, ptype = key_match_type(key), PARAM_TYPE[key_match_type(key)]
            body = param.get(ptype + 2) if isinstance(param, dict) else None
            if not isinstance(body, dict) or param.get(1) != ptype:
                raise ApiError(BAD_MATCH_KEY, f"key {key.name} is {kind}")
            full = (1 << key.bitwidth) - 1
            value = to_int(body.get(1))
            if key.match_kind == "lpm":
                plen = body.get(2)
                if not isinstance(plen, int) or not 0 <= plen <= key.bitwidth:
                    raise ApiError(BAD_MATCH_KEY, f"key {key.name}: bad prefix length {plen}")
                other = full ^ (full >> plen)  # the prefix's mask: BMv2 ignores the bits after it
            else:
                other = to_int(body.get(2)) if kind != "exact" else 0
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

    def _action_entry(self, state: st.State, entry: st.TableEntry | st.DefaultAction | None) -> wire.Struct:
        if entry is None:
            return {1: (I32, 0)}
        if isinstance(entry, st.TableEntry) and entry.member_id is not None:
            return {1: (I32, MBR_HANDLE), 4: (I32, entry.member_id)}
        if isinstance(entry, st.TableEntry) and entry.group_id is not None:
            return {1: (I32, GRP_HANDLE), 5: (I32, entry.group_id)}
        return {1: (I32, ACTION_DATA), 2: (STRING, entry.action), 3: action_data(state, entry.action, entry.params)}

    def _entry(self, prog: ProgramView, table: st.Table, entry: st.TableEntry) -> wire.Struct:
        """BmMtEntry of a stored entry (wildcards spelled as BMv2 does: mask 0, /0, full range)."""
        params = []
        for key in table.schema.keys:
            spec = entry.match.get(key.name)
            kind, w, full = key_match_type(key), key.bitwidth, (1 << key.bitwidth) - 1
            body: wire.Struct
            if kind == "exact":
                body = {1: (STRING, to_bytes(spec.value if isinstance(spec, st.Exact) else 0, w))}
            elif kind == "lpm":
                value, plen = (spec.value, spec.prefix_len) if isinstance(spec, st.Lpm) else (0, 0)
                body = {1: (STRING, to_bytes(value, w)), 2: (I32, plen)}
            elif kind == "range":
                low, high = (spec.low, spec.high) if isinstance(spec, st.Range) else (0, full)
                body = {1: (STRING, to_bytes(low, w)), 2: (STRING, to_bytes(high, w))}
            else:
                value, mask = ((spec.value, spec.mask) if isinstance(spec, st.Ternary) else
                               (spec.value, full) if isinstance(spec, st.Optional) else (0, 0))
                body = {1: (STRING, to_bytes(value, w)), 2: (STRING, to_bytes(mask, w))}
            ptype = PARAM_TYPE[kind]
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
        with error_codes(TABLE_ERROR, AlreadyExists=DUPLICATE_ENTRY, ResourceExhausted=TABLE_FULL,
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
        with error_codes(TABLE_ERROR, PermissionDenied=IMMUTABLE_TABLE_ENTRIES):
            prog.state.modify_entry(table.name, new)

    def _delete(self, table_name: str, handle: int, indirect: bool) -> None:
        prog, table = self._table(table_name, indirect)
        entry = prog.handles[table.name].entry(table, handle)
        with error_codes(TABLE_ERROR, PermissionDenied=IMMUTABLE_TABLE_ENTRIES):
            prog.state.delete_entry(table.name, entry)
        prog.handles[table.name].forget(handle)

    def _set_ttl(self, table_name: str, handle: int, timeout_ms: int, indirect: bool) -> None:
        if not self._table(table_name)[1].schema.support_timeout:
            raise ApiError(AGEING_DISABLED, f"table {table_name} has no support_timeout")
        self._modify(table_name, handle, indirect, idle_timeout_ns=max(timeout_ms, 0) * 1_000_000)

    def _direct(self, table_name: str, handle: int, what: str) -> tuple[st.State, st.TableEntry]:
        prog, table = self._table(table_name)
        if getattr(table.schema, what) is None:
            raise ApiError(COUNTERS_DISABLED if what == "direct_counter" else METERS_DISABLED,
                           f"table {table_name} has no {what.replace('_', ' ')}")
        return prog.state, prog.handles[table.name].entry(table, handle)

    # -- standard: tables ------------------------------------------------------------------
    @api_method(I64)
    def bm_mt_get_num_entries(self, cxt_id: int, table_name: str) -> int:
        return len(self._table(table_name)[1])

    @api_method()
    def bm_mt_clear_entries(self, cxt_id: int, table_name: str, reset_default_entry: bool) -> None:
        prog, table = self._table(table_name)
        with error_codes(TABLE_ERROR, PermissionDenied=IMMUTABLE_TABLE_ENTRIES), prog.state.lock:
            for entry in table.entries():
                prog.state.delete_entry(table.name, entry)
            prog.handles[table.name].forget_deleted(table)
            if reset_default_entry and table.profile is None:
                prog.state.reset_default(table.name)

    @api_method(I32)
    def bm_mt_add_entry(self, cxt_id: int, table_name: str, match_key: list, action_name: str,
                        action_data: list, options: wire.Struct) -> int:
        prog, table = self._table(table_name, indirect=False)
        params = action_params(prog.state, table.schema.actions, action_name, action_data)
        return self._add(table_name, match_key, options, False, action_name, params)

    @api_method()
    def bm_mt_set_default_action(self, cxt_id: int, table_name: str, action_name: str, action_data: list) -> None:
        prog, table = self._table(table_name, indirect=False)
        params = action_params(prog.state, table.schema.actions, action_name, action_data)
        with error_codes(TABLE_ERROR, PermissionDenied=DEFAULT_ACTION_IS_CONST):
            prog.state.set_default(table.name, action_name, params)

    @api_method()
    def bm_mt_reset_default_entry(self, cxt_id: int, table_name: str) -> None:
        prog, table = self._table(table_name, indirect=False)
        prog.state.reset_default(table.name)

    @api_method()
    def bm_mt_delete_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> None:
        self._delete(table_name, entry_handle, indirect=False)

    @api_method()
    def bm_mt_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int, action_name: str,
                           action_data: list) -> None:
        prog, table = self._table(table_name, indirect=False)
        params = action_params(prog.state, table.schema.actions, action_name, action_data)
        self._modify(table_name, entry_handle, False, action=action_name, params=params)

    @api_method()
    def bm_mt_set_entry_ttl(self, cxt_id: int, table_name: str, entry_handle: int, timeout_ms: int) -> None:
        self._set_ttl(table_name, entry_handle, timeout_ms, indirect=False)

    @api_method(LIST)
    def bm_mt_get_entries(self, cxt_id: int, table_name: str) -> tuple[int, list]:
        prog, table = self._table(table_name)
        with prog.state.lock:
            prog.handles[table.name].forget_deleted(table)
            entries = sorted(table.entries(), key=prog.handles[table.name].of)
            return STRUCT, [self._entry(prog, table, e) for e in entries]

    @api_method(STRUCT)
    def bm_mt_get_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> wire.Struct:
        prog, table = self._table(table_name)
        return self._entry(prog, table, prog.handles[table.name].entry(table, entry_handle))

    @api_method(STRUCT)
    def bm_mt_get_default_entry(self, cxt_id: int, table_name: str) -> wire.Struct:
        prog, table = self._table(table_name)
        return self._action_entry(prog.state, table.default)

    @api_method(STRUCT)
    def bm_mt_get_entry_from_key(self, cxt_id: int, table_name: str, match_key: list,
                                 options: wire.Struct) -> wire.Struct:
        prog, table = self._table(table_name)
        match, priority = self._match(table, match_key, options)
        with error_codes(BAD_MATCH_KEY):
            return self._entry(prog, table, table.find(match, priority))

    # -- standard: indirect tables --------------------------------------------------------
    def _check_ref(self, table_name: str, *, member_id: int | None = None, group_id: int | None = None) -> None:
        profile = self._table(table_name, indirect=True)[1].profile
        assert profile is not None
        if member_id is not None and member_id not in profile.members:
            raise ApiError(INVALID_MBR_HANDLE, f"{profile.name}: no member {member_id}")
        if group_id is not None and group_id not in profile.groups:
            raise ApiError(INVALID_GRP_HANDLE, f"{profile.name}: no group {group_id}")

    @api_method(I32)
    def bm_mt_indirect_add_entry(self, cxt_id: int, table_name: str, match_key: list, mbr_handle: int,
                                 options: wire.Struct) -> int:
        self._check_ref(table_name, member_id=mbr_handle)
        return self._add(table_name, match_key, options, True, member_id=mbr_handle)

    @api_method()
    def bm_mt_indirect_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int, mbr_handle: int) -> None:
        self._check_ref(table_name, member_id=mbr_handle)
        self._modify(table_name, entry_handle, True, member_id=mbr_handle, group_id=None)

    @api_method()
    def bm_mt_indirect_delete_entry(self, cxt_id: int, table_name: str, entry_handle: int) -> None:
        self._delete(table_name, entry_handle, indirect=True)

    @api_method()
    def bm_mt_indirect_set_entry_ttl(self, cxt_id: int, table_name: str, entry_handle: int, timeout_ms: int) -> None:
        self._set_ttl(table_name, entry_handle, timeout_ms, indirect=True)

    @api_method()
    def bm_mt_indirect_reset_default_entry(self, cxt_id: int, table_name: str) -> None:
        self._table(table_name, indirect=True)  # nothing to reset: such a table has no default entry

    @api_method(I32)
    def bm_mt_indirect_ws_add_entry(self, cxt_id: int, table_name: str, match_key: list, grp_handle: int,
                                    options: wire.Struct) -> int:
        self._check_ref(table_name, group_id=grp_handle)
        return self._add(table_name, match_key, options, True, group_id=grp_handle)

    @api_method()
    def bm_mt_indirect_ws_modify_entry(self, cxt_id: int, table_name: str, entry_handle: int, grp_handle: int) -> None:
        self._check_ref(table_name, group_id=grp_handle)
        self._modify(table_name, entry_handle, True, member_id=None, group_id=grp_handle)

    # -- standard: direct counters and meters ----------------------------------------------
    @api_method(STRUCT)
    def bm_mt_read_counter(self, cxt_id: int, table_name: str, entry_handle: int) -> wire.Struct:
        _, entry = self._direct(table_name, entry_handle, "direct_counter")
        return {1: (I64, wire.signed64(entry.bytes)), 2: (I64, wire.signed64(entry.packets))}

    @api_method()
    def bm_mt_reset_counters(self, cxt_id: int, table_name: str) -> None:
        prog, table = self._table(table_name)
        if table.schema.direct_counter is None:
            raise ApiError(COUNTERS_DISABLED)
        with prog.state.lock:
            for entry in table.entries():
                entry.packets = entry.bytes = 0

    @api_method()
    def bm_mt_write_counter(self, cxt_id: int, table_name: str, entry_handle: int, value: wire.Struct) -> None:
        state, entry = self._direct(table_name, entry_handle, "direct_counter")
        with state.lock:
            entry.bytes, entry.packets = max(value.get(1, 0), 0), max(value.get(2, 0), 0)

    @api_method()
    def bm_mt_set_meter_rates(self, cxt_id: int, table_name: str, entry_handle: int, rates: list) -> None:
        state, entry = self._direct(table_name, entry_handle, "direct_meter")
        config = meter_config(rates, INVALID_METER_OPERATION)
        assert entry.meter is not None, "entries of a table with a direct meter each have a cell"
        with state.lock, error_codes(INVALID_METER_OPERATION):
            entry.meter.configure(config, time.monotonic())

    @api_method(LIST)
    def bm_mt_get_meter_rates(self, cxt_id: int, table_name: str, entry_handle: int) -> tuple[int, list]:
        _, entry = self._direct(table_name, entry_handle, "direct_meter")
        assert entry.meter is not None
        return meter_rates(entry.meter.config)
