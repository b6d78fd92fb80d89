"""BMv2's runtime API (Thrift services `standard`, `simple_pre_lag`, `simple_switch`) on our switch.

`simple_switch_CLI` and p4-utils drive BMv2 through these calls; here they drive the switch's
State (tables, action profiles, counters, registers, meters, multicast, clone sessions, all by
control-plane name) and its traffic manager. The method names, argument field ids, structs and
error codes are those of BMv2's IDL (thrift_src/standard.thrift, simple_pre_lag.thrift,
targets/simple_switch/thrift/simple_switch.thrift); each handler (one class a service: tables.py,
arrays.py, value_sets.py, pre.py, device.py; BmRuntime joins them) is named after its
method and takes the method's arguments in field-id order. Where BMv2 and the State differ:
- entry handles: BMv2 numbers entries per table; we hand out a number the first time a client
  sees an entry (added here, or listed, also when P4Runtime wrote it);
- priority: the CLI's lower number wins, the State's higher: state priority = PRIORITY_TOP - cli;
- member and group handles are the State's member and group ids;
- the PRE: `mc_node_create` nodes live here; a group's replicas (each node's ports with its rid)
  are written to the State's multicast group at every change. LAGs are refused;
- one queue per port: the per-priority queue calls set that queue;
- a table with an action profile has no default entry (as in the State).
What a client cannot do here (learning, config swap, custom CRCs, port management) gets the
method's declared error. A State error becomes the method's exception with the closest code, and
its text goes to the switch log, since the CLI prints only the code.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from p4target.errors import MESSAGE_CHARS, shorten
from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.api import (
    INTERNAL_ERROR,
    MC_ERROR,
    METHODS,
    TABLE_ERROR,
    UNKNOWN_METHOD,
    ApiError,
    argument,
    log,
)
from p4target.runtime.bmv2_thrift.arrays import ArrayApi
from p4target.runtime.bmv2_thrift.device import DeviceApi
from p4target.runtime.bmv2_thrift.pre import PreApi
from p4target.runtime.bmv2_thrift.tables import TableApi
from p4target.runtime.bmv2_thrift.value_sets import ValueSetApi
from p4target.runtime.bmv2_thrift.wire import I32, STRUCT


class BmRuntime(TableApi, ArrayApi, ValueSetApi, PreApi, DeviceApi):
    """The API on one switch (`tm`, `lock`, `state`, `ports`, `device_id`, `port_numbers()`)."""

    FIRST_BYTE = wire.FIRST_BYTE  # how a listener shared with another protocol tells Thrift clients apart

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
        found = METHODS.get(method)
        if found is None:
            return wire.EXCEPTION, wire.app_exception(f"aggnet switch: no method {shorten(method)}", UNKNOWN_METHOD)
        fn, rtype, annotations = found
        values = [argument(args.get(i + 1), annotation) for i, annotation in enumerate(annotations)]
        try:
            with self._lock:
                result = fn(self, *values)
        except ApiError as exc:
            if str(exc):
                log.info("thrift %s: %s", method, shorten(str(exc), MESSAGE_CHARS))
            return wire.REPLY, {1: (STRUCT, {1: (I32, exc.code)})}
        except Exception as exc:  # a client's malformed call must not take the switch down
            shown = shorten(repr(exc), MESSAGE_CHARS)
            log.warning("thrift %s failed: %s", method, shown)
            return wire.EXCEPTION, wire.app_exception(f"{method}: {shown}", INTERNAL_ERROR)
        return wire.REPLY, ({} if rtype is None else {0: (rtype, result)})


def _refuse(code: int) -> Callable[..., None]:
    def refused(self: BmRuntime, *args: Any) -> None:
        raise ApiError(code)
    return refused


# What the aggnet switch does not have: the method's declared error (LearnOperationErrorCode
# INVALID_LIST_ID, SwapOperation CONFIG_SWAP_DISABLED, DevMgr ERROR, Crc/ToeplitzHash
# INVALID_CALCULATION_NAME; default members/groups of indirect tables; LAGs).
for _name, _code in [("bm_learning_ack", 1), ("bm_learning_ack_buffer", 1), ("bm_learning_set_timeout", 1),
                     ("bm_learning_set_buffer_size", 1), ("bm_load_new_config", 1), ("bm_swap_configs", 1),
                     ("bm_dev_mgr_add_port", 1), ("bm_dev_mgr_remove_port", 1),
                     ("bm_set_crc16_custom_parameters", 1), ("bm_set_crc32_custom_parameters", 1),
                     ("bm_set_toeplitz_hash_key", 1), ("bm_mt_indirect_set_default_member", TABLE_ERROR),
                     ("bm_mt_indirect_ws_set_default_group", TABLE_ERROR), ("bm_mc_set_lag_membership", MC_ERROR)]:
    METHODS[_name] = (_refuse(_code), None, ())
