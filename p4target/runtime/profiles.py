"""P4Runtime action profile members and groups <-> the switch state's action profiles.

Members and groups are written and read as BMv2's P4Runtime server does: a member holds an
action of its profile's tables; a group (action selectors only) lists members with positive
weights (duplicates refused: weights express repetition); a table entry of a table with an
action profile names a member or a group, never an action, and has no default action. Reads
filter by profile and id, where 0 means any. A group member's `watch`/`watch_port` is kept
and read back as written; ports never go down here, so it changes no selection.

One-shot entries (`action_profile_action_set`) work as in BMv2's server: each action becomes
`weight` hidden members in a row (so selection follows BMv2's handle order), a selector's set a
hidden group of them, freed with the entry;
the entry reads back with its action set, and reads of members and groups do not show the
hidden ones. A profile is programmed one way or the other: while it holds one-shot entries,
member and group writes are refused, and the other way round (INVALID_ARGUMENT).
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol

from finsy.proto import p4i, p4r

from p4target import state as st
from p4target.p4info import P4InfoIndex
from p4target.runtime.errors import RuntimeStatus, invalid, state_call

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


class Translating(Protocol):
    """What the profiles part asks of the Translator it belongs to (p4target/runtime/translate.py)."""

    info: P4InfoIndex
    state: st.State

    def by_id(self, kind: str, entity_id: int) -> Any: ...

    def action_call_in(self, call: p4r.Action, where: str) -> tuple[str, dict[str, int]]: ...

    def action_out(self, name: str, params: dict[str, int]) -> p4r.Action: ...


class ProfileTranslator:
    """The action-profile part of a Translator (same P4Info index and state)."""

    def __init__(self, translator: Translating):
        self._t = translator
        self._state = translator.state
        # (profile name, group id) -> {member id: Member carrying only its watch oneof}
        self._watches: dict[tuple[str, int], dict[int, p4r.ActionProfileGroup.Member]] = {}
        # profile name -> {("member"|"group", hidden id): the action set a one-shot entry wrote}
        self._one_shots: dict[str, dict[tuple[str, int], p4r.ActionProfileActionSet]] = {}
        self._hidden_members: dict[str, set[int]] = {}  # profile name -> ids of one-shot members

    def _profile(self, profile_id: int) -> p4i.ActionProfile:
        return self._t.by_id("action_profiles", profile_id)

    # ------------------------------------------------------------------ table entries

    def table_action_in(self, table: p4i.Table, ta: p4r.TableAction) -> tuple[int | None, int | None]:
        """(member id, group id) a table entry of an indirect table names; exactly one is set.

        A one-shot action set is written to the profile here (hidden member/group); whoever
        calls this must `discard` it if the entry write then fails.
        """
        where = f"table {table.preamble.name}"
        kind = ta.WhichOneof("type")
        profile = self._profile(table.implementation_id).preamble.name
        if kind == "action_profile_action_set":
            return self._one_shot_in(profile, ta.action_profile_action_set, where)
        if kind in ("action_profile_member_id", "action_profile_group_id") and self._one_shots.get(profile):
            raise invalid(f"{where}: action profile {profile} holds one-shot entries; entries cannot also name "
                          "members or groups")
        if kind == "action_profile_member_id":
            return ta.action_profile_member_id, None
        if kind == "action_profile_group_id":
            return None, ta.action_profile_group_id
        if kind is None:
            raise invalid(f"{where}: entry has no action")
        raise invalid(f"{where} has an action profile: an entry names a member or group, not an action")

    def table_action_out(self, table: p4i.Table, entry) -> p4r.TableAction:
        """The TableAction an entry of an indirect table reads back as: its action set if one-shot."""
        profile = self._profile(table.implementation_id).preamble.name
        key = ("member", entry.member_id) if entry.member_id is not None else ("group", entry.group_id)
        action_set = self._one_shots.get(profile, {}).get(key)
        if action_set is not None:
            return p4r.TableAction(action_profile_action_set=action_set)
        if entry.member_id is not None:
            return p4r.TableAction(action_profile_member_id=entry.member_id)
        return p4r.TableAction(action_profile_group_id=entry.group_id)

    def _one_shot_in(self, profile: str, action_set: p4r.ActionProfileActionSet, where: str) -> tuple[int | None, int | None]:
        """Write a one-shot action set as hidden members (and a group); their (member id, group id)."""
        visible = self._state.action_profile(profile)
        hidden = self._hidden_members.setdefault(profile, set())
        if any(m not in hidden for m in visible.members) or any(("group", g) not in self._one_shots.get(profile, {})
                                                                 for g in visible.groups):
            raise invalid(f"{where}: action profile {profile} holds members or groups written directly; "
                          "entries cannot also be one-shot")
        actions = list(action_set.action_profile_actions)
        with_selector = visible.schema.with_selector
        if not actions or (not with_selector and len(actions) != 1):
            raise invalid(f"{where}: a one-shot action set needs {'at least one action' if with_selector else 'one action'}")
        calls = [self._t.action_call_in(a.action, f"{where} one-shot action") for a in actions]
        if with_selector and any(a.weight <= 0 for a in actions):
            raise invalid(f"{where}: one-shot action weights must be positive")
        member_ids = []
        try:
            for (action, params), copies in zip(calls, (a.weight if with_selector else 1 for a in actions)):
                for _ in range(copies):
                    member_id = _free_id(visible.members)
                    state_call(self._state.profile_member_insert, profile, member_id, action, params)
                    hidden.add(member_id)
                    member_ids.append(member_id)
            if not with_selector:
                self._one_shots.setdefault(profile, {})[("member", member_ids[0])] = action_set
                return member_ids[0], None
            group_id = _free_id(visible.groups)
            state_call(self._state.profile_group_insert, profile, group_id, dict.fromkeys(member_ids, 1))
        except RuntimeStatus:
            self._drop_members(profile, member_ids)
            raise
        self._one_shots.setdefault(profile, {})[("group", group_id)] = action_set
        return None, group_id

    def discard(self, table: p4i.Table, member_id: int | None, group_id: int | None) -> None:
        """Free what a one-shot entry wrote (nothing for an entry naming members or groups itself)."""
        profile = self._profile(table.implementation_id).preamble.name
        action_sets = self._one_shots.get(profile, {})
        if member_id is not None and action_sets.pop(("member", member_id), None) is not None:
            self._drop_members(profile, [member_id])
        elif group_id is not None and action_sets.pop(("group", group_id), None) is not None:
            members = list(self._state.action_profile(profile).groups[group_id].members)
            state_call(self._state.profile_group_delete, profile, group_id)
            self._drop_members(profile, members)

    def _drop_members(self, profile: str, member_ids: list[int]) -> None:
        for member_id in member_ids:
            state_call(self._state.profile_member_delete, profile, member_id)
            self._hidden_members[profile].discard(member_id)

    # ------------------------------------------------------------------ members

    def _check_not_one_shot(self, profile: str) -> None:
        if self._one_shots.get(profile):
            raise invalid(f"action profile {profile} holds one-shot entries: its members and groups are not written "
                          "directly")

    def write_member(self, update_type: int, m: p4r.ActionProfileMember) -> None:
        profile = self._profile(m.action_profile_id)
        name = profile.preamble.name
        self._check_not_one_shot(name)
        if update_type == DELETE:
            return state_call(self._state.profile_member_delete, name, m.member_id)
        action, params = self._t.action_call_in(m.action, f"action profile {name} member {m.member_id}")
        call = self._state.profile_member_insert if update_type == INSERT else self._state.profile_member_modify
        state_call(call, name, m.member_id, action, params)

    def read_members(self, m: p4r.ActionProfileMember) -> Iterator[p4r.Entity]:
        for profile in self._profiles_read(m.action_profile_id):
            members = self._state.action_profile(profile.preamble.name).members
            hidden = self._hidden_members.get(profile.preamble.name, set())
            for member_id, member in members.items():
                if m.member_id in (0, member_id) and member_id not in hidden:
                    yield p4r.Entity(action_profile_member=p4r.ActionProfileMember(
                        action_profile_id=profile.preamble.id, member_id=member_id,
                        action=self._t.action_out(member.action, member.params)))

    def _profiles_read(self, profile_id: int) -> list[p4i.ActionProfile]:
        return [self._profile(profile_id)] if profile_id else list(self._t.info.p4info.action_profiles)

    # ------------------------------------------------------------------ groups

    def write_group(self, update_type: int, g: p4r.ActionProfileGroup) -> None:
        profile = self._profile(g.action_profile_id)
        name = profile.preamble.name
        self._check_not_one_shot(name)
        key = (name, g.group_id)
        if update_type == DELETE:
            state_call(self._state.profile_group_delete, name, g.group_id)
            self._watches.pop(key, None)
            return
        members: dict[int, int] = {}
        watches: dict[int, p4r.ActionProfileGroup.Member] = {}
        for member in g.members:
            if member.member_id in members:
                raise invalid(f"action profile {name} group {g.group_id}: member {member.member_id} is listed "
                              "twice (use its weight instead)")
            members[member.member_id] = member.weight
            if member.WhichOneof("watch_kind") is not None:
                watches[member.member_id] = _watch_only(member)
        call = self._state.profile_group_insert if update_type == INSERT else self._state.profile_group_modify
        state_call(call, name, g.group_id, members, g.max_size)
        self._watches[key] = watches

    def read_groups(self, g: p4r.ActionProfileGroup) -> Iterator[p4r.Entity]:
        for profile in self._profiles_read(g.action_profile_id):
            name = profile.preamble.name
            one_shots = self._one_shots.get(name, {})
            for group_id, group in self._state.action_profile(name).groups.items():
                if g.group_id not in (0, group_id) or ("group", group_id) in one_shots:
                    continue
                out = p4r.ActionProfileGroup(action_profile_id=profile.preamble.id, group_id=group_id,
                                             max_size=group.max_size)
                watches = self._watches.get((name, group_id), {})
                for member_id, weight in group.members.items():
                    member = out.members.add(member_id=member_id, weight=weight)
                    if member_id in watches:
                        member.MergeFrom(watches[member_id])
                yield p4r.Entity(action_profile_group=out)


def _free_id(used) -> int:
    """The lowest id not in `used`, for a hidden one-shot member or group."""
    free = 0
    while free in used:
        free += 1
    return free


def _watch_only(member: p4r.ActionProfileGroup.Member) -> p4r.ActionProfileGroup.Member:
    out = p4r.ActionProfileGroup.Member()
    if member.WhichOneof("watch_kind") == "watch_port":
        out.watch_port = member.watch_port
    else:
        out.watch = member.watch
    return out
