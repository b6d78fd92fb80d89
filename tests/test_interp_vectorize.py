"""The code generator's vector pass (p4target/interp/vectorize.py) changes speed, never results:
pipelines compiled with and without it give the same packets, registers and counters, packet
by packet, for unrolled lane programs (saturation, out-of-bounds and wrapping indices,
reversed and strided lanes, locals declared per group, lanes as header fields) and for aggnet.p4;
runs it cannot prove lane-independent stay scalar; and it fires for aggnet's lane actions."""
import random
import re

import fabric as fb
import numpy as np
import pytest

from p4target.frontend import load_program
from p4target.pipeline import Pipeline

LANES = 8
REG_SIZE = 20


def lane(k: int, reverse: bool = False, bits: int = 32) -> str:
    """Slice of lane k of hdr.h.v (bit<256>), lane 0 most significant unless `reverse`."""
    j = LANES * 32 // bits - 1 - k if reverse else k
    hi = 255 - bits * j
    return f"hdr.h.v[{hi}:{hi - bits + 1}]"


def unrolled(n: int, body) -> str:
    return "\n".join("        " + body(k) for k in range(n))


ACTIONS = {
    # aggnet's lane add: register read, signed saturating add, overflow OR-reduction, write back
    "add": ("bit<32> x; int<32> a; int<32> b; int<32> s;", lambda k:
            f"r.read(x, hdr.h.base + {k}); a = (int<32>)x; b = (int<32>){lane(k)}; s = a |+| b; "
            f"meta.ovf = meta.ovf | (bit<1>)(a + b != s); r.write(hdr.h.base + {k}, (bit<32>)s); {lane(k)} = (bit<32>)s;"),
    # strided int register, lanes in reverse order, group-local declarations, ?:, bool, |-|, ~, -
    "mix": ("", lambda k:
            f"{{ int<32> y; q.read(y, hdr.h.base + {2 * k + 1}); bool big = y > (int<32>){lane(k, True)}; "
            f"bit<32> t = big ? (bit<32>)(y |-| 5) : ~{lane(k, True)} + {1000 * k + 7}; "
            f"q.write(hdr.h.base + {2 * k + 1}, big ? -y : y - (int<32>)t); {lane(k, True)} = t |-| 3; "
            f"meta.ovf = meta.ovf | (bit<1>)(!big && t == 0); }}"),
    # descending register cells, read and written with one mapping
    "rev": ("bit<32> x;", lambda k:
            f"r.read(x, hdr.h.base + {LANES - 1 - k}); {lane(k)} = x - 1; r.write(hdr.h.base + {LANES - 1 - k}, x + {k});"),
    # constant indices only (`fixed`: `const` is a keyword)
    "fixed": ("", lambda k: f"r.write({k + 3}, {lane(k)} & 0xffff0000);"),
    # must stay scalar: a running sum (each lane reads the previous lane's local)
    "acc": ("bit<32> acc = 0;", lambda k: f"acc = acc + {lane(k)}; {lane(k)} = acc;"),
    # must stay scalar: the same register cell in every lane (d = 0)
    "same": ("", lambda k: f"r.write(hdr.h.base, {lane(k)});"),
    # must stay scalar: lane k reads the cell lane k - 1 wrote
    "shift": ("bit<32> x;", lambda k: f"r.read(x, hdr.h.base + {k}); r.write(hdr.h.base + {k + 1}, x + {lane(k)});"),
    # must stay scalar: lane k + 1 reads the chunk lane k wrote
    "carry": ("", lambda k: f"{lane(k + 1)} = {lane(k)} + 1;"),
    # must stay scalar: 64-bit lanes
    "wide": ("", lambda k: f"{lane(k, bits=64)} = {lane(k, bits=64)} + 1;"),
    # must stay scalar: a lane value stored into a non-local field
    "field": ("", lambda k: f"meta.prev = {lane(k)} + 1; {lane(k)} = meta.prev;"),
    # lanes as header fields f0..f7 (aggnet.p4's layout): read, saturating add, write back
    "fields": ("bit<32> x;", lambda k:
               f"r.read(x, hdr.h.base + {k}); hdr.h.f{k} = hdr.h.f{k} |+| x; r.write(hdr.h.base + {k}, hdr.h.f{k});"),
    # every other field, written from the wide lanes
    "odd": ("", lambda k: f"hdr.h.f{2 * k + 1} = {lane(k)} ^ hdr.h.f{2 * k};"),
    # must stay scalar: lane k + 1 reads the field lane k wrote
    "fcarry": ("", lambda k: f"hdr.h.f{k + 1} = hdr.h.f{k} + 1;"),
}
SCALAR_ONLY = {"acc", "same", "shift", "carry", "wide", "field", "fcarry"}
FIELDS = 8

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> op; bit<32> base; bit<8> ovf; bit<32> prev; bit<256> v; {fields} }}
struct metadata {{ bit<1> ovf; bit<32> prev; }}
struct headers {{ h_t h; }}
parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    state start {{ pkt.extract(hdr.h); transition accept; }}
}}
control VC(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{
    register<bit<32>>({size}) r;
    register<int<32>>({size}) q;
{actions}
    apply {{
        sm.egress_spec = 1;
{calls}
        hdr.h.ovf = (bit<8>)meta.ovf;
        hdr.h.prev = meta.prev;
    }}
}}
control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {{ apply {{ }} }}
control CC(inout headers hdr, inout metadata meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers hdr) {{ apply {{ pkt.emit(hdr.h); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def lanes_of(name: str) -> int:
    return {"wide": LANES // 2, "carry": LANES - 1, "odd": FIELDS // 2, "fcarry": FIELDS - 1}.get(name, LANES)


def program_text() -> str:
    actions = "\n".join(f"    action {name}() {{\n        {decls}\n{unrolled(lanes_of(name), body)}\n    }}"
                        for name, (decls, body) in ACTIONS.items())
    calls = "\n".join(f"        if (hdr.h.op == {i}) {{ {name}(); }}" for i, name in enumerate(ACTIONS))
    fields = " ".join(f"bit<32> f{k};" for k in range(FIELDS))
    return PROGRAM.format(size=REG_SIZE, actions=actions, calls=calls, fields=fields)


def build(program, vectorize: bool) -> Pipeline:
    """A Pipeline whose code generator runs with the vector pass on or off."""
    return Pipeline(program, vectorize=vectorize)


def function_source(p: Pipeline, action: str) -> str:
    m = re.search(rf"^def a\d+_{action}\(F.*?(?=^\S)", p.source, re.S | re.M)
    assert m, f"no function for action {action}"
    return m.group(0)


def vectorised(p: Pipeline, action: str) -> bool:
    return "# vectorised:" in function_source(p, action)


def lane_value(rng: random.Random) -> int:
    """A 32-bit lane, often at or next to the int32 saturation points."""
    edge = rng.choice([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x7FFFFFF0, 0x80000010])
    return rng.getrandbits(32) if rng.random() < 0.4 else (edge + rng.randint(-3, 3)) & 0xFFFFFFFF


def registers(p: Pipeline) -> dict:
    return {name: list(r.values) for name, r in p.state.registers.items()}


def counters(p: Pipeline) -> dict:
    return {name: (list(c.packets), list(c.bytes)) for name, c in p.state.counters.items()}


@pytest.fixture(scope="module")
def unrolled_pair(tmp_path_factory):
    path = tmp_path_factory.mktemp("vec") / "lanes.p4"
    path.write_text(program_text())
    program = load_program(str(path))
    return build(program, True), build(program, False)


def test_plain_runs_are_vectorised_and_dependent_ones_are_not(unrolled_pair):
    vec, scalar = unrolled_pair
    for name in ACTIONS:
        assert vectorised(vec, name) == (name not in SCALAR_ONLY), name
        assert not vectorised(scalar, name)


@pytest.mark.parametrize("seed", range(4))
def test_vector_and_scalar_pipelines_agree_packet_by_packet(unrolled_pair, seed):
    vec, scalar = unrolled_pair
    rng = random.Random(seed)
    cells = [[rng.getrandbits(32) for _ in range(REG_SIZE)] for _ in range(2)]
    for p in (vec, scalar):
        p.state.registers["I.r"].values[:] = cells[0]
        p.state.registers["I.q"].values[:] = cells[1]  # int<32> registers hold the bit pattern
    for i in range(300):
        op = i % len(ACTIONS) if i < 2 * len(ACTIONS) else rng.randrange(len(ACTIONS))
        base = rng.choice([0, 1, REG_SIZE - LANES, REG_SIZE - LANES + 1, REG_SIZE - 1, REG_SIZE + 3,
                           0xFFFFFFFF - 2, rng.randrange(REG_SIZE)])  # in bounds, partly out, wrapping
        values = [lane_value(rng) for _ in range(LANES + FIELDS)]
        packet = bytes([op]) + base.to_bytes(4, "big") + bytes(5) + b"".join(v.to_bytes(4, "big") for v in values)
        assert vec.process(1, packet) == scalar.process(1, packet), (seed, i, list(ACTIONS)[op], base)
        assert registers(vec) == registers(scalar), (seed, i, list(ACTIONS)[op], base)


def test_vector_code_is_taken_and_saturates(unrolled_pair):
    """The fast path itself (not only the fallback) computes aggnet's saturating add."""
    vec, _ = unrolled_pair
    r = vec.state.registers["I.r"].values
    r[:LANES] = [0x7FFFFFFF, 0x80000000, 5, 0xFFFFFFFF, 0, 0, 0, 0]
    values = [1, 0xFFFFFFFF, 7, 1, 0, 0, 0, 0]
    packet = bytes([0]) + (0).to_bytes(4, "big") + bytes(5) + b"".join(v.to_bytes(4, "big") for v in values) + bytes(4 * FIELDS)
    out = vec.process(1, packet)[0][1]
    sums = [int.from_bytes(out[10 + 4 * k:14 + 4 * k], "big") for k in range(LANES)]
    assert sums == [0x7FFFFFFF, 0x80000000, 12, 0, 0, 0, 0, 0]
    assert r[:LANES] == sums and out[5] == 1  # registers updated, overflow flag set


# ---------------------------------------------------------------------------- aggnet.p4


@pytest.mark.parametrize("lanes", [32, 364])
def test_aggnet_lane_actions_are_vectorised(lanes):
    p = fb.switch(lanes)
    for action in ("lanes_add", "lanes_read", "lanes_write"):
        assert vectorised(p, action), action
        assert "else:" in function_source(p, action)  # with the scalar fallback


def aggnet_switch(lanes: int, vectorize: bool, slot_base: int, children: int) -> Pipeline:
    sw = build(fb._program(lanes), vectorize)
    fb.install_job(sw, 1, slot_base, 4, [fb.Child(p, p - 1) for p in range(1, children + 1)])
    for p in range(1, children + 1):
        fb.install_host(sw, p, fb.host_mac(p), fb.host_ip(p))
    return sw


@pytest.mark.parametrize("lanes,slot_base", [(32, 0), (64, 5), (64, 1022)])  # 1022: slots past the registers
def test_aggnet_vector_and_scalar_switches_agree(lanes, slot_base):
    rng = np.random.default_rng(slot_base + lanes)
    children = 3
    vec, scalar = (aggnet_switch(lanes, v, slot_base, children) for v in (True, False))
    for i in range(160):
        edge = rng.choice([2**31 - 1, -2**31, 2**30, -2**30, 0])
        values = (edge + rng.integers(-2**29, 2**29, size=lanes)).clip(-2**31, 2**31 - 1)
        packet = fb.packet(1, int(rng.integers(4)), i // 6, values, pool=int(rng.integers(2)),
                           retx=bool(rng.random() < 0.15), src=int(rng.integers(1, children + 1)), lanes=lanes)
        port = int(rng.integers(1, children + 1))
        assert vec.process(port, packet) == scalar.process(port, packet), i
    assert registers(vec) == registers(scalar)
    assert counters(vec) == counters(scalar)
    assert sum(counters(vec)["AggIngress.agg_aggregated"][0]) > 0  # lanes were really added


def test_compiler_option_turns_the_pass_off():
    assert "# vectorised:" not in build(fb._program(64), False).source
