"""A Write's runs of table-entry updates, taken by the state at once (the native engine: in one call): each update
still fails alone with its own status, in order, and the table ends as applying them one at a time leaves it."""
from pathlib import Path

import grpc
import pytest
from finsy.proto import p4r
from p4rt_raw import RawClient, per_update_codes
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from p4target.frontend import load_program
from p4target.load import ENGINES
from p4target.p4info import build_p4info
from p4target.runtime import RuntimeServer
from p4target.runtime.device import Device
from p4target.runtime.errors import RuntimeStatus

PROGRAM = Path(__file__).parent / "data" / "runtime" / "ipv4_cpu.p4"
INSERT, MODIFY, DELETE = p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE
G = grpc.StatusCode


@pytest.fixture(scope="module")
def ids() -> dict[str, int]:
    info = build_p4info(load_program(str(PROGRAM)))
    return {e.preamble.name: e.preamble.id for kind in ("tables", "actions") for e in getattr(info, kind)}


def route(ids: dict[str, int], last: int, port: int = 2, prefix_len: int = 32, value: bytes | None = None) -> p4r.Entity:
    te = p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"])
    te.match.add(field_id=1).lpm.CopyFrom(p4r.FieldMatch.LPM(value=value or bytes([10, 0, 0, last]),
                                                              prefix_len=prefix_len))
    te.action.action.action_id = ids["MyIngress.ipv4_forward"]
    te.action.action.params.add(param_id=1, value=bytes([0, 0, 0, 0, 0, last]))
    te.action.action.params.add(param_id=2, value=port.to_bytes(2, "big"))
    return p4r.Entity(table_entry=te)


def default_drop(ids: dict[str, int]) -> p4r.Entity:
    te = p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"], is_default_action=True)
    te.action.action.action_id = ids["MyIngress.drop"]
    return p4r.Entity(table_entry=te)


def mixed_batch(ids: dict[str, int]) -> tuple[list[p4r.Update], list[G]]:
    """Updates with bad ones in the middle of runs, and the status each must get (OK: applied)."""
    cases = [(INSERT, route(ids, 1), G.OK), (INSERT, route(ids, 2), G.OK),
             (INSERT, route(ids, 3, value=b"\x01\x0a\x00\x00\x03"), G.INVALID_ARGUMENT),  # wider than 32 bits
             (INSERT, route(ids, 1), G.ALREADY_EXISTS),  # a duplicate of an entry of this run
             (INSERT, route(ids, 3, prefix_len=40), G.INVALID_ARGUMENT),
             (INSERT, route(ids, 3), G.OK), (MODIFY, route(ids, 3, port=7), G.OK),  # modified in the run adding it
             (MODIFY, route(ids, 9), G.NOT_FOUND), (DELETE, route(ids, 2), G.OK),
             (DELETE, route(ids, 2), G.NOT_FOUND), (INSERT, route(ids, 2, port=5), G.OK),  # back, after its delete
             (MODIFY, default_drop(ids), G.OK),  # not batched: between two runs
             (INSERT, route(ids, 4), G.OK), (INSERT, route(ids, 5), G.OK), (DELETE, route(ids, 5), G.OK),
             (INSERT, p4r.Entity(table_entry=p4r.TableEntry(table_id=0x02000001)), G.INVALID_ARGUMENT),
             (MODIFY, route(ids, 1, port=6), G.OK)]
    return [p4r.Update(type=t, entity=e) for t, e, _ in cases], [c for _, _, c in cases]


def expected_routes() -> dict[int, int]:
    """The last byte of each route the mixed batch leaves -> its port."""
    return {1: 6, 2: 5, 3: 7, 4: 2}


def routes(entities: list[p4r.Entity]) -> dict[int, int]:
    return {e.table_entry.match[0].lpm.value[-1]: int.from_bytes(e.table_entry.action.action.params[1].value, "big")
            for e in entities}


