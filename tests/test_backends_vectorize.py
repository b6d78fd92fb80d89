"""The Python back end's vector pass (p4target/backends/vectorize.py) changes speed, never results:
pipelines printed with and without it give the same packets, registers and counters, packet by
packet, for unrolled lane programs (saturation, out-of-bounds and wrapping indices, strided lanes,
locals declared per group, lanes as header fields) and for aggnet.p4; runs it cannot prove
lane-independent stay scalar; and it fires for aggnet's lane actions."""
import random
import re
from pathlib import Path

import bmv2_ref
import fabric as fb
import numpy as np
import pytest

from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.pipeline import Pipeline

LANES = 8
REG_SIZE = 20
FIELDS = 2 * LANES


def lane(k: int) -> str:
    """Lane k: header field f<k> (aggnet.p4's layout); lanes LANES.. are a second set."""
    return f"hdr.h.f{k}"


def unrolled(n: int, body) -> str:
    return "\n".join("        " + body(k) for k in range(n))


ACTIONS = {
    # aggnet's lane add: register read, signed saturating add, overflow OR-reduction, write back
    "add": ("bit<32> x; int<32> a; int<32> b; int<32> s;", lambda k:
            f"r.read(x, hdr.h.base + {k}); a = (int<32>)x; b = (int<32>){lane(k)}; s = a |+| b; "
            f"meta.ovf = meta.ovf | (bit<1>)(a + b != s); r.write(hdr.h.base + {k}, (bit<32>)s); {lane(k)} = (bit<32>)s;"),
    # strided int register, group-local declarations, ?:, bool, |-|, ~, -
    "mix": ("", lambda k:
            f"{{ int<32> y; q.read(y, hdr.h.base + {2 * k + 1}); bool big = y > (int<32>){lane(LANES + k)}; "
            f"bit<32> t = big ? (bit<32>)(y |-| 5) : ~{lane(LANES + k)} + {1000 * k + 7}; "
            f"q.write(hdr.h.base + {2 * k + 1}, big ? -y : y - (int<32>)t); {lane(LANES + k)} = t |-| 3; "
            f"meta.ovf = meta.ovf | (bit<1>)(!big && t == 0); }}"),
    # constant indices only (`fixed`: `const` is a keyword)
    "fixed": ("", lambda k: f"r.write({k + 3}, {lane(k)} & 0xffff0000);"),
    # a metadata field each lane writes before it reads it: a per-lane temporary, the last lane's value after
    "field": ("", lambda k: f"meta.prev = {lane(k)} + 1; {lane(k)} = meta.prev;"),
    # lanes read, added to and written back
    "fields": ("bit<32> x;", lambda k:
               f"r.read(x, hdr.h.base + {k}); {lane(k)} = {lane(k)} |+| x; r.write(hdr.h.base + {k}, {lane(k)});"),
    # every other field, from the field before it (slot stride 2)
    "odd": ("", lambda k: f"hdr.h.f{2 * k + 1} = hdr.h.f{2 * k} ^ {0x5A5A0000 + k};"),
    # must stay scalar: descending register cells (d < 0)
    "rev": ("bit<32> x;", lambda k:
            f"r.read(x, hdr.h.base + {LANES - 1 - k}); {lane(k)} = x - 1; r.write(hdr.h.base + {LANES - 1 - k}, x + {k});"),
    # must stay scalar: a running sum (each lane reads the previous lane's local)
    "acc": ("bit<32> acc = 0;", lambda k: f"acc = acc + {lane(k)}; {lane(k)} = acc;"),
    # must stay scalar: the same register cell in every lane (d = 0)
    "same": ("", lambda k: f"r.write(hdr.h.base, {lane(k)});"),
    # must stay scalar: lane k reads the cell lane k - 1 wrote
    "shift": ("bit<32> x;", lambda k: f"r.read(x, hdr.h.base + {k}); r.write(hdr.h.base + {k + 1}, x + {lane(k)});"),
    # must stay scalar: lane k + 1 reads the field lane k wrote
    "fcarry": ("", lambda k: f"hdr.h.f{k + 1} = hdr.h.f{k} + 1;"),
    # must stay scalar: a lane shifted (a shift may lose bits the scalar code keeps)
    "shl": ("", lambda k: f"{lane(k)} = {lane(k)} << 3;"),
}
SCALAR_ONLY = {"rev", "acc", "same", "shift", "fcarry", "shl"}

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> op; bit<32> base; bit<8> ovf; bit<32> prev; {fields} }}
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
    table t {{
        key = {{ hdr.h.op: exact; }}
        actions = {{ {names} NoAction; }}
        const entries = {{ {entries} }}
    }}
    apply {{
        sm.egress_spec = 1;
        t.apply();
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
    return {"fcarry": FIELDS - 1}.get(name, LANES)


def program_text() -> str:
    actions = "\n".join(f"    action {name}() {{\n        {decls}\n{unrolled(lanes_of(name), body)}\n    }}"
                        for name, (decls, body) in ACTIONS.items())
    names = "".join(f"{name}; " for name in ACTIONS)
    entries = " ".join(f"{i}: {name}();" for i, name in enumerate(ACTIONS))
    fields = " ".join(f"bit<32> f{k};" for k in range(FIELDS))
    return PROGRAM.format(size=REG_SIZE, actions=actions, names=names, entries=entries, fields=fields)


def build(program, vectorize: bool) -> Pipeline:
    """A Pipeline (our lowering of `program` on the Python back end) with its vector pass on or off."""
    return Pipeline(program, vectorize=vectorize)


def function_source(p: Pipeline, action: str) -> str:
    m = re.search(rf"^def ac\d+_{action}\(F.*?(?=^\S)", p.source, re.S | re.M)
    assert m, f"no function for action {action}"
    return m.group(0)


def vectorised(p: Pipeline, action: str) -> bool:
    return "_np." in function_source(p, action)


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
        assert vectorised(vec, f"I_{name}") == (name not in SCALAR_ONLY), name
        assert not vectorised(scalar, f"I_{name}")


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
        values = [lane_value(rng) for _ in range(FIELDS)]
        packet = bytes([op]) + base.to_bytes(4, "big") + bytes(5) + b"".join(v.to_bytes(4, "big") for v in values)
        assert vec.process(1, packet) == scalar.process(1, packet), (seed, i, list(ACTIONS)[op], base)
        assert registers(vec) == registers(scalar), (seed, i, list(ACTIONS)[op], base)


def test_vector_code_is_taken_and_saturates(unrolled_pair):
    """The fast path itself (not only the fallback) computes aggnet's saturating add."""
    vec, _ = unrolled_pair
    r = vec.state.registers["I.r"].values
    r[:LANES] = [0x7FFFFFFF, 0x80000000, 5, 0xFFFFFFFF, 0, 0, 0, 0]
    values = [1, 0xFFFFFFFF, 7, 1, 0, 0, 0, 0]
    packet = bytes([0]) + (0).to_bytes(4, "big") + bytes(5) + b"".join(v.to_bytes(4, "big") for v in values) + bytes(4 * LANES)
    out = vec.process(1, packet)[0][1]
    sums = [int.from_bytes(out[10 + 4 * k:14 + 4 * k], "big") for k in range(LANES)]
    assert sums == [0x7FFFFFFF, 0x80000000, 12, 0, 0, 0, 0, 0]
    assert r[:LANES] == sums and out[5] == 1  # registers updated, overflow flag set


# ---------------------------------------------------------------------------- aggnet.p4


@pytest.mark.parametrize("lanes", [32, 364])
def test_aggnet_lane_actions_are_vectorised(lanes):
    """lanes_add, lanes_read and lanes_write (inlined into the ingress action that calls them) and the
    lane copy on egress: each a vector run behind its bounds check, with the scalar fallback."""
    source = build(fb._program(lanes), True).source
    runs = re.findall(r"^( +)if 0 <= _e\d+ .*:\n(?:\1 .*\n)+\1else:\n", source, re.M)  # vector code, then scalar
    assert len(runs) >= 3
    assert source.count("_np.array(_R") >= 1  # lanes_add reads the lane register as an array
    assert re.search(r"^ +_v\d+ = _R\d+\[_e\d+ \+ 0:_e\d+ \+ \d+\]$", source, re.M)  # lanes_read: a plain slice copy
    assert not re.search(r"= int\(_v\d+\[-1\]\)", source)  # lanes_add's locals are read nowhere after it: no last-lane copy back


def aggnet_switch(lanes: int, vectorize: bool, slot_base: int, children: int, json_path: str = "") -> Pipeline:
    """aggnet with one job installed: our lowering of it, or p4c's JSON of it when `json_path`."""
    sw = Pipeline(bmv2_json.loads(Path(json_path).read_bytes(), json_path), vectorize=vectorize) if json_path \
        else build(fb._program(lanes), vectorize)
    fb.install_job(sw, 1, slot_base, 4, [fb.Child(p, p - 1) for p in range(1, children + 1)])
    for p in range(1, children + 1):
        fb.install_host(sw, p, fb.host_mac(p), fb.host_ip(p))
    return sw


@pytest.mark.parametrize("lanes,slot_base,p4c", [(32, 0, False), (64, 5, False), (64, 1022, False), (32, 5, True),
                                                 (32, 1022, True)])  # 1022: slots past the registers
def test_aggnet_vector_and_scalar_switches_agree(lanes, slot_base, p4c, request):
    """Our lowering of aggnet and p4c's JSON of it (whose lane indexes pass through fields first)."""
    json_path = ""
    if p4c:
        if bmv2_ref.missing():
            pytest.skip(bmv2_ref.missing())
        json_path = request.getfixturevalue("p4c_compiler").json(fb._program(lanes).source)
        assert re.search(r"^ +if 0 <= _e\d+ ", aggnet_switch(lanes, True, slot_base, 1, json_path).source, re.M)
    rng = np.random.default_rng(slot_base + lanes)
    children = 3
    vec, scalar = (aggnet_switch(lanes, v, slot_base, children, json_path) for v in (True, False))
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


def test_option_turns_the_pass_off():
    assert "_np." not in build(fb._program(64), False).source
