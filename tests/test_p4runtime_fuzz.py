"""P4Runtime writes fuzzed into a running `aggnet switch` over real gRPC (scripts/fuzz_p4runtime.py),
bounded: valid-looking entities of every kind with wrong ids, widths, kinds, parameters and update
orders mixed in get clean gRPC answers, the switch keeps answering reads and still takes a valid
write. The full run (20,000 updates a program): `python scripts/fuzz_p4runtime.py`."""
import sys
from pathlib import Path

import pytest

from p4target.device_config import device_config_source
from p4target.externs.register import Register
from p4target.runtime import RuntimeServer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import fuzz_p4runtime as fz  # noqa: E402

UPDATES = 1500


@pytest.mark.parametrize("program", fz.PROGRAMS)
def test_fuzzed_writes_get_clean_answers_and_the_switch_keeps_serving(program):
    result = fz.fuzz_program(program, UPDATES, seed=1)
    assert result.findings == []
    assert result.updates == UPDATES
    assert 0 < result.accepted < UPDATES  # valid updates went in, broken ones were refused


def test_the_same_seed_sends_the_same_updates():
    def first_batch(seed: int) -> list[bytes]:
        fuzzer = fz.Fuzzer(_p4info(), fz.random.Random(seed))
        return [fuzzer.update().SerializeToString() for _ in range(50)]
    assert first_batch(3) == first_batch(3) != first_batch(4)


def test_an_update_that_crashes_the_server_is_a_finding(tmp_path, monkeypatch):
    """The fuzzer notices a server bug: here, register writes made to raise a plain Python error."""
    def broken(self, translator, update_type, entry):
        raise KeyError("planted bug")
    monkeypatch.setattr(Register, "p4runtime_write", broken)
    server = RuntimeServer(device_id=1, address="127.0.0.1:0", log_path=str(tmp_path / "requests.txt"),
                           engine="python")
    port = server.start()
    try:
        aggnet_p4 = str(fz.REPO / "p4src" / "aggnet.p4")
        server.device.load_source(device_config_source(aggnet_p4), aggnet_p4)  # a pushed text carries no includes
        result = fz.fuzz_switch(port, "p4src/aggnet.p4", 300, seed=1)
    finally:
        server.stop()
    assert result.findings  # answered INTERNAL in one line, the traceback in the switch's log
    assert all("Write answered INTERNAL: internal error (KeyError)" in f for f in result.findings)


def _p4info():
    from p4target.frontend import load_program
    from p4target.p4info import build_p4info

    return build_p4info(load_program(str(fz.REPO / "p4src" / "aggnet.p4")))
