"""A small P4Runtime client in the style of the p4lang tutorials' `utils/p4runtime_lib`.

It does what an exercise's PTF test needs from a BMv2 switch: one StreamChannel per
connection (arbitration with election id 1, as the tutorials use), the pipeline pushed as
p4c's P4Info plus p4c's BMv2 JSON wrapped in BMv2's `P4DeviceConfig` (`p4/tmp/p4config.proto`),
and table entries built by name from the P4Info text file. Nothing here knows which switch it
talks to: simple_switch_grpc and `aggnet switch` get the same requests.

Imports: the P4Runtime stubs come from finsy (they import under protobuf 6); `p4.tmp` from
BMv2's own Python tree (a folder holding a `p4` link to it is put on the path by the caller).
"""
from __future__ import annotations

import ipaddress
import queue
import threading

import grpc
from finsy.proto import p4i, p4r, p4r_grpc
from google.protobuf import text_format
from p4.tmp import p4config_pb2

ELECTION_ID = p4r.Uint128(high=0, low=1)
_END = object()
_connections: list[SwitchConnection] = []


def canonical(value: int) -> bytes:
    """P4Runtime's canonical bytestring: big-endian, no leading zero bytes (at least one byte)."""
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def mac_value(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


class P4InfoHelper:
    """IDs by name from a P4Info text file, and table entries built from names and values."""

    def __init__(self, p4info_path: str):
        with open(p4info_path) as fh:
            self.p4info = text_format.Parse(fh.read(), p4i.P4Info())

    def _table(self, name: str) -> p4i.Table:
        return next(t for t in self.p4info.tables if name in (t.preamble.name, t.preamble.alias))

    def _action(self, name: str) -> p4i.Action:
        return next(a for a in self.p4info.actions if name in (a.preamble.name, a.preamble.alias))

    def lpm_entry(self, table: str, field: str, prefix: str, action: str, params: dict[str, int]) -> p4r.TableEntry:
        """`table`'s entry matching `field` against `prefix` ("10.0.2.0/24"), running `action` with `params`."""
        info = self._table(table)
        match = next(m for m in info.match_fields if m.name == field)
        net = ipaddress.ip_network(prefix)
        entry = p4r.TableEntry(table_id=info.preamble.id)
        entry.match.add(field_id=match.id, lpm=p4r.FieldMatch.LPM(value=canonical(int(net.network_address)),
                                                                   prefix_len=net.prefixlen))
        act = self._action(action)
        entry.action.action.action_id = act.preamble.id
        for param in act.params:
            entry.action.action.params.add(param_id=param.id, value=canonical(params[param.name]))
        return entry


class SwitchConnection:
    """One gRPC channel and StreamChannel to a BMv2-style P4Runtime server."""

    def __init__(self, address: str, device_id: int = 0):
        self.device_id = device_id
        self.channel = grpc.insecure_channel(address)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self._arbitration: queue.Queue = queue.Queue()
        stream = self.stub.StreamChannel(iter(self._requests.get, _END))
        threading.Thread(target=self._dispatch, args=(stream,), daemon=True).start()
        _connections.append(self)

    def _dispatch(self, stream) -> None:
        try:
            for message in stream:
                if message.HasField("arbitration"):
                    self._arbitration.put(message.arbitration)
        except grpc.RpcError as exc:
            self._arbitration.put(exc)

    def master_arbitration_update(self, timeout: float = 30) -> p4r.MasterArbitrationUpdate:
        """Announce election id 1 and return the switch's answer (raises the stream's error if it ended)."""
        self._requests.put(p4r.StreamMessageRequest(arbitration=p4r.MasterArbitrationUpdate(
            device_id=self.device_id, election_id=ELECTION_ID)))
        answer = self._arbitration.get(timeout=timeout)
        if isinstance(answer, grpc.RpcError):
            raise answer
        return answer

    def set_forwarding_pipeline_config(self, p4info: p4i.P4Info, bmv2_json_path: str) -> None:
        """VERIFY_AND_COMMIT p4c's P4Info and JSON, the JSON in BMv2's P4DeviceConfig."""
        with open(bmv2_json_path, "rb") as fh:
            device = p4config_pb2.P4DeviceConfig(reassign=True, device_data=fh.read())
        config = p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device.SerializeToString())
        self.stub.SetForwardingPipelineConfig(p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=ELECTION_ID, config=config,
            action=p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT))

    def write_table_entry(self, entry: p4r.TableEntry) -> None:
        update = p4r.Update(type=p4r.Update.INSERT, entity=p4r.Entity(table_entry=entry))
        self.stub.Write(p4r.WriteRequest(device_id=self.device_id, election_id=ELECTION_ID, updates=[update]))

    def shutdown(self) -> None:
        """End the stream from our side (a half-close, as the tutorials' connections do)."""
        self._requests.put(_END)


def shutdown_all_switch_connections() -> None:
    """What a test's tearDown calls: every connection made so far ends its stream."""
    while _connections:
        _connections.pop().shutdown()
