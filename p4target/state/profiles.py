"""Action profiles and selectors: the members (and groups) the entries of their tables point at."""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from p4target.state.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound, ResourceExhausted, check_width
from p4target.state.schema import ActionProfileSchema, ActionSchema, TableEntry, check_args


@dataclass
class ProfileMember:
    """One member: an action with its arguments. `handle` orders members within groups (BMv2's handle)."""

    action: str
    params: dict[str, int]
    args: tuple[int, ...]
    handle: int


@dataclass
class ProfileGroup:
    """A selector group: member id -> weight (as written), its size limit, and the selection list."""

    members: dict[int, int]
    max_size: int = 0
    extra_handles: list[int] = field(default_factory=list)  # handles of weight copies beyond the first
    choices: tuple[ProfileMember, ...] = ()


class ActionProfile:
    """Members (and, with a selector, groups) that the entries of its tables point at.

    A packet that hits an entry pointing at a group runs `choices[hash % len(choices)]`, as
    BMv2 does: its group members ordered by their handle (the lowest free number when the
    member was created), each member `weight` times, the copies beyond the first taking new
    handles when the group is written (BMv2's P4Runtime server adds a member once per unit of
    weight). Members and groups in use (by a group or a table entry) cannot be deleted.
    """

    def __init__(self, schema: ActionProfileSchema, actions: dict[str, ActionSchema]):
        self.schema = schema
        self.name = schema.name
        self._actions = actions
        self.members: dict[int, ProfileMember] = {}
        self.groups: dict[int, ProfileGroup] = {}
        self._handles: set[int] = set()
        self._refs: collections.Counter = collections.Counter()  # ("member"|"group", id) -> users

    # -- members

    def _member_args(self, member_id: int, action: str, params: dict[str, int]) -> tuple[int, ...]:
        where = f"action profile {self.name} member {member_id}"
        check_width(f"{where} id", member_id, 32)
        if action not in self.schema.actions:
            raise InvalidArgument(f"{where}: action {action!r} is not an action of the profile's tables")
        return check_args(self._actions[action], params, where)

    def insert_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        args = self._member_args(member_id, action, params)
        if member_id in self.members:
            raise AlreadyExists(f"action profile {self.name}: member {member_id} already exists")
        if len(self.members) >= self.schema.size:
            raise ResourceExhausted(f"action profile {self.name} is full ({self.schema.size} members)")
        self.members[member_id] = ProfileMember(action, dict(params), args, self._take_handle())

    def modify_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        args = self._member_args(member_id, action, params)
        member = self._member(member_id)
        member.action, member.params, member.args = action, dict(params), args  # in place: groups keep it

    def delete_member(self, member_id: int) -> None:
        member = self._member(member_id)
        if self._refs[("member", member_id)]:
            raise FailedPrecondition(f"action profile {self.name}: member {member_id} is still used by a group or entry")
        del self.members[member_id]
        self._handles.discard(member.handle)

    def _member(self, member_id: int) -> ProfileMember:
        try:
            return self.members[member_id]
        except KeyError:
            raise NotFound(f"action profile {self.name}: no member {member_id}") from None

    def _take_handle(self) -> int:
        handle = 0
        while handle in self._handles:
            handle += 1
        self._handles.add(handle)
        return handle

    # -- groups

    def _check_group(self, group_id: int, members: dict[int, int], max_size: int) -> None:
        where = f"action profile {self.name} group {group_id}"
        if not self.schema.with_selector:
            raise InvalidArgument(f"action profile {self.name} has no selector: it has no groups")
        check_width(f"{where} id", group_id, 32)
        check_width(f"{where} max_size", max_size, 31)
        limit = self.schema.max_group_size
        if limit and max_size > limit:
            raise InvalidArgument(f"{where}: max_size {max_size} exceeds the profile's max_group_size {limit}")
        for member_id, weight in members.items():
            if not isinstance(weight, int) or weight <= 0 or weight >> 31:
                raise InvalidArgument(f"{where}: member {member_id} weight must be a positive 32-bit integer")
            if member_id not in self.members:
                raise NotFound(f"{where}: no member {member_id}")
        total = sum(members.values())
        for bound in (max_size, limit):
            if bound and total > bound:
                raise ResourceExhausted(f"{where}: member weights add up to {total}, more than {bound}")

    def insert_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        self._check_group(group_id, members, max_size)
        if group_id in self.groups:
            raise AlreadyExists(f"action profile {self.name}: group {group_id} already exists")
        group = self.groups[group_id] = ProfileGroup({}, max_size)
        self._set_group_members(group, members)

    def modify_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        self._check_group(group_id, members, max_size)
        group = self._group(group_id)
        group.max_size = max_size
        self._set_group_members(group, members)

    def delete_group(self, group_id: int) -> None:
        group = self._group(group_id)
        if self._refs[("group", group_id)]:
            raise FailedPrecondition(f"action profile {self.name}: group {group_id} is still used by a table entry")
        self._set_group_members(group, {})
        del self.groups[group_id]

    def _group(self, group_id: int) -> ProfileGroup:
        try:
            return self.groups[group_id]
        except KeyError:
            raise NotFound(f"action profile {self.name}: no group {group_id}") from None

    def _set_group_members(self, group: ProfileGroup, members: dict[int, int]) -> None:
        """Replace a group's members (validated), re-taking the handles of weight copies."""
        for member_id in group.members:
            self._refs[("member", member_id)] -= 1
        self._handles.difference_update(group.extra_handles)
        group.members, group.extra_handles = dict(members), []
        slots = []
        for member_id, weight in members.items():
            self._refs[("member", member_id)] += 1
            member = self.members[member_id]
            slots.append((member.handle, member))
            for _ in range(weight - 1):
                handle = self._take_handle()
                group.extra_handles.append(handle)
                slots.append((handle, member))
        group.choices = tuple(member for _, member in sorted(slots, key=lambda slot: slot[0]))

    # -- table entries pointing here

    def check_reference(self, entry: TableEntry, where: str) -> None:
        """InvalidArgument/FailedPrecondition unless `entry` names exactly one existing member or non-empty group."""
        if entry.action:
            raise InvalidArgument(f"{where}: entries of a table with action profile {self.name} name a member "
                                  "or group, not an action")
        if (entry.member_id is None) == (entry.group_id is None):
            raise InvalidArgument(f"{where}: an entry names either a member or a group of {self.name}")
        if entry.group_id is None:
            if entry.member_id not in self.members:
                raise InvalidArgument(f"{where}: action profile {self.name} has no member {entry.member_id}")
            return
        if not self.schema.with_selector:
            raise InvalidArgument(f"{where}: action profile {self.name} has no selector: entries name members")
        group = self.groups.get(entry.group_id)
        if group is None:
            raise InvalidArgument(f"{where}: action profile {self.name} has no group {entry.group_id}")
        if not group.members:
            raise FailedPrecondition(f"{where}: group {entry.group_id} of {self.name} is empty")

    def reference(self, entry: TableEntry, count: int = 1) -> None:
        """Count (or, with count=-1, uncount) `entry`'s use of its member or group."""
        if entry.member_id is not None:
            self._refs[("member", entry.member_id)] += count
        else:
            self._refs[("group", entry.group_id)] += count

    def pick(self, group_id: int, hash_value: int) -> ProfileMember | None:
        """The member a packet with this selector hash runs; None for an empty group."""
        choices = self.groups[group_id].choices
        return choices[hash_value % len(choices)] if choices else None

    def clear(self) -> None:
        self.members.clear()
        self.groups.clear()
        self._handles.clear()
        self._refs.clear()
