"""P4Runtime's packet replication engine entries (multicast groups, clone sessions) <-> the switch state's.

Reads answer in the form the client wrote (P4Runtime's read-write symmetry): a replica written with
`egress_port` is read back with `egress_port`, one written with `port` with `port`.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

from finsy.proto import p4r

from p4target import state as st
from p4target.runtime import codec
from p4target.runtime.errors import invalid, state_call, unimplemented

INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE


class ReplicationTranslator:
    """The replication part of a Translator (same state)."""

    def __init__(self, state: st.State):
        self._state = state
        # ("multicast"|"clone", id) -> {(port, instance): True if written as `egress_port`}
        self._replica_forms: dict[tuple[str, int], dict[tuple[int, int], bool]] = {}

    def write(self, update_type: int, pre: p4r.PacketReplicationEngineEntry) -> None:
        """Insert, modify or delete a multicast group or clone session."""
        kind = pre.WhichOneof("type")
        if kind == "multicast_group_entry":
            group = pre.multicast_group_entry
            key = ("multicast", group.multicast_group_id)
            if group.metadata:
                raise unimplemented("multicast group metadata is not supported")
            if update_type == DELETE:
                state_call(self._state.mc_group_delete, group.multicast_group_id)
                self._replica_forms.pop(key, None)
                return
            forms = _replica_forms_in(group.replicas)
            calls: dict[int, Callable[..., None]] = {INSERT: self._state.mc_group_insert, MODIFY: self._state.mc_group_modify}
            state_call(calls[update_type], group.multicast_group_id, list(forms))
        elif kind == "clone_session_entry":
            session = pre.clone_session_entry
            key = ("clone", session.session_id)
            if update_type == DELETE:
                state_call(self._state.clone_session_delete, session.session_id)
                self._replica_forms.pop(key, None)
                return
            if session.packet_length_bytes < 0:
                raise invalid(f"clone session {session.session_id}: negative packet_length_bytes")
            if session.session_id == 0:
                raise invalid("clone session id 0 is reserved")
            forms = _replica_forms_in(session.replicas)
            calls = {INSERT: self._state.clone_session_insert, MODIFY: self._state.clone_session_modify}
            state_call(calls[update_type], session.session_id, list(forms), session.packet_length_bytes)
        else:
            raise invalid("packet replication engine entry has neither a multicast group nor a clone session")
        self._replica_forms[key] = forms

    def _replicas_out(self, key: tuple[str, int], replicas: list[tuple[int, int]]) -> list[p4r.Replica]:
        """Replicas in the form each was written in (`port` bytes when not written over P4Runtime)."""
        forms = self._replica_forms.get(key, {})
        out = []
        for port, instance in replicas:
            if forms.get((port, instance)):
                out.append(p4r.Replica(egress_port=port, instance=instance))
            else:
                out.append(p4r.Replica(port=codec.encode(port), instance=instance))
        return out

    def read(self, pre: p4r.PacketReplicationEngineEntry) -> Iterator[p4r.Entity]:
        """The multicast groups or clone sessions a (possibly wildcard, id 0) read asks for."""
        kind = pre.WhichOneof("type")
        if kind == "multicast_group_entry":
            wanted = pre.multicast_group_entry.multicast_group_id
            for group_id, replicas in sorted(self._state.multicast_groups.items()):
                if wanted in (0, group_id):
                    group = p4r.MulticastGroupEntry(multicast_group_id=group_id,
                                                    replicas=self._replicas_out(("multicast", group_id), replicas))
                    yield p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        multicast_group_entry=group))
        elif kind == "clone_session_entry":
            wanted = pre.clone_session_entry.session_id
            for session_id, session in sorted(self._state.clone_sessions.items()):
                if wanted in (0, session_id):
                    clone = p4r.CloneSessionEntry(session_id=session_id,
                                                  replicas=self._replicas_out(("clone", session_id), session.replicas),
                                                  packet_length_bytes=session.packet_length)
                    yield p4r.Entity(packet_replication_engine_entry=p4r.PacketReplicationEngineEntry(
                        clone_session_entry=clone))
        else:
            raise invalid("packet replication engine read needs a multicast group or clone session entry")


def _replica_forms_in(replicas) -> dict[tuple[int, int], bool]:
    """{(port, instance): written as `egress_port`} of a replica list, in order; rejects duplicates."""
    out: dict[tuple[int, int], bool] = {}
    for replica in replicas:
        by_egress_port = replica.WhichOneof("port_kind") != "port"
        port = replica.egress_port if by_egress_port else codec.decode(replica.port, 32, "replica port")
        if replica.backup_replicas:
            raise unimplemented("backup replicas are not supported")
        if (port, replica.instance) in out:
            raise invalid(f"replica (port {port}, instance {replica.instance}) listed twice")
        out[(port, replica.instance)] = by_egress_port
    return out
