"""BMv2's `simple_pre_lag` service (and `simple_pre`: the same calls without lag maps).

PRE L1 nodes live here; a group's replicas (each node's ports with its rid) are written to
the State's multicast group at every change. LAGs are refused."""
from __future__ import annotations

import contextlib
import json

from p4target import state as st
from p4target.runtime.bmv2_thrift.api import (
    INVALID_L1_HANDLE,
    INVALID_MGID,
    INVALID_MGRP_HANDLE,
    MC_ERROR,
    ApiBase,
    ApiError,
    PreNode,
    ProgramView,
    api_method,
    error_codes,
    lowest_free,
)
from p4target.runtime.bmv2_thrift.wire import I32, STRING


class PreApi(ApiBase):
    """Multicast groups and nodes."""

    def _sync_group(self, prog: ProgramView, mgid: int) -> None:
        replicas = [(port, prog.nodes[h].rid) for h in prog.groups[mgid] for port in prog.nodes[h].ports]
        with error_codes(MC_ERROR):
            prog.state.mc_group_modify(mgid, replicas)

    @staticmethod
    def _ports(port_map: str | None, lag_map: str | None) -> list[int]:
        """Ports of a BMv2 port map: a string of 0/1, port 0 the last character."""
        if not isinstance(port_map, str) or set(port_map) - {"0", "1"}:
            raise ApiError(MC_ERROR, f"bad port map {port_map!r}")
        if lag_map and "1" in lag_map:
            raise ApiError(MC_ERROR, "LAGs are not supported by the aggnet switch")
        return [i for i, bit in enumerate(reversed(port_map)) if bit == "1"]

    def _node(self, prog: ProgramView, l1_handle: int) -> PreNode:
        node = prog.nodes.get(l1_handle)
        if node is None:
            raise ApiError(INVALID_L1_HANDLE, f"no multicast node {l1_handle}")
        return node

    @api_method(I32)
    def bm_mc_mgrp_create(self, cxt_id: int, mgrp: int) -> int:
        prog = self._prog()
        with error_codes(INVALID_MGID, AlreadyExists=MC_ERROR):
            prog.state.mc_group_insert(mgrp, [])
        prog.groups[mgrp] = []
        return mgrp  # BMv2's group handle is the group id

    @api_method()
    def bm_mc_mgrp_destroy(self, cxt_id: int, mgrp_handle: int) -> None:
        prog = self._prog()
        if mgrp_handle not in prog.groups:
            raise ApiError(INVALID_MGRP_HANDLE, f"no multicast group {mgrp_handle} made over Thrift")
        for h in prog.groups.pop(mgrp_handle):
            prog.nodes[h].group = None
        with contextlib.suppress(st.NotFound):  # gone already if P4Runtime deleted it
            prog.state.mc_group_delete(mgrp_handle)

    @api_method(I32)
    def bm_mc_node_create(self, cxt_id: int, rid: int, port_map: str, lag_map: str | None) -> int:
        prog = self._prog()
        if not isinstance(rid, int) or not 0 <= rid < 1 << 16:
            raise ApiError(MC_ERROR, f"rid {rid} is not 16 bits")
        handle = lowest_free(prog.nodes)
        prog.nodes[handle] = PreNode(rid, self._ports(port_map, lag_map))
        return handle

    @api_method()
    def bm_mc_node_update(self, cxt_id: int, l1_handle: int, port_map: str, lag_map: str | None) -> None:
        prog = self._prog()
        node = self._node(prog, l1_handle)
        node.ports = self._ports(port_map, lag_map)
        if node.group is not None:
            self._sync_group(prog, node.group)

    @api_method()
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

    @api_method()
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

    @api_method()
    def bm_mc_node_destroy(self, cxt_id: int, l1_handle: int) -> None:
        prog = self._prog()
        node = self._node(prog, l1_handle)
        if node.group is not None:
            self.bm_mc_node_dissociate(cxt_id, node.group, l1_handle)
        del prog.nodes[l1_handle]

    @api_method(STRING)
    def bm_mc_get_entries(self, cxt_id: int) -> str:
        prog = self._prog()
        return json.dumps({
            "mgrps": [{"id": g, "l1_handles": hs} for g, hs in sorted(prog.groups.items())],
            "l1_handles": [{"handle": h, "rid": n.rid, "l2_handle": h} for h, n in sorted(prog.nodes.items())],
            "l2_handles": [{"handle": h, "ports": n.ports, "lags": []} for h, n in sorted(prog.nodes.items())],
            "lags": []})
