"""The P4Runtime request log: every RPC and stream message in protobuf text format, like BMv2's
`s1-p4runtime-requests.txt`, bounded in the size of each entry and of the file.

Device configs are shown by size and kind only, large Write batches by their first LOGGED_UPDATES
updates and a count, large Reads by their first LOGGED_UPDATES entities, PacketOut payloads by
their first LOGGED_PAYLOAD bytes and their size.
"""
from __future__ import annotations

import os
import threading
import time

from finsy.proto import p4r
from google.protobuf import text_format

from p4target.device_config import bmv2_json_in
from p4target.limits import DEFAULT_LOG_MAX_MB

LOGGED_UPDATES = 16  # updates of a Write (entities of a Read) shown in the request log
LOGGED_PAYLOAD = 256  # bytes of a PacketOut's payload shown


class RequestLog:
    """Appends requests to a text file (thread-safe); does nothing without a path. Past `max_bytes`
    the file is renamed PATH.1 (replacing the one before) and a new one begun, so it stays bounded.

    A Write shows its first LOGGED_UPDATES updates and the count of the rest: protobuf
    text formatting is pure Python and, done for every update, cost more than applying it.
    The same goes for a Read's entities; a PacketOut shows the start of its payload.
    """

    def __init__(self, path: str | None, max_bytes: int = DEFAULT_LOG_MAX_MB << 20):
        self._path = path
        self._max_bytes = max_bytes
        self._file = open(path, "a", encoding="utf-8") if path else None
        self._lock = threading.Lock()

    def write(self, what: str, message) -> None:
        if self._file is None:
            return
        message, note = _shown(message)
        now = time.time()
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"
        with self._lock:
            self._file.write(f"[{stamp}] {what}\n{text_format.MessageToString(message)}{note}---\n")
            self._file.flush()
            if self._path is not None and self._file.tell() >= self._max_bytes:
                self._file.close()
                os.replace(self._path, self._path + ".1")
                self._file = open(self._path, "a", encoding="utf-8")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _shown(message):
    """(what the log shows of `message`, a note on what it leaves out)."""
    if isinstance(message, p4r.SetForwardingPipelineConfigRequest) and message.config.p4_device_config:
        shown = p4r.SetForwardingPipelineConfigRequest()
        shown.CopyFrom(message)
        config = message.config.p4_device_config
        kind = "P4 source" if bmv2_json_in(config) is None else "BMv2 JSON"
        shown.config.p4_device_config = f"<{len(config)} bytes of {kind}>".encode()
        return shown, ""
    if isinstance(message, p4r.WriteRequest) and len(message.updates) > LOGGED_UPDATES:
        trimmed = p4r.WriteRequest(device_id=message.device_id, role=message.role, atomicity=message.atomicity,
                                   updates=message.updates[:LOGGED_UPDATES])
        if message.HasField("election_id"):
            trimmed.election_id.CopyFrom(message.election_id)
        return trimmed, f"# ... and {len(message.updates) - LOGGED_UPDATES} more updates (not shown)\n"
    if isinstance(message, p4r.ReadRequest) and len(message.entities) > LOGGED_UPDATES:
        trimmed_read = p4r.ReadRequest(device_id=message.device_id, role=message.role,
                                       entities=message.entities[:LOGGED_UPDATES])
        return trimmed_read, f"# ... and {len(message.entities) - LOGGED_UPDATES} more entities (not shown)\n"
    if isinstance(message, p4r.StreamMessageRequest) and len(message.packet.payload) > LOGGED_PAYLOAD:
        cut = p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=message.packet.payload[:LOGGED_PAYLOAD],
                                                            metadata=message.packet.metadata))
        return cut, f"# ... payload of {len(message.packet.payload)} bytes, the first {LOGGED_PAYLOAD} shown\n"
    return message, ""