@pytest.mark.parametrize("engine", ENGINES)
def test_a_write_with_bad_updates_in_its_runs_fails_only_those(engine, ids, tmp_path):
    srv = RuntimeServer(device_id=1, address="127.0.0.1:0", engine=engine,
                        log_path=str(tmp_path / "s1-p4runtime-requests.txt"))
    srv.port = srv.start()
    try:
        srv.device.load_source(PROGRAM.read_text(), PROGRAM.name)
        raw = RawClient(srv.port)
        raw.arbitrate(10)
        updates, codes = mixed_batch(ids)
        with pytest.raises(grpc.RpcError) as err:
            raw.write(updates)
        assert err.value.code() == G.UNKNOWN
        assert per_update_codes(err.value) == [c.value[0] for c in codes]
        assert routes(raw.read(p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"])))) == \
            expected_routes()
        raw.close()
    finally:
        srv.stop()


def test_a_batched_run_leaves_the_table_as_one_update_at_a_time(ids):
    """The native engine: the same statuses, the same entries read back, and packets forwarded by what the batch
    put in the engine as by what per-entry calls put there."""
    batched, single = Device(1, engine="native"), Device(1, engine="native")
    for device in (batched, single):
        device.load_source(PROGRAM.read_text(), PROGRAM.name)
    updates, codes = mixed_batch(ids)
    failures = batched.write(updates, p4r.WriteRequest.CONTINUE_ON_ERROR)
    one_by_one: list[G] = []
    for update in updates:
        try:
            single.loaded().translator.apply(update.type, update.entity)
            one_by_one.append(G.OK)
        except RuntimeStatus as failure:
            one_by_one.append(failure.code)
    assert [G.OK if f is None else f.code for f in failures] == one_by_one == codes
    wildcard = p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"]))
    read = [[e for batch in device.read_batches([wildcard]) for e in batch] for device in (batched, single)]
    assert routes(read[0]) == expected_routes()
    assert sorted(e.SerializeToString(deterministic=True) for e in read[0]) == \
        sorted(e.SerializeToString(deterministic=True) for e in read[1])
    for last, port in [*expected_routes().items(), (5, None)]:
        frame = bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") /
                      IP(src="10.9.0.1", dst=f"10.0.0.{last}") / UDP(sport=1, dport=2) / b"x")
        outs = [[p for p, _ in device.loaded().pipeline.process(1, frame)] for device in (batched, single)]
        assert outs[0] == outs[1] == ([port] if port else [])


def test_a_run_the_engine_has_no_memory_for_leaves_the_table_as_it_was(ids, monkeypatch):
    """The engine's batch call fails without memory (injected: it changes nothing then, engine/api.h): the Write
    fails, the model is put back, reads and packets see the entries as before, and the next Write works."""
    from p4target.native.binding import Engine

    device = Device(1, engine="native")
    device.load_source(PROGRAM.read_text(), PROGRAM.name)
    device.write([p4r.Update(type=INSERT, entity=route(ids, n)) for n in (1, 2)], p4r.WriteRequest.CONTINUE_ON_ERROR)
    wildcard = p4r.Entity(table_entry=p4r.TableEntry(table_id=ids["MyIngress.ipv4_lpm"]))
    before = [e for batch in device.read_batches([wildcard]) for e in batch]

    def no_memory(self, tid, batch):
        raise MemoryError("native engine: out of memory writing a batch of table entries")

    with monkeypatch.context() as patched:
        patched.setattr(Engine, "table_batch", no_memory)
        with pytest.raises(MemoryError):
            device.write([p4r.Update(type=INSERT, entity=route(ids, 3)), p4r.Update(type=MODIFY, entity=route(ids, 1, port=9)),
                          p4r.Update(type=DELETE, entity=route(ids, 2)), p4r.Update(type=INSERT, entity=route(ids, 2, port=4))],
                         p4r.WriteRequest.CONTINUE_ON_ERROR)
    assert [e for batch in device.read_batches([wildcard]) for e in batch] == before
    assert device.write([p4r.Update(type=INSERT, entity=route(ids, 3))], p4r.WriteRequest.CONTINUE_ON_ERROR) == [None]
    for last, port in ((1, 2), (2, 2), (3, 2)):
        frame = bytes(Ether(dst="00:00:00:00:00:01", src="00:00:00:00:00:02") /
                      IP(src="10.9.0.1", dst=f"10.0.0.{last}") / UDP(sport=1, dport=2) / b"x")
        assert [p for p, _ in device.loaded().pipeline.process(1, frame)] == [port]
