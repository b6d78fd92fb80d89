"""P4Runtime v1 gRPC server of the embedded target.

Use from a switch process:

    server = RuntimeServer(device_id=1, address="127.0.0.1:50001", cpu_port=255,
                           on_pipeline_set=switch.use_pipeline,     # called with each new Pipeline
                           packet_out=switch.inject,                # (port, frame) -> ingress
                           log_path="logs/s1-p4runtime-requests.txt")
    port = server.start()                     # returns the bound TCP port (address may use :0)
    # TLS: RuntimeServer(..., credentials=p4target.tls.server_credentials(files, require_client_auth))
    server.load_source(text, "prog.p4")       # optional: a pipeline before any client sets one
    server.packet_in(255, frame)              # a frame the pipeline sent to the CPU port
    server.stop()

- PacketOut: the frame handed to `packet_out(cpu_port, frame)` is the `@controller_header
  ("packet_out")` header built from the metadata, then the payload: it enters ingress on
  the CPU port, as on BMv2. Without a `packet_out` hook the server runs the frame through
  the current pipeline itself and turns outputs on the CPU port into PacketIns (outputs
  to other ports are dropped: there are no ports); that is what in-process tests use.
- PacketIn: `packet_in(port, frame)` strips and parses the `packet_in` header and sends
  the PacketIn to the primary client of every role. Each client has STREAM_QUEUE messages
  (PacketIns, digest lists, notifications) waiting at most; past that its messages are
  dropped and counted (`stream_drops`, one log line), so a client that stops reading
  holds up neither the data path nor the other clients.
- Digests: a poller drains the state's digest queue every `digest_interval` seconds and
  sends DigestLists for the digests a client configured with a DigestEntry.
- Idle timeouts: every `idle_sweep_interval` seconds (1 s, BMv2's ageing sweep) the same
  poller sends an IdleTimeoutNotification per `support_timeout` table whose entries have not
  been hit for their `idle_timeout_ns`, to the primary client of every role.
- Thread-safety: writes hold `pipeline.state.lock`, the lock the pipeline takes per packet.

Request log: when `log_path` is given every RPC and stream message is appended there in
protobuf text format, like BMv2's `s1-p4runtime-requests.txt` (device configs are shown
by size and kind only, large Write batches by their first LOGGED_UPDATES updates and a count).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures

import grpc
from finsy.proto import p4r, p4r_grpc
from google.protobuf import text_format

from p4target.device_config import bmv2_json_in
from p4target.limits import DEFAULT_LOG_MAX_MB
from p4target.runtime.arbitration import STREAM_QUEUE, Arbitration, Session, election_id_of
from p4target.runtime.device import Device
from p4target.runtime.errors import RuntimeStatus, abort, batch_status, code_number
from p4target.runtime.roles import RoleScope

P4RUNTIME_API_VERSION = "1.5.0"
READ_CHUNK = 1000  # entities per ReadResponse
LOGGED_UPDATES = 16  # updates of a Write shown in the request log

log = logging.getLogger("aggnet.p4runtime")


class RequestLog:
    """Appends requests to a text file (thread-safe); does nothing without a path. Past `max_bytes`
    the file is renamed PATH.1 (replacing the one before) and a new one begun, so it stays bounded.

    A Write shows its first LOGGED_UPDATES updates and the count of the rest: protobuf
    text formatting is pure Python and, done for every update, cost more than applying it.
    """

    def __init__(self, path: str | None, max_bytes: int = DEFAULT_LOG_MAX_MB << 20):
        self._path = path
        self._max_bytes = max_bytes
        self._file = open(path, "a", encoding="utf-8") if path else None
        self._lock = threading.Lock()

    def write(self, what: str, message) -> None:
        if self._file is None:
            return
        note = ""
        if isinstance(message, p4r.SetForwardingPipelineConfigRequest) and message.config.p4_device_config:
            shown = p4r.SetForwardingPipelineConfigRequest()
            shown.CopyFrom(message)
            config = message.config.p4_device_config
            kind = "P4 source" if bmv2_json_in(config) is None else "BMv2 JSON"
            shown.config.p4_device_config = f"<{len(config)} bytes of {kind}>".encode()
            message = shown
        elif isinstance(message, p4r.WriteRequest) and len(message.updates) > LOGGED_UPDATES:
            note = f"# ... and {len(message.updates) - LOGGED_UPDATES} more updates (not shown)\n"
            trimmed = p4r.WriteRequest()
            trimmed.CopyFrom(message)
            del trimmed.updates[LOGGED_UPDATES:]
            message = trimmed
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


class RuntimeServer(p4r_grpc.P4RuntimeServicer):
    """One device's P4Runtime service on a gRPC server; see the module docstring."""

    def __init__(self, device_id: int, address: str, cpu_port: int = 255,
                 on_pipeline_set: Callable[[object], None] | None = None,
                 packet_out: Callable[[int, bytes], None] | None = None,
                 log_path: str | None = None, digest_interval: float = 0.02, idle_sweep_interval: float = 1.0,
                 max_workers: int = 32, engine: str = "python", credentials: grpc.ServerCredentials | None = None,
                 log_max_bytes: int = DEFAULT_LOG_MAX_MB << 20):
        self.device = Device(device_id, on_pipeline_set, engine)
        self.address = address
        self._credentials = credentials
        self.cpu_port = cpu_port
        self.arbitration = Arbitration()
        self._packet_out = packet_out or self._process_locally
        self._log = RequestLog(log_path, log_max_bytes)
        self._digest_interval = digest_interval
        self._idle_sweep_interval = idle_sweep_interval
        self._sessions: set[Session] = set()
        self._sessions_lock = threading.Lock()
        self._stopping = threading.Event()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"))
        p4r_grpc.add_P4RuntimeServicer_to_server(self, self._server)
        self._poller: threading.Thread | None = None
        self.stream_drops = 0  # PacketIn/digest/notification messages dropped for clients that did not read

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        """Start serving; returns the bound port. Raises RuntimeError if the address is taken."""
        if self._credentials is None:
            port = self._server.add_insecure_port(self.address)
        else:
            port = self._server.add_secure_port(self.address, self._credentials)
        if port == 0:
            raise RuntimeError(f"cannot listen for P4Runtime on {self.address}")
        self._server.start()
        self._poller = threading.Thread(target=self._poll, name="p4rt-poller", daemon=True)
        self._poller.start()
        return port

    def stop(self, grace: float | None = 0.5) -> None:
        """Close every stream and stop serving; safe to call twice."""
        self._stopping.set()
        with self._sessions_lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.close()
        self._server.stop(grace).wait()
        if self._poller is not None:
            self._poller.join()
        self._log.close()

    def load_source(self, source: str, filename: str = "program.p4") -> None:
        """Commit a pipeline from P4 source before any client does (like simple_switch_grpc PROG).

        Raises RuntimeStatus (INVALID_ARGUMENT) whose message is the "FILE:LINE:COL: error: ..." line.
        """
        self.device.load_source(source, filename)

    @property
    def pipeline(self):
        """The committed Pipeline, or None."""
        current = self.device.current
        return None if current is None else current.pipeline

    # ------------------------------------------------------------------ packet I/O

    def packet_in(self, port: int, frame: bytes) -> None:
        """Deliver a frame the pipeline sent to the CPU port to the primary clients."""
        if self.device.current is None:
            return
        self._send_to_primaries([p4r.StreamMessageResponse(packet=self.device.packet_in_message(frame))])

    def _process_locally(self, port: int, frame: bytes) -> None:
        pipeline = self.pipeline
        if pipeline is None:
            return
        for out_port, data in pipeline.process(port, frame):
            if out_port == self.cpu_port:
                self.packet_in(out_port, data)
        self._send_digests()

    def _poll(self) -> None:
        """Background sends: digest lists every digest_interval, idle timeouts every idle_sweep_interval."""
        next_sweep = time.monotonic() + self._idle_sweep_interval
        while not self._stopping.wait(self._digest_interval):
            self._send_digests()
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + self._idle_sweep_interval
                self._send_to_primaries(p4r.StreamMessageResponse(idle_timeout_notification=n)
                                        for n in self.device.idle_timeout_notifications())

    def _send_to_primaries(self, messages) -> None:
        """Offer each message to the primaries; one that stopped reading loses it (counted, one warning)."""
        for message in messages:
            for session in self.arbitration.recipients(message):
                if not session.offer(message):
                    self.stream_drops += 1
                    if session.dropped == 1:
                        log.warning("P4Runtime client of role '%s' (election id %s) is not reading its stream: "
                                    "dropping its PacketIn/digest messages past %d queued",
                                    session.role, session.election_id, STREAM_QUEUE)

    def _send_digests(self) -> None:
        self._send_to_primaries(p4r.StreamMessageResponse(digest=d) for d in self.device.digest_lists())

    # ------------------------------------------------------------------ unary RPCs

    def Capabilities(self, request, context):
        self._log.write("Capabilities", request)
        return p4r.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        self._log.write("SetForwardingPipelineConfig", request)
        try:
            self.device.check_device_id(request.device_id)
            self.arbitration.check_primary(request.role, election_id_of(request))
            self.arbitration.check_pipeline(request.role)
            self.device.set_pipeline(request.action, request.config)
        except RuntimeStatus as failure:
            abort(context, failure.code, failure.message)
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        self._log.write("GetForwardingPipelineConfig", request)
        try:
            self.device.check_device_id(request.device_id)
            config = self.device.get_pipeline(request.response_type)
        except RuntimeStatus as failure:
            abort(context, failure.code, failure.message)
        return p4r.GetForwardingPipelineConfigResponse(config=config)

    def Write(self, request, context):
        self._log.write("Write", request)
        try:
            self.device.check_device_id(request.device_id)
            self.arbitration.check_primary(request.role, election_id_of(request))
            self.arbitration.check_write(request.role, list(request.updates))
            failures = self.device.write(request.updates, request.atomicity)
        except RuntimeStatus as failure:
            abort(context, failure.code, failure.message)
        if any(failures):
            status = batch_status(failures)
            abort(context, grpc.StatusCode.UNKNOWN, status.message, status)
        return p4r.WriteResponse()

    def Read(self, request, context) -> Iterator[p4r.ReadResponse]:
        self._log.write("Read", request)
        try:
            self.device.check_device_id(request.device_id)
            entities = self.arbitration.readable(request.role, self.device.read(request.entities))
        except RuntimeStatus as failure:
            abort(context, failure.code, failure.message)
        for start in range(0, max(len(entities), 1), READ_CHUNK):
            yield p4r.ReadResponse(entities=entities[start:start + READ_CHUNK])

    # ------------------------------------------------------------------ stream

    def StreamChannel(self, request_iterator, context) -> Iterator[p4r.StreamMessageResponse]:
        session = Session(self.device.device_id)
        with self._sessions_lock:
            self._sessions.add(session)
        context.add_callback(session.close)
        reader = threading.Thread(target=self._read_stream, args=(request_iterator, session),
                                  name="p4rt-stream", daemon=True)
        reader.start()
        try:
            yield from session.outgoing()
        except RuntimeStatus as failure:
            abort(context, failure.code, failure.message)
        finally:
            if session.dropped:
                log.warning("P4Runtime stream of role '%s' (election id %s) closed: %d PacketIn/digest messages "
                            "were dropped while it did not read", session.role, session.election_id, session.dropped)
            self.arbitration.remove(session)
            with self._sessions_lock:
                self._sessions.discard(session)

    def _read_stream(self, request_iterator, session: Session) -> None:
        """Handle a client's stream messages until it closes; then end our side too.

        The session leaves arbitration as soon as its stream ends (as BMv2's server does), before our
        side is wound down: a client that half-closes and at once reconnects with the same election id
        (the tutorials' PTF tests, every setUp) becomes primary instead of finding the id in use.
        """
        try:
            for request in request_iterator:
                self._log.write("StreamChannel", request)
                kind = request.WhichOneof("update")
                if kind == "arbitration":
                    self._arbitrate(session, request.arbitration)
                elif kind == "packet":
                    self._packet_out_message(session, request.packet)
                elif kind in ("digest_ack", None):
                    pass  # digests are not re-sent, so acks need no bookkeeping
                else:
                    self._stream_error(session, grpc.StatusCode.UNIMPLEMENTED, f"stream message {kind} is not supported")
        except RuntimeStatus as failure:
            self.arbitration.remove(session)
            session.close(failure)
            return
        except grpc.RpcError:
            pass  # the client went away
        self.arbitration.remove(session)
        session.close()

    def _arbitrate(self, session: Session, update: p4r.MasterArbitrationUpdate) -> None:
        self.device.check_device_id(update.device_id)
        role = update.role
        scope = RoleScope.parse(role.name, role.config) if role.HasField("config") else None
        self.arbitration.update(session, role.name, election_id_of(update), scope)

    def _packet_out_message(self, session: Session, packet: p4r.PacketOut) -> None:
        if not self.arbitration.is_primary(session):
            return self._stream_error(session, grpc.StatusCode.PERMISSION_DENIED,
                                      "PacketOut from a client that is not primary", packet)
        try:
            frame = self.device.packet_out_frame(packet)
        except RuntimeStatus as failure:
            return self._stream_error(session, failure.code, failure.message, packet)
        self._packet_out(self.cpu_port, frame)

    @staticmethod
    def _stream_error(session: Session, code: grpc.StatusCode, message: str, packet: p4r.PacketOut | None = None) -> None:
        error = p4r.StreamError(canonical_code=code_number(code), message=message)
        if packet is not None:
            error.packet_out.packet_out.CopyFrom(packet)
        session.send(p4r.StreamMessageResponse(error=error))

