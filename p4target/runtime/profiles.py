"""P4Runtime action profile members and groups <-> the switch state's action profiles.

Members and groups are written and read as BMv2's P4Runtime server does: a member holds an
action of its profile's tables; a group (action selectors only) lists members with positive
weights (duplicates refused: weights express repetition); a table entry of a table with an
action profile names a member or a group, never an action, and has no default action. Reads
filter by profile and id, where 0 means any. A group member's `watch`/`watch_port` is kept
and read back as written; ports never go down here, so it changes no selection. One-shot
action sets (`action_profile_action_set`) answer UNIMPLEMENTED.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from finsy.proto import p4i, p4r

from p4target.runtime.errors import invalid, state_call, unimplemented

if TYPE_CHECKING:
    from p4target.runtime.translate import Translator

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


class ProfileTranslator:
    """The action-profile part of a Translator (same P4Info index and state)."""

    def __init__(self, translator: "Translator"):
        self._t = translator
        self._state = translator.state
        # (profile name, group id) -> {member id: Member carrying only its watch oneof}
        self._watches: dict[tuple[str, int], dict[int, p4r.ActionProfileGroup.Member]] = {}

    def _profile(self, profile_id: int) -> p4i.ActionProfile:
        return self._t._by_id("action_profiles", profile_id)

    # ------------------------------------------------------------------ table entries

    def table_action_in(self, table: p4i.Table, ta: p4r.TableAction) -> tuple[int | None, int | None]:
        """(member id, group id) a table entry of an indirect table names; exactly one is set."""
        where = f"table {table.preamble.name}"
        kind = ta.WhichOneof("type")
        if kind == "action_profile_member_id":
            return ta.action_profile_member_id, None
        if kind == "action_profile_group_id":
            return None, ta.action_profile_group_id
        if kind == "action_profile_action_set":
            raise unimplemented(f"{where}: one-shot action sets are not supported; write members and groups")
        if kind is None:
            raise invalid(f"{where}: entry has no action")
        raise invalid(f"{where} has an action profile: an entry names a member or group, not an action")

    # ------------------------------------------------------------------ members

    def write_member(self, update_type: int, m: p4r.ActionProfileMember) -> None:
        profile = self._profile(m.action_profile_id)
        name = profile.preamble.name
        if update_type == DELETE:
            return state_call(self._state.profile_member_delete, name, m.member_id)
        action, params = self._t.action_call_in(m.action, f"action profile {name} member {m.member_id}")
        call = self._state.profile_member_insert if update_type == INSERT else self._state.profile_member_modify
        state_call(call, name, m.member_id, action, params)

    def read_members(self, m: p4r.ActionProfileMember) -> Iterator[p4r.Entity]:
        for profile in self._profiles_read(m.action_profile_id):
            members = self._state.action_profile(profile.preamble.name).members
            for member_id, member in members.items():
                if m.member_id in (0, member_id):
                    yield p4r.Entity(action_profile_member=p4r.ActionProfileMember(
                        action_profile_id=profile.preamble.id, member_id=member_id,
                        action=self._t.action_out(member.action, member.params)))

    def _profiles_read(self, profile_id: int) -> list[p4i.ActionProfile]:
        return [self._profile(profile_id)] if profile_id else list(self._t.info.p4info.action_profiles)

    # ------------------------------------------------------------------ groups

    def write_group(self, update_type: int, g: p4r.ActionProfileGroup) -> None:
        profile = self._profile(g.action_profile_id)
        name = profile.preamble.name
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
            for group_id, group in self._state.action_profile(name).groups.items():
                if g.group_id not in (0, group_id):
                    continue
                out = p4r.ActionProfileGroup(action_profile_id=profile.preamble.id, group_id=group_id,
                                             max_size=group.max_size)
                watches = self._watches.get((name, group_id), {})
                for member_id, weight in group.members.items():
                    member = out.members.add(member_id=member_id, weight=weight)
                    if member_id in watches:
                        member.MergeFrom(watches[member_id])
                yield p4r.Entity(action_profile_group=out)


def _watch_only(member: p4r.ActionProfileGroup.Member) -> p4r.ActionProfileGroup.Member:
    out = p4r.ActionProfileGroup.Member()
    if member.WhichOneof("watch_kind") == "watch_port":
        out.watch_port = member.watch_port
    else:
        out.watch = member.watch
    return out
