"""The packet replication engine's state: multicast groups and clone sessions, validated before a write."""
from __future__ import annotations

from dataclasses import dataclass

from p4target.state.errors import AlreadyExists, InvalidArgument, NotFound, check_width


@dataclass
class CloneSession:
    replicas: list[tuple[int, int]]  # (egress_port, instance)
    packet_length: int = 0  # truncate clones to this many bytes; 0 = whole packet


class Replication:
    """Multicast groups (group id -> (egress_port, rid) replicas) and clone sessions; the dicts are never
    replaced (the Python pipeline reads them per packet). The native engine's twin mirrors every write into it
    (p4target/native/store/replication.py)."""

    def __init__(self) -> None:
        self.multicast_groups: dict[int, list[tuple[int, int]]] = {}
        self.clone_sessions: dict[int, CloneSession] = {}

    @staticmethod
    def _check_replicas(what: str, replicas: list[tuple[int, int]]) -> list[tuple[int, int]]:
        out = []
        for item in replicas:
            if not (isinstance(item, tuple) and len(item) == 2):
                raise InvalidArgument(f"{what}: replica {item!r} is not (port, id)")
            port, rid = item
            check_width(f"{what} port", port, 9)
            check_width(f"{what} instance", rid, 16)
            out.append((port, rid))
        return out

    def mc_group_insert(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        """Create multicast group `group_id` with (egress_port, rid) replicas."""
        check_width("multicast group id", group_id, 16)
        if group_id == 0:
            raise InvalidArgument("multicast group id 0 is reserved (no multicast)")
        reps = self._check_replicas(f"multicast group {group_id}", replicas)
        if group_id in self.multicast_groups:
            raise AlreadyExists(f"multicast group {group_id} already exists")
        self.multicast_groups[group_id] = reps

    def mc_group_modify(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        reps = self._check_replicas(f"multicast group {group_id}", replicas)
        if group_id not in self.multicast_groups:
            raise NotFound(f"multicast group {group_id} does not exist")
        self.multicast_groups[group_id] = reps

    def mc_group_delete(self, group_id: int) -> None:
        if self.multicast_groups.pop(group_id, None) is None:
            raise NotFound(f"multicast group {group_id} does not exist")

    def clone_session_insert(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        """Create clone session `session_id`: (egress_port, instance) replicas, optional truncation."""
        check_width("clone session id", session_id, 32)
        reps = self._check_replicas(f"clone session {session_id}", replicas)
        check_width(f"clone session {session_id} packet_length", packet_length, 32)
        if session_id in self.clone_sessions:
            raise AlreadyExists(f"clone session {session_id} already exists")
        self.clone_sessions[session_id] = CloneSession(reps, packet_length)

    def clone_session_modify(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        reps = self._check_replicas(f"clone session {session_id}", replicas)
        check_width(f"clone session {session_id} packet_length", packet_length, 32)
        if session_id not in self.clone_sessions:
            raise NotFound(f"clone session {session_id} does not exist")
        self.clone_sessions[session_id] = CloneSession(reps, packet_length)

    def clone_session_delete(self, session_id: int) -> None:
        if self.clone_sessions.pop(session_id, None) is None:
            raise NotFound(f"clone session {session_id} does not exist")

    def clear(self) -> None:
        """No group and no session (a pipeline reset)."""
        self.multicast_groups.clear()
        self.clone_sessions.clear()
