"""The native engine's action profiles (the twins of p4target/state/profiles.py): members and groups mirrored
into the engine by handles handed out here."""
from __future__ import annotations

from collections.abc import Callable

from p4target import state as st
from p4target.native.binding import Engine
from p4target.native.store.words import arg_words, param_widths


class Handles:
    """Numbers for the engine's members (or groups), shared by all profiles of one engine: freed ones first."""

    def __init__(self) -> None:
        self._free: list[int] = []
        self._next = 0

    def take(self) -> int:
        if self._free:
            return self._free.pop()
        self._next += 1
        return self._next - 1

    def give(self, handle: int) -> None:
        self._free.append(handle)


class _Mirrored:
    """The engine handles of one profile's members (or groups), by their control-plane ids."""

    def __init__(self, handles: Handles, delete: Callable[[int], None]):
        self._handles, self._delete = handles, delete
        self.of: dict[int, int] = {}

    def add(self, object_id: int) -> None:
        self.of[object_id] = self._handles.take()

    def remove(self, object_id: int) -> None:
        handle = self.of.pop(object_id)
        self._delete(handle)
        self._handles.give(handle)

    def clear(self) -> None:
        for object_id in list(self.of):
            self.remove(object_id)


class NativeActionProfile(st.ActionProfile):
    """An ActionProfile whose accepted member and group writes are mirrored into the engine.

    Each member and group has an engine handle; a group is mirrored as its selection list
    (`ProfileGroup.choices`, as member handles), so a packet picks exactly what the Python
    engine's `pick` would. A modified member keeps its handle: groups and entries naming it
    run the new action at once, as in the Python engine.
    """

    def __init__(self, schema: st.ActionProfileSchema, actions: dict[str, st.ActionSchema], engine: Engine,
                 action_ids: dict[str, int], member_handles: Handles, group_handles: Handles):
        super().__init__(schema, actions)
        self._engine, self._action_ids, self._param_widths = engine, action_ids, param_widths(actions)
        self._members = _Mirrored(member_handles, engine.member_delete)
        self._groups = _Mirrored(group_handles, engine.group_delete)

    def insert_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        super().insert_member(member_id, action, params)
        self._members.add(member_id)
        self._mirror_member(member_id)

    def modify_member(self, member_id: int, action: str, params: dict[str, int]) -> None:
        super().modify_member(member_id, action, params)
        self._mirror_member(member_id)

    def delete_member(self, member_id: int) -> None:
        super().delete_member(member_id)
        self._members.remove(member_id)

    def _mirror_member(self, member_id: int) -> None:
        member = self.members[member_id]
        self._engine.member_set(self._members.of[member_id], self._action_ids[member.action],
                                arg_words(self._param_widths[member.action], member.args))

    def insert_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        super().insert_group(group_id, members, max_size)
        self._groups.add(group_id)
        self._mirror_group(group_id)

    def modify_group(self, group_id: int, members: dict[int, int], max_size: int = 0) -> None:
        super().modify_group(group_id, members, max_size)
        self._mirror_group(group_id)

    def delete_group(self, group_id: int) -> None:
        super().delete_group(group_id)
        self._groups.remove(group_id)

    def _mirror_group(self, group_id: int) -> None:
        member_of = {m.handle: member_id for member_id, m in self.members.items()}
        self._engine.group_set(self._groups.of[group_id],
                               [self._members.of[member_of[m.handle]] for m in self.groups[group_id].choices])

    def engine_handles(self, entry: st.TableEntry) -> tuple[int, int]:
        """(member, group) engine handles of what an accepted entry names (-1: not that kind)."""
        return (self._members.of[entry.member_id] if entry.member_id is not None else -1,
                self._groups.of[entry.group_id] if entry.group_id is not None else -1)

    def clear(self) -> None:
        self._groups.clear()
        self._members.clear()
        super().clear()
