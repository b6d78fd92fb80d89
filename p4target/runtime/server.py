"""P4Runtime v1 gRPC server of the embedded target.

Use from a switch process:

    server = RuntimeServer(device_id=1, address="127.0.0.1:50001", cpu_port=255,
                           on_pipeline_set=switch.use_pipeline,     # called with each new Pipeline
                           packet_out=switch.inject,                # (port, frame) -> False if it was dropped
                           log_path="logs/s1-p4runtime-requests.txt")
    port = server.start()                     # returns the bound TCP port (address may use :0)
    # TLS: RuntimeServer(..., credentials=p4target.runtime.tls.server_credentials(files, require_client_auth))
    server.load_source(text, "prog.p4")       # optional: a pipeline before any client sets one
    server.packet_in(255, frame)              # a frame the pipeline sent to the CPU port
    server.stop()                             # returns within grace + STOP_MARGIN_S, whatever clients do

Serving many clients fairly: one asyncio event loop on a thread of its own serves every call
(grpc.aio), so a stream that sends nothing holds no thread, only its queue. What a request does
(compile, write, read, a PacketOut) runs on a pool of WORKERS threads, one step at a time, so a
slow request never blocks the loop. At most MAX_STREAMS StreamChannels are open at once: the
next one is refused with RESOURCE_EXHAUSTED ("Too many connections", simple_switch_grpc's words);
other calls are served beside them, at most MAX_CALLS at once (gRPC refuses more). A request is
at most GRPC_MESSAGE_BYTES (p4target.limits states every cap).

- PacketOut: the frame handed to `packet_out(cpu_port, frame)` is the `@controller_header
  ("packet_out")` header built from the metadata, then the payload: it enters ingress on
  the CPU port, as on BMv2. A stream's PacketOuts are taken one at a time, so a client
  sending faster than the switch takes them is held back by gRPC's flow control. When the
  switch's queue of PacketOuts is full (`packet_out` returns False) the frame is dropped,
  counted (`packet_out_drops`) and the client told (a StreamError, RESOURCE_EXHAUSTED).
  Without a `packet_out` hook the server runs the frame through the current pipeline itself
  and turns outputs on the CPU port into PacketIns (outputs to other ports are dropped: there
  are no ports); that is what in-process tests use.
- PacketIn: `packet_in(port, frame)` strips and parses the `packet_in` header and sends
  the PacketIn to the primary client of every role. Each stream's queue is bounded
  (p4target.runtime.stream): past it a client's messages are dropped and counted
  (`stream_drops`, one log line), so a client that stops reading holds up neither the data
  path nor the other clients. Stream errors echo a PacketOut with its payload cut short.
- Reads are answered in ReadResponses of READ_BATCH entities, each built when the client has
  taken the one before, and a Read's identical requests are answered once
  (p4target.runtime.device.Device.read_batches).
- Digests: a poller drains the state's digest queue every `digest_interval` seconds and
  sends DigestLists for the digests a client configured with a DigestEntry.
- Idle timeouts: every `idle_sweep_interval` seconds (1 s, BMv2's ageing sweep) the same
  poller sends an IdleTimeoutNotification per `support_timeout` table whose entries have not
  been hit for their `idle_timeout_ns`, to the primary client of every role.
- Thread-safety: writes hold `pipeline.state.lock`, the lock the pipeline takes per packet.
- Request log: when `log_path` is given every RPC and stream message is appended there
  (p4target.runtime.requestlog).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent import futures
from typing import Any

import grpc
from finsy.proto import p4r, p4r_grpc
from google.protobuf.message import DecodeError

from p4target.limits import (
    DEFAULT_LOG_MAX_MB,
    GRPC_MESSAGE_BYTES,
    MAX_CALLS,
    MAX_STREAMS,
    PACKET_OUT_QUEUE,
    PACKET_OUT_QUEUE_BYTES,
    READ_BATCH,
)
from p4target.runtime.arbitration import Arbitration, election_id_of
from p4target.runtime.device import Device
from p4target.runtime.errors import RuntimeStatus, abort, batch_status, code_number, echoed_packet
from p4target.runtime.requestlog import RequestLog
from p4target.runtime.roles import RoleScope
from p4target.runtime.stream import Closed, Session

P4RUNTIME_API_VERSION = "1.5.0"
SERVICE = "p4.v1.P4Runtime"
WORKERS = 4  # threads doing the requests' work (the GIL lets one run at a time; more only queue)
STOP_MARGIN_S = 5.0  # what stop() waits past its grace for gRPC to finish; then it returns anyway
GRPC_OPTIONS = [("grpc.max_receive_message_length", GRPC_MESSAGE_BYTES),
                ("grpc.http2.bdp_probe", 0),  # each stream takes in 64 KiB ahead of its handler, not megabytes
                ("grpc.so_reuseport", 0)]  # one server a port: a second switch on it fails to start

log = logging.getLogger("aggnet.p4runtime")


class RuntimeServer(p4r_grpc.P4RuntimeServicer):
    """One device's P4Runtime service on a gRPC server; see the module docstring."""

    def __init__(self, device_id: int, address: str, cpu_port: int = 255,
                 on_pipeline_set: Callable[[object], None] | None = None,
                 packet_out: Callable[[int, bytes], bool] | None = None,
                 log_path: str | None = None, digest_interval: float = 0.02, idle_sweep_interval: float = 1.0,
                 engine: str = "python", credentials: grpc.ServerCredentials | None = None,
                 log_max_bytes: int = DEFAULT_LOG_MAX_MB << 20, max_streams: int = MAX_STREAMS):
        self.device = Device(device_id, on_pipeline_set, engine)
        self.address = address
        self._credentials = credentials
        self.cpu_port = cpu_port
        self.max_streams = max_streams
        self.arbitration = Arbitration()
        self._packet_out = packet_out or self._process_locally
        self._log = RequestLog(log_path, log_max_bytes)
        self._digest_interval = digest_interval
        self._idle_sweep_interval = idle_sweep_interval
        self.sessions: set[Session] = set()  # the open streams; changed on the event loop's thread only
        self._stopping = threading.Event()
        self._pool = futures.ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="p4rt")
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._server: grpc.aio.Server | None = None
        self._poller: threading.Thread | None = None
        self.stream_drops = 0  # stream messages dropped for clients that did not read
        self.packet_out_drops = 0  # PacketOuts dropped: the switch's queue of PACKET_OUT_QUEUE was full

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> int:
        """Start serving; returns the bound port. Raises RuntimeError if the address is taken."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._loop_thread = threading.Thread(target=loop.run_forever, name="p4rt-loop", daemon=True)
        self._loop_thread.start()
        try:
            port = asyncio.run_coroutine_threadsafe(self._serve(), loop).result()
        except BaseException:
            self._end_loop()
            raise
        self._poller = threading.Thread(target=self._poll, name="p4rt-poller", daemon=True)
        self._poller.start()
        return port

    async def _serve(self) -> int:
        server = grpc.aio.server(handlers=[self._service()], options=GRPC_OPTIONS,
                                 maximum_concurrent_rpcs=self.max_streams + MAX_CALLS)
        try:
            if self._credentials is None:
                port = server.add_insecure_port(self.address)
            else:
                port = server.add_secure_port(self.address, self._credentials)
        except RuntimeError:
            port = 0
        if port == 0:
            raise RuntimeError(f"cannot listen for P4Runtime on {self.address}")
        await server.start()
        self._server = server
        return port

    def stop(self, grace: float = 0.5) -> None:
        """Close every stream and stop serving, within `grace` + STOP_MARGIN_S whatever the clients do;
        safe to call twice."""
        self._stopping.set()
        loop, server = self._loop, self._server
        if loop is not None and server is not None and loop.is_running():
            done = asyncio.run_coroutine_threadsafe(self._shutdown(server, grace), loop)
            try:
                done.result(grace + STOP_MARGIN_S)
            except (futures.TimeoutError, grpc.RpcError, RuntimeError) as exc:
                log.warning("P4Runtime server did not stop cleanly within %.1f s (%r): leaving it", grace, exc)
        self._end_loop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self._poller is not None:
            self._poller.join()
        self._log.close()

    def _service(self) -> grpc.GenericRpcHandler:
        """The P4Runtime service, each request parsed here: one that does not parse is INVALID_ARGUMENT naming
        what it should have been (gRPC's own parsing answers UNKNOWN with a Python exception's text)."""
        def serialize(message) -> bytes:
            return message.SerializeToString()

        unary = {"Capabilities": (self.Capabilities, p4r.CapabilitiesRequest), "Write": (self.Write, p4r.WriteRequest),
                 "SetForwardingPipelineConfig": (self.SetForwardingPipelineConfig,
                                                 p4r.SetForwardingPipelineConfigRequest),
                 "GetForwardingPipelineConfig": (self.GetForwardingPipelineConfig,
                                                 p4r.GetForwardingPipelineConfigRequest)}
        handlers = {name: grpc.unary_unary_rpc_method_handler(_parsing(method, kind), response_serializer=serialize)
                    for name, (method, kind) in unary.items()}

        async def read(raw: bytes, context) -> AsyncIterator[p4r.ReadResponse]:
            request = await _parsed(p4r.ReadRequest, raw, context)
            async for response in self.Read(request, context):
                yield response

        handlers["Read"] = grpc.unary_stream_rpc_method_handler(read, response_serializer=serialize)
        handlers["StreamChannel"] = grpc.stream_stream_rpc_method_handler(  # _read_stream answers what does not parse
            self.StreamChannel, request_deserializer=p4r.StreamMessageRequest.FromString, response_serializer=serialize)
        return grpc.method_handlers_generic_handler(SERVICE, handlers)

    async def _shutdown(self, server: grpc.aio.Server, grace: float) -> None:
        for session in list(self.sessions):
            session.close()
        await server.stop(grace)

    def _end_loop(self) -> None:
        loop, thread = self._loop, self._loop_thread
        if loop is None or thread is None:
            return
        if loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_MARGIN_S)
        if not thread.is_alive() and not loop.is_closed():
            loop.close()

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

    async def _work(self, fn: Callable[..., Any], *args: Any) -> Any:
        """fn(*args) on the worker pool, so the event loop serves other clients meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, _internal_errors, fn, *args)

    # ------------------------------------------------------------------ packet I/O

    def packet_in(self, port: int, frame: bytes) -> None:
        """Deliver a frame the pipeline sent to the CPU port to the primary clients."""
        if self.device.current is None:
            return
        self._send_to_primaries([p4r.StreamMessageResponse(packet=self.device.packet_in_message(frame))])

    def _process_locally(self, port: int, frame: bytes) -> bool:
        pipeline = self.pipeline
        if pipeline is None:
            return True
        for out_port, data in pipeline.process(port, frame):
            if out_port == self.cpu_port:
                self.packet_in(out_port, data)
        self._send_digests()
        return True

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
                self._offer(session, message)

    def _offer(self, session: Session, message: p4r.StreamMessageResponse) -> None:
        if session.offer(message):
            return
        self.stream_drops += 1
        if session.dropped == 1:
            log.warning("P4Runtime client of role '%s' (election id %s) is not reading its stream: dropping "
                        "its PacketIn/digest/error messages past its queue's bound", session.role, session.election_id)

    def _send_digests(self) -> None:
        self._send_to_primaries(p4r.StreamMessageResponse(digest=d) for d in self.device.digest_lists())

    # ------------------------------------------------------------------ unary RPCs

    async def Capabilities(self, request, context):
        self._log.write("Capabilities", request)
        return p4r.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    async def SetForwardingPipelineConfig(self, request, context):
        try:
            await self._work(self._set_pipeline, request)
        except RuntimeStatus as failure:
            await abort(context, failure.code, failure.message)
        return p4r.SetForwardingPipelineConfigResponse()

    def _set_pipeline(self, request: p4r.SetForwardingPipelineConfigRequest) -> None:
        self._log.write("SetForwardingPipelineConfig", request)
        self.device.check_device_id(request.device_id)
        self.arbitration.check_primary(request.role, election_id_of(request))
        self.arbitration.check_pipeline(request.role)
        self.device.set_pipeline(request.action, request.config)

    async def GetForwardingPipelineConfig(self, request, context):
        try:
            config = await self._work(self._get_pipeline, request)
        except RuntimeStatus as failure:
            await abort(context, failure.code, failure.message)
        return p4r.GetForwardingPipelineConfigResponse(config=config)

    def _get_pipeline(self, request: p4r.GetForwardingPipelineConfigRequest) -> p4r.ForwardingPipelineConfig:
        self._log.write("GetForwardingPipelineConfig", request)
        self.device.check_device_id(request.device_id)
        return self.device.get_pipeline(request.response_type)

    async def Write(self, request, context):
        try:
            failures = await self._work(self._write, request)
        except RuntimeStatus as failure:
            await abort(context, failure.code, failure.message)
        if any(failures):
            status = batch_status(failures)
            await abort(context, grpc.StatusCode.UNKNOWN, status.message, status)
        return p4r.WriteResponse()

    def _write(self, request: p4r.WriteRequest) -> list[RuntimeStatus | None]:
        self._log.write("Write", request)
        self.device.check_device_id(request.device_id)
        self.arbitration.check_primary(request.role, election_id_of(request))
        self.arbitration.check_write(request.role, request.updates)
        return self.device.write(request.updates, request.atomicity)

    async def Read(self, request, context) -> AsyncIterator[p4r.ReadResponse]:
        try:
            batch, more = await self._work(self._read, request)
            yield p4r.ReadResponse(entities=batch)
            while more is not None and (batch := await self._work(self._next_batch, more, request.role)) is not None:
                yield p4r.ReadResponse(entities=batch)
        except RuntimeStatus as failure:
            await abort(context, failure.code, failure.message)

    def _read(self, request: p4r.ReadRequest) -> tuple[list[p4r.Entity], Iterator[list[p4r.Entity]] | None]:
        """The Read's first batch (maybe empty), and the batches to come (None: it was the last, being short);
        request errors are raised here, first."""
        self._log.write("Read", request)
        self.device.check_device_id(request.device_id)
        batches = self.device.read_batches(request.entities)
        first = next(batches)
        return self.arbitration.readable(request.role, first), batches if len(first) == READ_BATCH else None

    def _next_batch(self, batches: Iterator[list[p4r.Entity]], role: str) -> list[p4r.Entity] | None:
        batch = next(batches, None)
        return None if batch is None else self.arbitration.readable(role, batch)

    # ------------------------------------------------------------------ stream

    async def StreamChannel(self, request_iterator, context) -> AsyncIterator[p4r.StreamMessageResponse]:
        if len(self.sessions) >= self.max_streams:
            await abort(context, grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"Too many connections: this switch serves {self.max_streams} StreamChannels at once")
        loop = asyncio.get_running_loop()
        ready = asyncio.Event()
        session = Session(self.device.device_id, wake=lambda: _wake(loop, ready))
        self.sessions.add(session)
        reader = asyncio.create_task(self._read_stream(request_iterator, session))
        try:
            while True:
                await ready.wait()
                ready.clear()
                for item in session.take():
                    if isinstance(item, Closed):
                        if item.failure is not None:
                            await abort(context, item.failure.code, item.failure.message)
                        return
                    yield item
        finally:
            reader.cancel()
            if session.dropped:
                log.warning("P4Runtime stream of role '%s' (election id %s) closed: %d messages were dropped "
                            "while it did not read", session.role, session.election_id, session.dropped)
            self.arbitration.remove(session)
            self.sessions.discard(session)

    async def _read_stream(self, request_iterator, session: Session) -> None:
        """Handle a client's stream messages, one at a time, until it closes; then end our side too.

        The session leaves arbitration as soon as its stream ends (as BMv2's server does), before our
        side is wound down: a client that half-closes and at once reconnects with the same election id
        (the tutorials' PTF tests, every setUp) becomes primary instead of finding the id in use.
        """
        failure = None
        try:
            async for request in request_iterator:
                await self._work(self._stream_message, session, request)
        except RuntimeStatus as exc:
            failure = exc
        except DecodeError:
            failure = RuntimeStatus(grpc.StatusCode.INVALID_ARGUMENT,
                                    "a stream message that is not a p4.v1.StreamMessageRequest")
        except (grpc.RpcError, asyncio.InvalidStateError, futures.CancelledError):
            pass  # the client went away, or the server is stopping
        self.arbitration.remove(session)
        session.close(failure)

    def _stream_message(self, session: Session, request: p4r.StreamMessageRequest) -> None:
        self._log.write("StreamChannel", request)
        kind = request.WhichOneof("update")
        if kind == "arbitration":
            self._arbitrate(session, request.arbitration)
        elif kind == "packet":
            self._packet_out_message(session, request.packet)
        elif kind not in ("digest_ack", None):  # digests are not re-sent, so acks need no bookkeeping
            self._stream_error(session, grpc.StatusCode.UNIMPLEMENTED, f"stream message {kind} is not supported")

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
        if not self._packet_out(self.cpu_port, frame):
            self.packet_out_drops += 1
            self._stream_error(session, grpc.StatusCode.RESOURCE_EXHAUSTED,
                               f"PacketOut dropped: the switch's queue of PacketOuts is full ({PACKET_OUT_QUEUE} frames "
                               f"or {PACKET_OUT_QUEUE_BYTES >> 20} MiB wait for its packet loop)", packet)

    def _stream_error(self, session: Session, code: grpc.StatusCode, message: str,
                      packet: p4r.PacketOut | None = None) -> None:
        error = p4r.StreamError(canonical_code=code_number(code), message=message)
        if packet is not None:
            error.packet_out.packet_out.CopyFrom(echoed_packet(packet))
        self._offer(session, p4r.StreamMessageResponse(error=error))


