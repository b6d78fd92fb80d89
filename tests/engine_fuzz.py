"""The native engine under AddressSanitizer and UndefinedBehaviorSanitizer: p4c's corpus and aggnet.p4, fuzzed
(the harness: scripts/fuzz_engine.py is its command line, tests/test_native_fuzz.py and the other native tests run
it bounded).

Each target program runs once on the ordinary native engine with a Trace (p4target/native/binding.py)
recording its table entries, groups, sessions and packets with their outputs: a corpus program its
STF test, aggnet.p4 a 4-host job (p4src/aggnet.p4, entries as the controller installs them, see
tests/fabric.py) and a few rounds of contributions, retransmissions and both pools. A driver
(p4target/native/fuzz/driver.c) linked with the sanitized engine and that program replays the trace,
checking each packet's outputs against the recorded ones, then feeds it random, truncated, mutated
and extended frames built from the traced packets (a fixed seed: a run repeats exactly). A sanitizer
finding aborts the driver with its report (a failed Result). With `json_dir` the programs are p4c's BMv2
JSON of the same sources (p4c on PATH), printed as C by p4target/backends/c.py.
"""
from __future__ import annotations

import ipaddress
import os
import random
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from controller.p4c import CompileError, compile_bmv2
from p4target import load
from p4target.errors import P4Error
from p4target.frontend import load_program
from p4target.lowered import bmv2_json
from p4target.native.binding import Trace
from p4target.native.build import BuildError, build_sanitized
from p4target.stf import StfError, StfRunner, parse_stf

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "p4target" / "native" / "fuzz" / "driver.c"
CORPUS = Path(os.environ.get("AGGNET_P4C_CORPUS") or REPO.parent / "shared" / "p4c-corpus")
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/p4c-corpus")
PASSING = REPO / "tests" / "data" / "p4c_corpus_pass.txt"  # the corpus programs the target passes
AGGNET = "aggnet"
SANITIZERS = {"ASAN_OPTIONS": "abort_on_error=0:detect_leaks=1", "UBSAN_OPTIONS": "print_stacktrace=1"}


@dataclass
class Result:
    name: str
    frames: int
    ok: bool
    line: str  # the driver's counts, or why it failed


def corpus_names() -> list[str]:
    """The corpus programs with an STF test that BMv2 and this target both pass."""
    passing = {ln.strip() for ln in PASSING.read_text().splitlines() if ln.strip() and not ln.startswith("#")}
    listed = (CORPUS / "PASS_ON_BMV2.txt").read_text().split()
    return [n.removesuffix(".p4") for n in listed
            if n.removesuffix(".p4") in passing and (CORPUS / f"{n.removesuffix('.p4')}.stf").is_file()]


def program_at(path: Path, json_dir: str | None):
    """The program at `path`: our front end's IR, or (`json_dir` given) p4c's BMv2 JSON of it, compiled there."""
    if json_dir is None:
        return load_program(str(path))
    compile_bmv2(str(path), os.path.join(json_dir, path.stem))
    return bmv2_json.load_file(os.path.join(json_dir, path.stem, f"{path.stem}.json"))


def trace_stf(name: str, json_dir: str | None = None) -> tuple[str, str] | None:
    """(generated C, trace) of a corpus program's STF test on the native engine; None if it cannot run there (a
    construct the native engine lacks; a BuildError is raised)."""
    try:
        program = program_at(CORPUS / f"{name}.p4", json_dir)
        trace = Trace()
        pipeline = load.native(program, trace=trace)
    except P4Error:  # the lowering or the C printer refused a construct
        return None
    stf = CORPUS / f"{name}.stf"
    try:
        StfRunner(pipeline, str(stf)).run(parse_stf(stf.read_text(), str(stf)))
    except StfError:
        pass  # what ran until the error is traced
    try:
        return pipeline.source, trace.text()  # reads the registers: before the engine is freed
    finally:
        pipeline.close()


