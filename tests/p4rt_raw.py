"""A bare P4Runtime client for tests: the generated gRPC stub plus one StreamChannel.

Tests use it where finsy hides the wire (per-update error lists, atomicity, pipeline
actions, stream messages such as idle-timeout notifications).
"""
from __future__ import annotations

import queue
import threading

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_status


class RawClient:
    """A bare generated-stub client: one StreamChannel plus unary calls."""

    def __init__(self, port: int, device_id: int = 1):
        self.device_id = device_id
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self._incoming: queue.Queue = queue.Queue()
        responses = self.stub.StreamChannel(iter(self._requests.get, None))
        threading.Thread(target=self._pump, args=(responses,), daemon=True).start()

    def _pump(self, responses) -> None:
        try:
            for message in responses:
                self._incoming.put(message)
        except grpc.RpcError as exc:
            self._incoming.put(exc)
            return
        self._incoming.put(None)  # the server ended the stream with OK

    def next_message(self, timeout: float = 10.0) -> p4r.StreamMessageResponse:
        """The next stream message from the server; re-raises the error that ended the stream."""
        message = self._incoming.get(timeout=timeout)
        if isinstance(message, grpc.RpcError):
            raise message
        return message

    def arbitrate(self, election_id: int, device_id: int | None = None) -> p4r.MasterArbitrationUpdate:
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=self.device_id if device_id is None else device_id,
            election_id=p4r.Uint128(high=0, low=election_id))))
        return self.next_message().arbitration

    def send(self, message: p4r.StreamMessageRequest) -> None:
        self._requests.put(message)

    def close_stream(self) -> None:
        """End our side of the stream (what was sent before is still delivered); the channel stays open."""
        self._requests.put(None)

    def messages_until_end(self, timeout: float = 60.0) -> list[p4r.StreamMessageResponse]:
        """Every stream message still to come, until the server ends the stream with OK."""
        out = []
        while (message := self.next_message(timeout)) is not None:
            out.append(message)
        return out

    def write(self, updates, election_id: int = 10, atomicity=p4r.WriteRequest.CONTINUE_ON_ERROR):
        return self.stub.Write(p4r.WriteRequest(device_id=self.device_id, election_id=p4r.Uint128(low=election_id),
                                                updates=updates, atomicity=atomicity))

    def set_pipeline(self, action, config, election_id: int = 10):
        return self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=p4r.Uint128(low=election_id), action=action, config=config))

    def get_pipeline(self, response_type) -> p4r.ForwardingPipelineConfig:
        return self.stub.GetForwardingPipelineConfig(p4r.GetForwardingPipelineConfigRequest(
            device_id=self.device_id, response_type=response_type)).config

    def read(self, *entities) -> list[p4r.Entity]:
        out = []
        for response in self.stub.Read(p4r.ReadRequest(device_id=self.device_id, entities=entities)):
            out.extend(response.entities)
        return out

    def close(self):
        self._requests.put(None)
        self.channel.close()


def rich_status(error: grpc.RpcError) -> rpc_status.Status:
    for key, value in error.trailing_metadata():
        if key == "grpc-status-details-bin":
            return rpc_status.Status.FromString(value)
    raise AssertionError("no google.rpc.Status in the trailing metadata")


def per_update_codes(error: grpc.RpcError) -> list[int]:
    codes = []
    for detail in rich_status(error).details:
        err = p4r.Error()
        assert detail.Unpack(err)
        codes.append(err.canonical_code)
    return codes


def write_codes(client: RawClient, *updates: p4r.Update, **kw) -> list[str]:
    """Per-update status names of a Write ("OK" for each update when the whole batch succeeded)."""
    try:
        client.write(list(updates), **kw)
    except grpc.RpcError as exc:
        return [grpc.StatusCode.OK.name if c == 0 else _code_name(c) for c in per_update_codes(exc)]
    return ["OK"] * len(updates)


def _code_name(number: int) -> str:
    return next(code.name for code in grpc.StatusCode if code.value[0] == number)
