"""Client arbitration: who is primary for each role (P4Runtime spec, section "Client Arbitration").

Each StreamChannel is a `Session` (p4target.runtime.stream). Per role, the session that announced an election id
greater than or equal to the highest one ever seen for that role becomes primary; every
other session is a backup. When the primary changes, every session of the role gets a
MasterArbitrationUpdate (OK for the primary, ALREADY_EXISTS for backups, both carrying the
primary's election id). When the primary leaves, the backups get NOT_FOUND with the highest
election id seen, so one of them can claim primacy by re-announcing that id (what finsy does).
Two sessions of one role may not use the same election id: the second stream is ended with
INVALID_ARGUMENT ("Election id already in use"). A session without an election id is a
permanent backup. A role's scope is the config (p4target.runtime.roles) its primary announced:
`check_write` and `check_pipeline` enforce it, `recipients` picks who gets a stream message.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence

import grpc
from finsy.proto import p4r, rpc_status

from p4target.errors import shorten
from p4target.runtime.errors import RuntimeStatus, code_number
from p4target.runtime.roles import RoleScope, check_writable, entity_p4_id
from p4target.runtime.stream import Session


def _uint128(value: int) -> p4r.Uint128:
    return p4r.Uint128(high=value >> 64, low=value & (2**64 - 1))


def election_id_of(message: p4r.MasterArbitrationUpdate | p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest) -> int | None:
    """The 128-bit election id of a message, None when the field is unset."""
    if not message.HasField("election_id"):
        return None
    return (message.election_id.high << 64) | message.election_id.low


class Arbitration:
    """Primary/backup bookkeeping for all roles of one device; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sessions: list[Session] = []
        self._primary: dict[str, Session] = {}
        self._highest: dict[str, int] = {}
        self._scopes: dict[str, RoleScope] = {}  # per role with a config: its primary's

    def update(self, session: Session, role: str, election_id: int | None, scope: RoleScope | None = None) -> None:
        """Apply a MasterArbitrationUpdate from `session` (its role config as `scope`) and notify whoever must know.

        Raises RuntimeStatus(INVALID_ARGUMENT) when another session of the role uses the id.
        """
        with self._lock:
            for other in self._sessions:
                if other is not session and other.role == role and election_id is not None \
                        and other.election_id == election_id:
                    raise RuntimeStatus(grpc.StatusCode.INVALID_ARGUMENT,
                                        f"Election id {election_id} already in use by another client of role '{shorten(role)}'")
            if session.arbitrated:
                self._leave(session)
            session.role, session.election_id, session.arbitrated = role, election_id, True
            session.scope = scope
            self._sessions.append(session)
            highest = self._highest.get(role)
            if election_id is not None and (highest is None or election_id >= highest):
                self._highest[role] = election_id
                self._primary[role] = session
                if scope is None:
                    self._scopes.pop(role, None)
                else:
                    self._scopes[role] = scope
                self._notify_role(role)
            else:
                session.send(self._message_for(session))

    def remove(self, session: Session) -> None:
        """Forget a closed stream; if it was a primary, tell the role's backups."""
        with self._lock:
            if session.arbitrated:
                self._leave(session)
                session.arbitrated = False

    def _leave(self, session: Session) -> None:
        self._sessions.remove(session)
        if self._primary.get(session.role) is session:
            del self._primary[session.role]
            self._notify_role(session.role)

    def check_primary(self, role: str, election_id: int | None) -> None:
        """Raise PERMISSION_DENIED unless `election_id` is the role's current primary's."""
        with self._lock:
            primary = self._primary.get(role)
            if primary is None or election_id is None or primary.election_id != election_id:
                who = "no primary client" if primary is None else f"primary election id is {primary.election_id}"
                raise RuntimeStatus(grpc.StatusCode.PERMISSION_DENIED,
                                    f"Not primary: election id {election_id} for role '{shorten(role)}' ({who})")

    def check_write(self, role: str, updates: Sequence[p4r.Update]) -> None:
        """Raise PERMISSION_DENIED when an update is outside the role's scope."""
        with self._lock:
            scopes = dict(self._scopes)
        check_writable(role, scopes, updates)

    def readable(self, role: str, entities: list[p4r.Entity]) -> list[p4r.Entity]:
        """The entities a Read naming `role` returns: all of them, or those in the role's scope."""
        with self._lock:
            scope = self._scopes.get(role) if role else None
        return entities if scope is None else [e for e in entities if scope.covers(entity_p4_id(e))]

    def check_pipeline(self, role: str) -> None:
        """Raise PERMISSION_DENIED when the role's config does not let it push a pipeline."""
        with self._lock:
            scope = self._scopes.get(role) if role else None
        if scope is not None and not scope.can_push_pipeline:
            raise RuntimeStatus(grpc.StatusCode.PERMISSION_DENIED,
                                f"role '{shorten(role)}' may not set the forwarding pipeline (its config has no "
                                "can_push_pipeline)")

    def is_primary(self, session: Session) -> bool:
        with self._lock:
            return self._primary.get(session.role) is session

    def recipients(self, message: p4r.StreamMessageResponse) -> list[Session]:
        """Who gets a PacketIn, digest or idle-timeout notification: every role's primary whose scope takes it."""
        with self._lock:
            return [s for role, s in self._primary.items()
                    if role not in self._scopes or self._scopes[role].receives(message)]

    def _notify_role(self, role: str) -> None:
        for session in self._sessions:
            if session.role == role:
                session.send(self._message_for(session))

    def _message_for(self, session: Session) -> p4r.StreamMessageResponse:
        primary = self._primary.get(session.role)
        if primary is session:
            code, text, shown = grpc.StatusCode.OK, "Is primary", session.election_id
        elif primary is not None:
            code, text, shown = grpc.StatusCode.ALREADY_EXISTS, "Is backup", primary.election_id
        else:
            code, text, shown = grpc.StatusCode.NOT_FOUND, "No primary", self._highest.get(session.role)
        update = p4r.MasterArbitrationUpdate(device_id=session.device_id,
                                             status=rpc_status.Status(code=code_number(code), message=text))
        if session.role:
            update.role.name = session.role
        if shown is not None:
            update.election_id.CopyFrom(_uint128(shown))
        return p4r.StreamMessageResponse(arbitration=update)
