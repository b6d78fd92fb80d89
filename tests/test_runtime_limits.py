"""Limits with clear answers, through a real P4Runtime client (the raw generated stub on real gRPC):
tables hold what the program declares (RESOURCE_EXHAUSTED past it, as BMv2), a program whose state
may pass the switch's cap is refused in one line while the previous pipeline keeps serving, and a
stream client that stops reading loses its own PacketIns (counted) without holding up anyone else."""
from __future__ import annotations

import queue
import subprocess
import sys
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r, p4r_grpc
from p4rt_raw import RawClient, write_codes
from procs import free_port

from p4target.frontend import load_source
from p4target.limits import STREAM_QUEUE
from p4target.native.pipeline import ENGINES
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "data" / "runtime" / "ipv4_cpu.p4"
CPU_PORT = 255
COMMIT = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
ALL = p4r.GetForwardingPipelineConfigRequest.ALL
INSERT, DELETE = p4r.Update.INSERT, p4r.Update.DELETE


def variant(old: str, new: str) -> str:
    """ipv4_cpu.p4 with one declaration changed."""
    source = PROGRAM.read_text()
    assert old in source
    return source.replace(old, new)


def config(source: str) -> p4r.ForwardingPipelineConfig:
    return p4r.ForwardingPipelineConfig(p4info=build_p4info(load_source(source, "prog.p4")),
                                        p4_device_config=source.encode())


@pytest.fixture(params=ENGINES)
def server(request):
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", cpu_port=CPU_PORT, engine=request.param)
    srv.port = srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def client(server):
    c = RawClient(server.port)
    c.arbitrate(10)
    yield c
    c.close()


def ids_of(client: RawClient) -> dict[str, int]:
    info = client.get_pipeline(ALL).p4info
    return {e.preamble.name: e.preamble.id for kind in ("tables", "actions") for e in getattr(info, kind)}


def lpm_route(ids: dict[str, int], n: int) -> p4r.Entity:
    return p4r.Entity(table_entry=p4r.TableEntry(
        table_id=ids["MyIngress.ipv4_lpm"],
        match=[p4r.FieldMatch(field_id=1, lpm=p4r.FieldMatch.LPM(value=bytes([10, 0, n, 0]), prefix_len=24))],
        action=p4r.TableAction(action=p4r.Action(action_id=ids["NoAction"]))))


def l2_entry(ids: dict[str, int], n: int) -> p4r.Entity:
    return p4r.Entity(table_entry=p4r.TableEntry(
        table_id=ids["MyIngress.l2_exact"],
        match=[p4r.FieldMatch(field_id=1, exact=p4r.FieldMatch.Exact(value=n.to_bytes(6, "big").lstrip(b"\0") or b"\0"))],
        action=p4r.TableAction(action=p4r.Action(action_id=ids["MyIngress.drop"]))))


def test_a_table_holds_what_the_program_declares(client):
    client.set_pipeline(COMMIT, config(variant("size = 1024;", "size = 4;")))
    ids = ids_of(client)
    routes = [p4r.Update(type=INSERT, entity=lpm_route(ids, n)) for n in range(5)]
    assert write_codes(client, *routes) == ["OK"] * 4 + ["RESOURCE_EXHAUSTED"]
    table = p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"]))
    assert len(client.read(table)) == 4
    assert write_codes(client, p4r.Update(type=DELETE, entity=lpm_route(ids, 0)), routes[4]) == ["OK", "OK"]
    # No `size`: BMv2's default of 1024 entries.
    client.write([p4r.Update(type=INSERT, entity=l2_entry(ids, n)) for n in range(1, 1025)])
    assert write_codes(client, p4r.Update(type=INSERT, entity=l2_entry(ids, 1025))) == ["RESOURCE_EXHAUSTED"]


