"""The native engine under AddressSanitizer and UndefinedBehaviorSanitizer: p4c's corpus and aggnet.p4, fuzzed.

Each target program runs once on the ordinary native engine with a Trace (p4target/native/engine.py)
recording its table entries, groups, sessions and packets with their outputs: a corpus program its
STF test, aggnet.p4 a 4-host job (p4src/aggnet.p4, entries as the controller installs them, see
tests/fabric.py) and a few rounds of contributions, retransmissions and both pools. A driver
(p4target/native/fuzz/driver.c) linked with the sanitized engine and that program replays the trace,
checking each packet's outputs against the recorded ones, then feeds it random, truncated, mutated
and extended frames built from the traced packets (a fixed seed: a run repeats exactly). A sanitizer
finding aborts the driver with its report; this script then prints it and exits 1. With --json the
programs are p4c's BMv2 JSON of the same sources (p4c on PATH), printed as C by p4target/backends/c.py.

    python scripts/fuzz_engine.py                     # every corpus program and aggnet.p4, 1,000,000 frames
    python scripts/fuzz_engine.py --frames 20000 --programs arith-bmv2,aggnet [--json]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))  # fabric: how the controller installs a job on aggnet.p4

from controller.p4c import CompileError, compile_bmv2  # noqa: E402
from p4target.errors import P4Error  # noqa: E402
from p4target.frontend import load_program  # noqa: E402
from p4target.lowered import bmv2_json  # noqa: E402
from p4target.native.build import BuildError, build_sanitized  # noqa: E402
from p4target.native.engine import Trace  # noqa: E402
from p4target.native.pipeline import NativePipeline  # noqa: E402
from p4target.stf import StfError, StfRunner, parse_stf  # noqa: E402

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


def load(path: Path, json_dir: str | None):
    """The program at `path`: our front end's IR, or (`json_dir` given) p4c's BMv2 JSON of it, compiled there."""
    if json_dir is None:
        return load_program(str(path))
    compile_bmv2(str(path), os.path.join(json_dir, path.stem))
    return bmv2_json.load_file(os.path.join(json_dir, path.stem, f"{path.stem}.json"))


def trace_stf(name: str, json_dir: str | None = None) -> tuple[str, str] | None:
    """(generated C, trace) of a corpus program's STF test on the native engine; None if it cannot run there (a
    construct the native engine lacks; a BuildError is raised)."""
    try:
        program = load(CORPUS / f"{name}.p4", json_dir)
        trace = Trace()
        pipeline = NativePipeline(program, trace=trace)
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
    pipeline = NativePipeline(load(REPO / "p4src" / "aggnet.p4", json_dir), trace=trace)
    fb.install_job(pipeline, 1, 0, 8, [fb.Child(p, p - 1) for p in range(1, hosts + 1)])
    for p in range(1, hosts + 1):
        fb.install_host(pipeline, p, fb.host_mac(p), fb.host_ip(p))
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000, help="fuzzed frames in all (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=1, help="the fuzzer's seed (default 1)")
    parser.add_argument("--programs", help="comma-separated corpus names and/or 'aggnet' (default: all)")
    parser.add_argument("--json", action="store_true", help="run p4c's BMv2 JSON of the programs (p4c on PATH)")
    args = parser.parse_args(argv)
    names = args.programs.split(",") if args.programs else [*corpus_names(), AGGNET]
    with tempfile.TemporaryDirectory(prefix="fuzz-json-") as json_dir:
        results = fuzz(names, args.frames, args.seed, json_dir=json_dir if args.json else None)
    failed = [r.name for r in results if not r.ok]
    print(f"{len(results)} programs, {sum(r.frames for r in results)} fuzzed frames, seed {args.seed}: "
          + (f"{len(failed)} failed: {', '.join(failed)}" if failed else "no finding"))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
