"""SIGTERM stops `aggnet switch` whatever its clients did: streams of bytes that are no P4Runtime message
(the switch used to hang in gRPC's stop for good), streams held open and never read, a backup flooding
PacketOuts, half a side-channel line and half a Thrift call. The process exits 0 and leaves no listener.
The test waits for the exit with its usual timeout; no figure of how fast is asserted."""
from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import grpc
from finsy.proto import p4r, p4r_grpc
from procs import free_port, wait_for

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "runtime" / "ipv4_cpu.p4"


def arbitration(election_id: int) -> p4r.StreamMessageRequest:
    return p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
        device_id=1, election_id=p4r.Uint128(low=election_id)))


def _drain(responses, ended: threading.Event | None = None) -> None:
    try:
        for _ in responses:
            pass
    except grpc.RpcError:
        pass
    if ended is not None:
        ended.set()


def malformed_stream(channel: grpc.Channel, election_id: int | None) -> threading.Event:
    """Bytes that do not parse as a StreamMessageRequest (after an arbitration, given an election id); the
    client keeps its side open. The event is set once the switch has ended the stream."""
    call = channel.stream_stream("/p4.v1.P4Runtime/StreamChannel", request_serializer=lambda b: b,
                                 response_deserializer=lambda b: b)
    requests: queue.Queue = queue.Queue()
    if election_id is not None:
        requests.put(arbitration(election_id).SerializeToString())
    requests.put(b"\x0a\xff\xff")  # a field that claims more bytes than follow
    requests.put(b"\x12\x05abc")
    ended = threading.Event()
    threading.Thread(target=_drain, args=(call(iter(requests.get, None)), ended), daemon=True).start()
    return ended


def unread_flood(channel: grpc.Channel) -> None:
    """A backup that sends PacketOuts and never reads its stream (each earns a StreamError it never takes)."""
    out = p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=bytes(10_000)))

    def requests():
        yield arbitration(1)
        for _ in range(500):
            yield out
        threading.Event().wait()  # the stream stays open

    p4r_grpc.P4RuntimeStub(channel).StreamChannel(requests())  # its answers are never iterated


def test_sigterm_stops_the_switch_whatever_its_clients_did(tmp_path):
    grpc_port, thrift_port = free_port(), free_port()
    log = tmp_path / "s1.log"
    proc = subprocess.Popen([sys.executable, "-m", "testbed.cli", "switch", "--device-id", "1",
                             "--grpc-server-addr", f"127.0.0.1:{grpc_port}", "--thrift-port", str(thrift_port),
                             "--log", str(log), str(PROGRAM)], cwd=REPO)
    channels = [grpc.insecure_channel(f"127.0.0.1:{grpc_port}") for _ in range(11)]
    held = []
    try:
        wait_for(thrift_port, proc, log)
        to_primary: queue.Queue = queue.Queue()
        to_primary.put(arbitration(10))
        primary = p4r_grpc.P4RuntimeStub(channels[0]).StreamChannel(iter(to_primary.get, None))
        assert next(primary).arbitration.status.code == 0  # then it reads nothing more
        refused = [malformed_stream(channels[1], 2)]
        # With nothing before: after five of these, 2 of 2 stops hung in gRPC's server.stop().wait() and needed SIGKILL.
        refused += [malformed_stream(channel, None) for channel in channels[2:7]]
        unread_flood(channels[7])
        for channel in channels[8:]:  # idle streams, never read
            p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter(queue.Queue().get, None))
        half_line = socket.create_connection(("127.0.0.1", thrift_port))
        half_line.sendall(b"register_read MyIngress.last_s")
        half_call = socket.create_connection(("127.0.0.1", thrift_port))
        half_call.sendall(b"\x80\x01\x00\x01\x00\x00\x00\x20bm_")
        held += [half_line, half_call]
        for ended in refused:  # the switch has answered the malformed streams (with an error)
            assert ended.wait(60)
        # The switch has taken every kind of client: the side channel answers a whole command beside them.
        with socket.create_connection(("127.0.0.1", thrift_port)) as probe:
            probe.sendall(b"port_stats\n")
            assert probe.makefile("rb").readline().startswith(b"ok")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for conn in held:
            conn.close()
        for channel in channels:
            channel.close()
    assert "stopping" in log.read_text()
    for port in (grpc_port, thrift_port):  # nothing listens there any more
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
