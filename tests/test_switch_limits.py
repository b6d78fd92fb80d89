"""What any one client may cost a running `aggnet switch` (p4target.limits), asserted on the process with
real clients: 200 StreamChannels are served and the 201st refused while the controller's calls are
answered beside them; a backup flooding large PacketOuts it never reads about, a Thrift call of two
million empty structs and a side-channel line without end each cost the switch a bounded amount of
memory (the bound derived from the stated caps), get a clear refusal, and leave it serving."""
from __future__ import annotations

import queue
import socket
import threading
import time
from pathlib import Path

import grpc
import psutil
import pytest
from bm_thrift import BmClient
from finsy.proto import p4r, p4r_grpc
from p4rt_raw import RawClient
from procs import peak_growth, running_switch

from p4target.limits import (
    GRPC_MESSAGE_BYTES,
    LINE_BYTES,
    MAX_STREAMS,
    SIDE_CHANNEL_CONNECTIONS,
    STREAM_QUEUE_BYTES,
    THRIFT_BYTES,
)
from p4target.runtime.bmv2_thrift import wire
from p4target.sidechannel import send_command

PROGRAM = Path(__file__).resolve().parent / "data" / "runtime" / "ipv4_cpu.p4"
MIB = 1 << 20


class Switch:
    def __init__(self, thrift_port: int, grpc_port: int):
        self.thrift_port, self.grpc_port = thrift_port, grpc_port
        self.pid = next(c.pid for c in psutil.net_connections("tcp")
                        if c.status == psutil.CONN_LISTEN and c.laddr.port == grpc_port)
        self.controller = RawClient(grpc_port)
        assert self.controller.arbitrate(1000).status.code == 0
        info = self.controller.get_pipeline(p4r.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE).p4info
        self.ids = {e.preamble.name: e.preamble.id for kind in ("tables", "actions") for e in getattr(info, kind)}

    def route(self, n: int) -> p4r.Update:
        te = p4r.TableEntry(table_id=self.ids["MyIngress.ipv4_lpm"], action=p4r.TableAction(
            action=p4r.Action(action_id=self.ids["NoAction"])))
        te.match.add(field_id=1).lpm.CopyFrom(p4r.FieldMatch.LPM(value=bytes([10, 0, 0, n]), prefix_len=32))
        return p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=te))

    def still_serves(self, n: int) -> None:
        """The controller's Write (route n), Read (of it) and Capabilities are answered, and so is the side
        channel."""
        route = self.route(n)
        self.controller.write([route], election_id=1000)
        read_back = p4r.Entity()
        read_back.CopyFrom(route.entity)
        read_back.table_entry.ClearField("action")
        assert self.controller.read(read_back) == [route.entity]
        assert self.controller.stub.Capabilities(p4r.CapabilitiesRequest(), timeout=60).p4runtime_api_version
        assert send_command(self.thrift_port, "port_stats", timeout=60) == "{}"


@pytest.fixture(scope="module")
def switch(tmp_path_factory):
    with running_switch(PROGRAM, tmp_path_factory.mktemp("limits") / "s1.log") as ports:
        sw = Switch(*ports)
        try:
            yield sw
        finally:
            sw.controller.close()


def _first_answer(responses, got: queue.Queue) -> None:
    try:
        got.put(next(responses))
        for _ in responses:
            pass
    except grpc.RpcError as exc:
        got.put(exc)


def test_200_streams_are_served_the_next_refused_and_the_controller_answered_beside_them(switch):
    """The controller's stream and 199 idle backups (each arbitrates, so the switch is known to hold it,
    then sends and reads nothing more): 200 streams. The 201st is refused; the controller goes on."""
    channels, answers = [], []
    try:
        for election_id in range(1, MAX_STREAMS + 1):
            channel = grpc.insecure_channel(f"127.0.0.1:{switch.grpc_port}")
            channels.append(channel)
            requests: queue.Queue = queue.Queue()
            requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
                device_id=1, election_id=p4r.Uint128(low=election_id))))
            answers.append(queue.Queue())
            responses = p4r_grpc.P4RuntimeStub(channel).StreamChannel(iter(requests.get, None))
            threading.Thread(target=_first_answer, args=(responses, answers[-1]), daemon=True).start()
            first = answers[-1].get(timeout=60)
            if election_id < MAX_STREAMS:  # streams 2..200: backups, told who is primary
                assert first.arbitration.status.code == grpc.StatusCode.ALREADY_EXISTS.value[0], first
        refused = first
        assert isinstance(refused, grpc.RpcError)
        assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.details() == f"Too many connections: this switch serves {MAX_STREAMS} StreamChannels at once"
        switch.still_serves(1)
    finally:
        for channel in channels:
            channel.close()


