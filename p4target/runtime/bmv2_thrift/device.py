"""BMv2's management calls (`standard`) and the `simple_switch` service: switch info, the
program's JSON, ids by name, queue depths and rates, time, mirroring sessions."""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from typing import Any

from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.api import (
    INVALID_RESOURCE_NAME,
    SESSION_NOT_FOUND,
    ApiBase,
    ApiError,
    ProgramView,
    api_method,
    error_codes,
    log,
)
from p4target.runtime.bmv2_thrift.wire import BOOL, I32, I64, LIST, MAP, STRING, STRUCT


class DeviceApi(ApiBase):
    """Management, queue, time and mirroring calls."""

    @api_method(STRUCT)
    def bm_mgmt_get_info(self) -> wire.Struct:
        info: wire.Struct = {1: (I64, self.switch.device_id), 2: (I32, self.thrift_port)}
        if self.switch.event_log is not None:  # nanomsg_client.py finds the event log here when not told
            info[4] = (STRING, self.switch.event_log.addr)
        return info

    @api_method(LIST)
    def bm_dev_mgr_show_ports(self) -> tuple[int, list]:
        return STRUCT, [{1: (I32, n), 2: (STRING, p.ifname), 3: (BOOL, True), 4: (MAP, (STRING, STRING, {}))}
                        for n, p in sorted(self.switch.ports.items())]

    @api_method()
    def bm_reset_state(self) -> None:
        prog = self._prog()
        prog.state.reset()
        self._program = ProgramView.of(prog.state)

    @api_method(STRING)
    def bm_get_config(self) -> str:
        return json.dumps(self._prog().config)

    @api_method(STRING)
    def bm_get_config_md5(self) -> bytes:
        return hashlib.md5(self.bm_get_config().encode()).digest()

    @api_method(I32)
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

    @api_method(I32)
    def set_egress_queue_depth(self, port_num: int, depth_pkts: int) -> int:
        return self._queues(port_num, lambda q: q.set_depth(depth_pkts))

    @api_method(I32)
    def set_egress_priority_queue_depth(self, port_num: int, priority: int, depth_pkts: int) -> int:
        return self._queues(port_num, lambda q: q.set_depth(depth_pkts))

    @api_method(I32)
    def set_all_egress_queue_depths(self, depth_pkts: int) -> int:
        return self._queues(None, lambda q: q.set_depth(depth_pkts))

    @api_method(I32)
    def set_egress_queue_rate(self, port_num: int, rate_pps: int) -> int:
        return self._queues(port_num, lambda q: q.set_rate_pps(rate_pps))

    @api_method(I32)
    def set_egress_priority_queue_rate(self, port_num: int, priority: int, rate_pps: int) -> int:
        return self._queues(port_num, lambda q: q.set_rate_pps(rate_pps))

    @api_method(I32)
    def set_all_egress_queue_rates(self, rate_pps: int) -> int:
        return self._queues(None, lambda q: q.set_rate_pps(rate_pps))

    @api_method(I64)
    def get_time_elapsed_us(self) -> int:
        return int((time.monotonic() - self._started) * 1e6)

    @api_method(I64)
    def get_time_since_epoch_us(self) -> int:
        return int(time.monotonic() * 1e6)  # BMv2's clock is a steady clock too

    @api_method()
    def mirroring_session_add(self, mirror_id: int, config: wire.Struct) -> None:
        port = config.get(1) if isinstance(config, dict) else None
        if port is None:
            raise ApiError(SESSION_NOT_FOUND, "mirroring to a multicast group is not supported; give a port")
        state = self._prog().state
        with error_codes(SESSION_NOT_FOUND), state.lock:
            if mirror_id in state.clone_sessions:
                state.clone_session_modify(mirror_id, [(port, 0)])
            else:
                state.clone_session_insert(mirror_id, [(port, 0)])

    @api_method()
    def mirroring_session_delete(self, mirror_id: int) -> None:
        with error_codes(SESSION_NOT_FOUND):
            self._prog().state.clone_session_delete(mirror_id)

    @api_method(STRUCT)
    def mirroring_session_get(self, mirror_id: int) -> wire.Struct:
        session = self._prog().state.clone_sessions.get(mirror_id)
        if session is None or not session.replicas:
            raise ApiError(SESSION_NOT_FOUND)
        return {1: (I32, session.replicas[0][0])}

    @api_method(I32)
    def mirroring_mapping_add(self, mirror_id: int, egress_port: int) -> int:
        try:
            self.mirroring_session_add(mirror_id, {1: egress_port})
        except ApiError:
            return 1
        return 0

    @api_method(I32)
    def mirroring_mapping_delete(self, mirror_id: int) -> int:
        try:
            self.mirroring_session_delete(mirror_id)
        except ApiError:
            return 1
        return 0

    @api_method(I32)
    def mirroring_mapping_get_egress_port(self, mirror_id: int) -> int:
        session = self._prog().state.clone_sessions.get(mirror_id)
        return session.replicas[0][0] if session is not None and session.replicas else -1