def test_a_program_over_the_state_cap_is_refused_and_the_old_one_keeps_serving(server, client):
    client.set_pipeline(COMMIT, config(PROGRAM.read_text()))
    ids = ids_of(client)
    huge = variant("register<bit<32>>(16) last_src;", "register<bit<32>>(1 << 30) last_src;")
    with pytest.raises(grpc.RpcError) as refused:
        client.set_pipeline(COMMIT, config(huge))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    message = refused.value.details()
    assert "\n" not in message and "register MyIngress.last_src needs 8192 MiB" in message
    assert "state cap of 1024 MiB" in message and "--max-state-mb" in message
    assert client.get_pipeline(ALL).p4_device_config == PROGRAM.read_bytes()
    assert write_codes(client, p4r.Update(type=INSERT, entity=lpm_route(ids, 1))) == ["OK"]

    big_table = variant("size = 1024;", "size = 1 << 30;")
    with pytest.raises(grpc.RpcError, match="table MyIngress.ipv4_lpm needs"):
        client.set_pipeline(COMMIT, config(big_table))
    eight_mib = variant("register<bit<32>>(16) last_src;", "register<bit<32>>(1 << 20) last_src;")
    server.device.state_cap_mb = 4
    with pytest.raises(grpc.RpcError, match="register MyIngress.last_src needs 8 MiB.*state cap of 4 MiB"):
        client.set_pipeline(COMMIT, config(eight_mib))
    server.device.state_cap_mb = 64
    client.set_pipeline(COMMIT, config(eight_mib))
    assert client.get_pipeline(ALL).p4_device_config == eight_mib.encode()


def test_switch_process_refuses_an_oversized_program_in_one_line(tmp_path):
    program = tmp_path / "huge.p4"
    program.write_text(variant("register<bit<32>>(16) last_src;", "register<bit<32>>(1 << 30) last_src;"))
    out = subprocess.run([sys.executable, "-m", "testbed.cli", "switch", "--max-state-mb", "512",
                          "--grpc-server-addr", f"127.0.0.1:{free_port()}", "--thrift-port", str(free_port()),
                          str(program)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith(f"{program}: error: register MyIngress.last_src needs 8192 MiB")
    assert "state cap of 512 MiB" in lines[0]


class StalledClient:
    """A real stream client that arbitrates, then stops reading; `resume()` reads what is left."""

    def __init__(self, port: int, role: str):
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self._requests: queue.Queue = queue.Queue()
        self._responses = p4r_grpc.P4RuntimeStub(self.channel).StreamChannel(iter(self._requests.get, None))
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=1, election_id=p4r.Uint128(low=10), role=p4r.Role(name=role))))
        assert next(self._responses).arbitration.status.code == 0  # primary of its role; reads no more

    def resume(self) -> int:
        """End our side of the stream, then read until the server ends its side; the PacketIns received."""
        self._requests.put(None)
        return sum(1 for m in self._responses if m.HasField("packet"))

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()


def test_a_client_that_stops_reading_loses_its_packet_ins_not_the_others(server, client):
    """Client A (primary of role "a") stops reading while client B (primary of the default role) sends
    PacketOuts that come straight back as PacketIns to both. B gets every one; A's queue stops at
    STREAM_QUEUE and the rest of its messages are dropped and counted, exactly."""
    client.set_pipeline(COMMIT, config(PROGRAM.read_text()))
    stalled = StalledClient(server.port, "a")
    sent = 4 * STREAM_QUEUE
    payload = bytes(8192)  # big enough to fill gRPC's flow-control window quickly
    out = p4r.PacketOut(payload=payload, metadata=[p4r.PacketMetadata(metadata_id=1, value=bytes([CPU_PORT])),
                                                    p4r.PacketMetadata(metadata_id=2, value=b"\0")])
    try:
        received_by_b = 0

        def read_until(outstanding: int) -> None:
            nonlocal received_by_b
            while sent_by_b - received_by_b > outstanding:
                message = client.next_message(timeout=60)
                assert not message.HasField("error"), message
                if message.HasField("packet"):
                    assert message.packet.payload == payload
                    received_by_b += 1

        for sent_by_b in range(1, sent + 1):  # B keeps at most 64 PacketIns (512 KiB) waiting: it reads
            client.send(p4r.StreamMessageRequest(packet=out))
            if sent_by_b - received_by_b >= 64:
                read_until(32)
        read_until(0)
        assert server.stream_drops > 0
        dropped = server.stream_drops
        assert stalled.resume() + dropped == sent  # A closes its side, reads what was queued and in flight
    finally:
        stalled.close()