def test_a_backup_flooding_packet_outs_it_never_reads_about_costs_bounded_memory(switch):
    """2,000 PacketOuts of 100 KB (200 MB) from a backup: each earns a StreamError the client never reads.
    The switch holds at most one request in hand and the stream's queue (STREAM_QUEUE_BYTES, the errors'
    echoes cut short) plus gRPC's buffers; it grew 193 MB before the queue and echoes were bounded."""
    out = p4r.StreamMessageRequest(packet=p4r.PacketOut(payload=bytes(100_000)))
    taken = threading.Event()

    def requests():
        yield p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=1, election_id=p4r.Uint128(low=999)))  # below the controller's: a backup
        for _ in range(2000):
            yield out
        taken.set()  # gRPC asks for the next message once it has sent this one: the switch took all
        threading.Event().wait(5)

    channel = grpc.insecure_channel(f"127.0.0.1:{switch.grpc_port}",
                                    options=[("grpc.max_send_message_length", GRPC_MESSAGE_BYTES)])
    try:
        with peak_growth(switch.pid) as growth:
            responses = p4r_grpc.P4RuntimeStub(channel).StreamChannel(requests())  # never read
            assert taken.wait(120)
            switch.still_serves(2)  # behind the flood's messages, the controller's are answered
        assert growth[0] < 8 * (GRPC_MESSAGE_BYTES + STREAM_QUEUE_BYTES) / MIB, growth
    finally:
        channel.close()
        del responses


def test_a_thrift_call_of_two_million_empty_structs_is_dropped_at_the_value_cap(switch):
    """2 MB on the wire, 2,000,000 dicts decoded: it grew the switch by 104 MB and held it."""
    name = b"standard:bm_mt_add_entry"
    body = bytes([15]) + (3).to_bytes(2, "big") + bytes([12]) + (2_000_000).to_bytes(4, "big") + bytes(2_000_001)
    call = b"\x80\x01\x00\x01" + len(name).to_bytes(4, "big") + name + (1).to_bytes(4, "big") + body
    with peak_growth(switch.pid) as growth, socket.create_connection(("127.0.0.1", switch.thrift_port)) as conn:
        try:
            conn.sendall(call)
        except (BrokenPipeError, ConnectionResetError):
            pass  # dropped before all of it was sent
        conn.settimeout(60)
        try:
            assert conn.recv(100) == b""  # closed without a reply, as BMv2 drops what it cannot parse
        except ConnectionResetError:
            pass
    assert growth[0] < 2 * THRIFT_BYTES / MIB, growth
    client = BmClient(switch.thrift_port)  # the next Thrift client is served
    try:
        assert client.std("bm_mt_get_num_entries", (wire.STRING, "MyIngress.acl")) == 0
    finally:
        client.close()
    switch.still_serves(3)


def test_a_side_channel_line_past_the_cap_is_refused_and_the_connection_closed(switch):
    with socket.create_connection(("127.0.0.1", switch.thrift_port)) as conn:
        conn.sendall(b"a" * (LINE_BYTES + 1))  # no newline in sight
        conn.settimeout(60)
        answers = conn.makefile("rb")
        assert answers.readline() == f"error: a command line is at most {LINE_BYTES} bytes\n".encode()
        assert answers.read() == b""


def test_a_side_channel_line_without_end_costs_bounded_memory(switch):
    """50 MB without a newline: held until the connection closed, it grew the switch by 67 MB."""
    sent = 0
    with socket.create_connection(("127.0.0.1", switch.thrift_port)) as conn, peak_growth(switch.pid) as growth:
        try:
            while sent < 50 * MIB:
                conn.sendall(b"a" * MIB)
                sent += MIB
        except (BrokenPipeError, ConnectionResetError):
            pass  # the switch closed it after a line's worth
    assert sent < 50 * MIB and growth[0] < 64 * LINE_BYTES / MIB, (sent, growth)
    switch.still_serves(4)


def test_the_side_channel_turns_away_connections_past_its_cap(switch):
    held = [socket.create_connection(("127.0.0.1", switch.thrift_port)) for _ in range(SIDE_CHANNEL_CONNECTIONS)]
    try:
        for conn in held:  # each is being served (answers a command)
            conn.sendall(b"port_stats\n")
            conn.settimeout(60)
            assert conn.makefile("rb").readline() == b"ok {}\n"
        with socket.create_connection(("127.0.0.1", switch.thrift_port)) as extra:
            extra.settimeout(60)
            assert extra.makefile("rb").readline().startswith(
                f"error: the side channel serves {SIDE_CHANNEL_CONNECTIONS} connections at once".encode())
    finally:
        for conn in held:
            conn.close()
    deadline = time.monotonic() + 60
    while True:  # the closed connections' slots come back
        try:
            assert send_command(switch.thrift_port, "port_stats", timeout=60) == "{}"
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