def trace_aggnet(json_dir: str | None = None) -> tuple[str, str]:
    """(generated C, trace) of aggnet.p4 with one 4-host job and contributions that fill, complete and
    re-ask for slots of both pools (so mutated aggregation packets reach the register code)."""
    import fabric as fb

    hosts = 4
    trace = Trace()
    pipeline = load.native(program_at(REPO / "p4src" / "aggnet.p4", json_dir), trace=trace)
    fb.install_job(pipeline, 1, 0, 8, [fb.Child(p, p - 1) for p in range(1, hosts + 1)])
    _install_in_batches(pipeline, hosts)
    for seq in range(24):  # slots 0..7, pools 0,1,0
        slot, pool = seq % 8, (seq // 8) % 2
        for h in range(1, hosts + 1):
            values = [seq * h, -h, 2**31 - 1, -2**31] + list(range(28))
            pipeline.process(h, fb.packet(1, slot, seq, values, pool=pool, src=h, retx=seq % 5 == 0 and h == 1))
        pipeline.process(2, fb.packet(1, slot, seq, [1], pool=pool, src=2, retx=True))  # asks again
    pipeline.process(1, fb.packet(2, 0, 0, [1], src=1))  # a job the switch does not know
    try:
        return pipeline.source, trace.text()  # reads the registers: before the engine is freed
    finally:
        pipeline.close()


def _install_in_batches(pipeline, hosts: int) -> None:
    """The hosts' entries as fabric.install_host makes them, written in one run (the engine's batch entry point),
    with a spare entry added, modified and deleted in it; and a child of job 2 added and deleted in a priority
    table's run (job 2 stays unknown)."""
    import fabric as fb

    from p4target import state as st

    def host(port: int, mac: str, ip: str) -> st.TableEntry:
        return st.TableEntry({"standard_metadata.egress_port": st.Exact(port)}, "AggEgress.set_host",
                             {"mac": int(mac.replace(":", ""), 16), "ip": int(ipaddress.IPv4Address(ip)),
                              "udp_port": fb.wire.AGG_PORT})

    spare = hosts + 1
    writes = [("insert", host(p, fb.host_mac(p), fb.host_ip(p))) for p in range(1, spare + 1)]
    writes += [("modify", host(spare, fb.host_mac(1), fb.host_ip(1))), ("delete", host(spare, "0:0:0:0:0:0", "0.0.0.0"))]
    child = st.TableEntry({"hdr.agg.job_id": st.Exact(2), "standard_metadata.ingress_port": st.Exact(1),
                           "hdr.ipv4.srcAddr": st.Ternary(0, 0)}, "AggIngress.set_child", {"index": 0}, priority=1)
    for table, run in (("AggEgress.agg_host", writes), ("AggIngress.agg_child", [("insert", child), ("delete", child)])):
        assert pipeline.state.write_entries(table, run) == [None] * len(run)


def run(name: str, source: str, trace: str, frames: int, seed: int) -> Result:
    """The sanitized driver over one program's trace and `frames` fuzzed frames."""
    with tempfile.NamedTemporaryFile("w", suffix=".trace", delete=False) as f:
        f.write(trace)
    try:
        with build_sanitized(source, DRIVER) as exe:
            proc = subprocess.run([str(exe), f.name, str(frames), str(seed)], capture_output=True, text=True,
                                  env={**os.environ, **SANITIZERS})
    finally:
        os.unlink(f.name)
    if proc.returncode != 0:
        report = (proc.stdout + proc.stderr).strip().splitlines()
        return Result(name, frames, False, "\n".join(report[-40:]) or f"exit code {proc.returncode}")
    return Result(name, frames, True, proc.stdout.strip())


def fuzz(names: list[str], frames: int, seed: int, report=print, json_dir: str | None = None) -> list[Result]:
    """Every program in `names` (corpus names, or AGGNET): half the frames to aggnet.p4 (when listed), the rest
    shared by the corpus programs the native engine runs. `json_dir`: run p4c's JSON of them, compiled there."""
    traces, results = {}, []
    for name in names:
        try:
            traced = trace_aggnet(json_dir) if name == AGGNET else trace_stf(name, json_dir)
        except (BuildError, CompileError) as exc:  # the generated code does not compile (with -Werror): a finding
            results.append(Result(name, 0, False, str(exc)))
            report(f"{name}: FAILED\n{exc}")
            continue
        if traced is None:
            report(f"{name}: skipped (runs on the Python engine)")
        else:
            traces[name] = traced
    corpus = [n for n in traces if n != AGGNET]
    share = {n: frames // 2 for n in traces if n == AGGNET}
    rest = frames - sum(share.values())
    for i, n in enumerate(corpus):
        share[n] = rest // len(corpus) + (1 if i < rest % len(corpus) else 0)
    if not corpus and AGGNET in share:
        share[AGGNET] = frames
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:  # gcc and the driver are processes: one per core
        runs = [pool.submit(run, name, source, trace, share[name], seed) for name, (source, trace) in traces.items()]
        for future in runs:
            result = future.result()
            report(f"{result.name}: {result.line}" if result.ok else f"{result.name}: FAILED\n{result.line}")
            results.append(result)
    return results


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A malformed variant of a frame: truncated, extended, or with some bits flipped (the control-plane fuzzer,
    scripts/fuzz_control_plane.py, and tests/test_native_differential.py)."""
    kind = rng.randrange(4)
    if kind == 0:
        return data[:rng.randrange(len(data) + 1)]
    if kind == 1:
        return data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40)))
    out = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        if out:
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
    return bytes(out)
