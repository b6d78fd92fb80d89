"""The native engine's packet replication state (the twin of p4target/state/replication.py): every accepted
multicast group and clone session write mirrored into the engine."""
from __future__ import annotations

from p4target import state as st
from p4target.native.binding import Engine


class NativeReplication(st.Replication):
    """Replication whose groups and sessions the engine's replication engine also holds."""

    def __init__(self, engine: Engine):
        super().__init__()
        self._engine = engine

    def mc_group_insert(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        super().mc_group_insert(group_id, replicas)
        self._engine.mc_set(group_id, self.multicast_groups[group_id])

    def mc_group_modify(self, group_id: int, replicas: list[tuple[int, int]]) -> None:
        super().mc_group_modify(group_id, replicas)
        self._engine.mc_set(group_id, self.multicast_groups[group_id])

    def mc_group_delete(self, group_id: int) -> None:
        super().mc_group_delete(group_id)
        self._engine.mc_set(group_id, None)

    def clone_session_insert(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        super().clone_session_insert(session_id, replicas, packet_length)
        self._engine.clone_set(session_id, self.clone_sessions[session_id].replicas, packet_length)

    def clone_session_modify(self, session_id: int, replicas: list[tuple[int, int]], packet_length: int = 0) -> None:
        super().clone_session_modify(session_id, replicas, packet_length)
        self._engine.clone_set(session_id, self.clone_sessions[session_id].replicas, packet_length)

    def clone_session_delete(self, session_id: int) -> None:
        super().clone_session_delete(session_id)
        self._engine.clone_set(session_id, None)

    def clear(self) -> None:
        groups, sessions = list(self.multicast_groups), list(self.clone_sessions)
        super().clear()
        for g in groups:
            self._engine.mc_set(g, None)
        for s in sessions:
            self._engine.clone_set(s, None)
