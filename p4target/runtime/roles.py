"""P4Runtime roles: what a client of a named role may write and receive.

The spec leaves a role's scope (`Role.config`, a protobuf Any) to the target. This target reads
Stratum's `stratum.P4RoleConfig` there, the one message finsy ships for it
(`finsy.proto.stratum1.p4_role_config_pb2`):

- `exclusive_p4_ids`: P4Info objects (tables, counters, meters, registers, action profiles,
  digests, value sets, externs) only this role writes; `shared_p4_ids`: objects it writes and
  other roles may too. An update of an object outside both, or of one another role holds
  exclusively, is refused with PERMISSION_DENIED. Multicast groups and clone sessions have no
  P4Info id: a role with a config cannot write them.
- `can_push_pipeline`: whether its primary may SetForwardingPipelineConfig.
- `receives_packet_ins` and `packet_in_filter` (a PacketIn metadata id and the value it must
  hold): which PacketIns its primary gets. Digests and idle-timeout notifications go to the roles
  whose scope holds the digest or table.

The default role (empty name) and a role whose primary sent no config have full pipeline access,
as the spec says. A role's scope is the config its current primary announced.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from finsy.proto import p4r
from finsy.proto.stratum1 import p4_role_config_pb2
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError

from p4target.errors import shorten
from p4target.runtime.errors import RuntimeStatus

P4RoleConfig = p4_role_config_pb2.P4RoleConfig


@dataclass(frozen=True)
class RoleScope:
    """What one role's config allows (see the module docstring)."""

    exclusive: frozenset[int]
    shared: frozenset[int]
    can_push_pipeline: bool
    receives_packet_ins: bool
    packet_in_filter: tuple[int, bytes] | None

    @classmethod
    def parse(cls, role: str, config: any_pb2.Any) -> RoleScope:
        """The scope of `config`; INVALID_ARGUMENT for a config of another message type."""
        message = P4RoleConfig()
        try:
            unpacked = config.Unpack(message)
        except DecodeError:
            raise RuntimeStatus(grpc.StatusCode.INVALID_ARGUMENT, f"role '{shorten(role)}': its config does not parse "
                                f"as a {P4RoleConfig.DESCRIPTOR.full_name}") from None
        if not unpacked:
            raise RuntimeStatus(grpc.StatusCode.INVALID_ARGUMENT,
                                f"role '{shorten(role)}': config of type {shorten(config.TypeName()) or '(none)'} is not "
                                f"supported; this target takes {P4RoleConfig.DESCRIPTOR.full_name}")
        packet_filter = None
        if message.HasField("packet_in_filter"):
            packet_filter = (message.packet_in_filter.metadata_id, message.packet_in_filter.value)
        return cls(frozenset(message.exclusive_p4_ids), frozenset(message.shared_p4_ids),
                   message.can_push_pipeline, message.receives_packet_ins, packet_filter)

    def covers(self, p4_id: int | None) -> bool:
        return p4_id is not None and (p4_id in self.exclusive or p4_id in self.shared)

    def receives(self, message: p4r.StreamMessageResponse) -> bool:
        """Whether this role's primary gets a server-initiated stream message."""
        kind = message.WhichOneof("update")
        if kind == "packet":
            if not self.receives_packet_ins:
                return False
            if self.packet_in_filter is None:
                return True
            metadata_id, value = self.packet_in_filter
            return any(m.metadata_id == metadata_id and m.value == value for m in message.packet.metadata)
        if kind == "digest":
            return self.covers(message.digest.digest_id)
        if kind == "idle_timeout_notification":
            return all(self.covers(e.table_id) for e in message.idle_timeout_notification.table_entry)
        return True


def entity_p4_id(entity: p4r.Entity) -> int | None:
    """The P4Info id of the object an entity belongs to; None for multicast groups and clone sessions."""
    kind = entity.WhichOneof("entity")
    if kind is None or kind == "packet_replication_engine_entry":
        return None
    inner = getattr(entity, kind)
    for field in ("table_id", "action_profile_id", "counter_id", "meter_id", "register_id", "digest_id",
                  "value_set_id", "extern_id"):
        if hasattr(inner, field):
            return int(getattr(inner, field))
    if hasattr(inner, "table_entry"):  # direct counters and meters belong to their table
        return int(inner.table_entry.table_id)
    return None


def check_writable(role: str, scopes: dict[str, RoleScope], updates: Sequence[p4r.Update]) -> None:
    """PERMISSION_DENIED naming the first update whose object `role` may not write."""
    scope = scopes.get(role)
    if not role or scope is None:
        return
    held_elsewhere = {p4_id for name, other in scopes.items() if name != role for p4_id in other.exclusive}
    for index, update in enumerate(updates):
        p4_id = entity_p4_id(update.entity)
        if not scope.covers(p4_id) or p4_id in held_elsewhere:
            what = update.entity.WhichOneof("entity")
            where = f"P4 id {p4_id}" if p4_id is not None else "no P4 id"
            raise RuntimeStatus(grpc.StatusCode.PERMISSION_DENIED,
                                f"role '{shorten(role)}' may not write update {index} ({what}, {where}): "
                                + ("another role holds it exclusively" if p4_id in held_elsewhere
                                   else "outside the role's config"))