def _internal_errors(fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args), an exception other than a RuntimeStatus (a bug) logged with its traceback and answered as
    INTERNAL in one line: gRPC would answer UNKNOWN with the exception's text."""
    try:
        return fn(*args)
    except RuntimeStatus:
        raise
    except Exception as exc:  # noqa: BLE001 - the one place a request's unexpected failure becomes a status
        log.exception("P4Runtime request failed")
        raise RuntimeStatus(grpc.StatusCode.INTERNAL,
                            f"internal error ({type(exc).__name__}); the switch's log has the details") from None


async def _parsed(kind: Any, raw: bytes, context: grpc.aio.ServicerContext) -> Any:
    """The request `raw` holds, of message type `kind`; INVALID_ARGUMENT if it is not one."""
    try:
        return kind.FromString(raw)
    except DecodeError:
        await abort(context, grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a {kind.DESCRIPTOR.full_name}")


def _parsing(method: Callable[..., Any], kind: Any) -> Callable[..., Any]:
    """A unary handler taking the request's bytes, parsed as `kind` for `method`."""
    async def handler(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
        return await method(await _parsed(kind, raw, context), context)
    return handler


def _wake(loop: asyncio.AbstractEventLoop, ready: asyncio.Event) -> None:
    """Tell a stream's task (on `loop`) that its queue has something; from any thread."""
    try:
        loop.call_soon_threadsafe(ready.set)
    except RuntimeError:
        pass  # the loop is closed: the server has stopped
