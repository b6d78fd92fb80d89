"""BMv2's `standard` service, action profiles: members and groups by handle (the State's member and group ids),
on the State's action profiles by control-plane name."""
from __future__ import annotations

from collections.abc import Callable

from p4target import state as st
from p4target.runtime.bmv2_thrift import wire
from p4target.runtime.bmv2_thrift.api import (
    GRP_STILL_USED,
    INVALID_ACTION_PROFILE_NAME,
    INVALID_GRP_HANDLE,
    INVALID_MBR_HANDLE,
    MBR_ALREADY_IN_GRP,
    MBR_NOT_IN_GRP,
    MBR_STILL_USED,
    NO_ACTION_PROFILE_SELECTION,
    TABLE_ERROR,
    TABLE_FULL,
    ApiBase,
    ApiError,
    api_method,
    error_codes,
    lowest_free,
)
from p4target.runtime.bmv2_thrift.tables import action_data, action_params
from p4target.runtime.bmv2_thrift.wire import I32, LIST, STRING, STRUCT


class ProfileApi(ApiBase):
    """Action profile calls: members and groups."""

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
        with error_codes(TABLE_ERROR, NotFound=INVALID_MBR_HANDLE):
            state.profile_group_modify(name, group, members, profile.groups[group].max_size)


    @api_method(I32)
    def bm_mt_act_prof_add_member(self, cxt_id: int, act_prof_name: str, action_name: str,
                                  action_data: list) -> int:
        state, profile = self._profile(act_prof_name)
        params = action_params(state, profile.schema.actions, action_name, action_data)
        member = lowest_free(profile.members)
        with error_codes(TABLE_ERROR, ResourceExhausted=TABLE_FULL):
            state.profile_member_insert(act_prof_name, member, action_name, params)
        return member

    @api_method()
    def bm_mt_act_prof_delete_member(self, cxt_id: int, act_prof_name: str, mbr_handle: int) -> None:
        state, _ = self._profile(act_prof_name)
        with error_codes(TABLE_ERROR, NotFound=INVALID_MBR_HANDLE, FailedPrecondition=MBR_STILL_USED):
            state.profile_member_delete(act_prof_name, mbr_handle)

    @api_method()
    def bm_mt_act_prof_modify_member(self, cxt_id: int, act_prof_name: str, mbr_handle: int, action_name: str,
                                     action_data: list) -> None:
        state, profile = self._profile(act_prof_name)
        params = action_params(state, profile.schema.actions, action_name, action_data)
        with error_codes(TABLE_ERROR, NotFound=INVALID_MBR_HANDLE):
            state.profile_member_modify(act_prof_name, mbr_handle, action_name, params)

    @api_method(I32)
    def bm_mt_act_prof_create_group(self, cxt_id: int, act_prof_name: str) -> int:
        state, profile = self._profile(act_prof_name)
        if not profile.schema.with_selector:
            raise ApiError(NO_ACTION_PROFILE_SELECTION, f"{act_prof_name} has no selector")
        group = lowest_free(profile.groups)
        state.profile_group_insert(act_prof_name, group, {})
        return group

    @api_method()
    def bm_mt_act_prof_delete_group(self, cxt_id: int, act_prof_name: str, grp_handle: int) -> None:
        state, _ = self._profile(act_prof_name)
        with error_codes(TABLE_ERROR, NotFound=INVALID_GRP_HANDLE, FailedPrecondition=GRP_STILL_USED,
                    InvalidArgument=NO_ACTION_PROFILE_SELECTION):
            state.profile_group_delete(act_prof_name, grp_handle)

    @api_method()
    def bm_mt_act_prof_add_member_to_group(self, cxt_id: int, act_prof_name: str, mbr_handle: int,
                                           grp_handle: int) -> None:
        def add(members: dict[int, int]) -> None:
            if mbr_handle in members:
                raise ApiError(MBR_ALREADY_IN_GRP)
            members[mbr_handle] = 1
        self._group_members(act_prof_name, grp_handle, add)

    @api_method()
    def bm_mt_act_prof_remove_member_from_group(self, cxt_id: int, act_prof_name: str, mbr_handle: int,
                                                grp_handle: int) -> None:
        def remove(members: dict[int, int]) -> None:
            if members.pop(mbr_handle, None) is None:
                raise ApiError(MBR_NOT_IN_GRP)
        self._group_members(act_prof_name, grp_handle, remove)

    def _member(self, state: st.State, member_id: int, member: st.ProfileMember) -> wire.Struct:
        return {1: (I32, member_id), 2: (STRING, member.action), 3: action_data(state, member.action, member.params)}

    @api_method(LIST)
    def bm_mt_act_prof_get_members(self, cxt_id: int, act_prof_name: str) -> tuple[int, list]:
        state, profile = self._profile(act_prof_name)
        return STRUCT, [self._member(state, i, m) for i, m in sorted(profile.members.items())]

    @api_method(STRUCT)
    def bm_mt_act_prof_get_member(self, cxt_id: int, act_prof_name: str, mbr_handle: int) -> wire.Struct:
        state, profile = self._profile(act_prof_name)
        if mbr_handle not in profile.members:
            raise ApiError(INVALID_MBR_HANDLE)
        return self._member(state, mbr_handle, profile.members[mbr_handle])

    @staticmethod
    def _group(group_id: int, group: st.ProfileGroup) -> wire.Struct:
        return {1: (I32, group_id), 2: (LIST, (I32, list(group.members)))}

    @api_method(LIST)
    def bm_mt_act_prof_get_groups(self, cxt_id: int, act_prof_name: str) -> tuple[int, list]:
        _, profile = self._profile(act_prof_name)
        return STRUCT, [self._group(i, g) for i, g in sorted(profile.groups.items())]

    @api_method(STRUCT)
    def bm_mt_act_prof_get_group(self, cxt_id: int, act_prof_name: str, grp_handle: int) -> wire.Struct:
        _, profile = self._profile(act_prof_name)
        if grp_handle not in profile.groups:
            raise ApiError(INVALID_GRP_HANDLE)
        return self._group(grp_handle, profile.groups[grp_handle])
