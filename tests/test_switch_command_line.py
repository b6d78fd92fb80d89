"""simple_switch's and simple_switch_grpc's whole command line on `aggnet switch` (issue 33).

- Every option of both `--help` texts is in docs/targets.md's table and known to the switch; the ones it
  cannot honour are refused in one line naming them (exit 1), none is ignored.
- Values are read as BMv2's boost::program_options reads them (`-i 0@pcap0` as one argument, `=` forms,
  prefixes, a general option given twice refused, no whitespace in integers).
- A link named `simple_switch` opens no P4Runtime server (a topology of Thrift-only switches beside one
  simple_switch_grpc does not collide); one named `simple_switch_grpc` does.
- pcap-file ports: a p4c STF-style exchange through pcap files (FIFOs, as p4c's driver makes them), entries
  loaded by the real simple_switch_CLI over Thrift, gives packet for packet what simple_switch gives.
- `--nanolog ADDR`: BMv2's event log over nanomsg; the packet events each packet gets equal simple_switch's on the
  same exchange, on both engines.
- Captures complete after SIGKILL right after traffic (root: veth ports).
- The rest of the table, row by row: --help/--version/--json-version print and exit 0, the defaults it states,
  --max-port-count, --log-file's rotation (BMv2's names), --log-console (not with --log-file, as BMv2),
  --log-flush, --log-level, --dump-packet-data, --pcap ignored in files mode, --use-files' wait, BMv2's values
  of the fixed target options taken, --cpu-port.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import bmv2_ref
import pytest
from procs import free_port, stop_process, veth_pairs, wait_for, wait_until

from controller.p4rt import SwitchConnection
from p4target import nanolog, switch_options
from p4target.ports import FilePort, PcapReplay, PcapWriter, read_pcap
from p4target.switch import Bmv2LogFile
from testbed import cli

REPO = Path(__file__).resolve().parent.parent
AGGNET = REPO / ".venv" / "bin" / "aggnet"
BASIC = REPO / "tests" / "data" / "tutorial_basic" / "basic.p4"
DOCS = REPO / "docs" / "targets.md"
needs_bmv2 = pytest.mark.skipif(bool(bmv2_ref.missing()), reason=bmv2_ref.missing() or "-")


def parse(argv: list[str]) -> argparse.Namespace:
    """The switch's options as `aggnet switch ARGV` reads them, checked (OptionError if refused)."""
    parser = argparse.ArgumentParser(prog="aggnet switch", exit_on_error=False)
    switch_options.add_arguments(parser)
    args = parser.parse_args(switch_options.normalize_argv(argv))
    switch_options.check_options(args)
    return args


# ------------------------------------------------------------------------------------------ the option table

def help_options(binary: str) -> set[str]:
    """The long options `BINARY --help` lists (general and target ones)."""
    text = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"^  (?:-\w \[ )?(--[a-z0-9-]+)", text, re.M))


@pytest.mark.bmv2
@needs_bmv2
def test_every_option_of_both_help_texts_is_in_the_docs_table_and_known():
    options = help_options("simple_switch") | help_options("simple_switch_grpc")
    assert {"--use-files", "--enable-swap", "--grpc-server-addr", "--max-l2-entries"} <= options  # the parse works
    rows = dict(re.findall(r"^\| `(--[a-z0-9-]+)[^`]*` \|[^|]*\| ([^|]+) \|$", DOCS.read_text(), re.M))
    parser = argparse.ArgumentParser()
    switch_options.add_arguments(parser)
    for option in sorted(options):
        assert rows.get(option, "").strip(), f"{option}: no row in docs/targets.md's option table"
        assert option in parser._option_string_actions, f"{option}: aggnet switch does not know it"


@pytest.mark.parametrize("argv", [
    ["--packet-in", "ipc:///tmp/x.ipc"], ["--notifications-addr", "ipc:///x"],
    ["--restore-state", "state.txt"], ["--", "--load-modules", "x.so"], ["--", "--enable-swap"],
    ["--", "--disable-swap"], ["--", "--dp-grpc-server-addr", "0.0.0.0:50052"], ["--", "--drop-port", "500"],
    ["--", "--priority-queues", "8"], ["--", "--max-mc-groups", "16"], ["--", "--max-l1-entries", "1"],
    ["--", "--max-l2-entries", "1"]])
def test_options_it_cannot_honour_are_refused_in_one_line_naming_them(argv, capsys):
    flag = next(a for a in argv if a.startswith("--") and a != "--")
    assert cli.main(["switch", "--no-p4", "--thrift-port", "1", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {flag}") and "not supported by aggnet switch" in err and "\n" not in err, err


def test_values_are_read_as_boost_reads_them():
    args = parse(["-i 0@pcap0", "-i", " 1@pcap1", "--interface=2@pcap2", "-i3@pcap3", "--thr=9092", "--no-p4",
                  "--pcap", "--", "--cpu-port", "5", "--cpu-port", "6"])
    from p4target.ports import parse_port_spec

    assert [parse_port_spec(s) for s in args.interface] == [(0, "pcap0"), (1, "pcap1"), (2, "pcap2"), (3, "pcap3")]
    assert (args.thrift_port, args.pcap, args.cpu_port) == (9092, ".", 6)  # a target option's last value, as BMv2
    assert parse(["--pcap=out", "--device-id=3", "--use-files", "-1", "--no-p4"]).pcap == "out"
    with pytest.raises(argparse.ArgumentError, match="cannot be specified more than once"):
        parse(["--thrift-port", "1", "--thrift-port", "2", "--no-p4"])
    with pytest.raises(switch_options.OptionError, match="--device-id ' 3': expected a decimal integer"):
        parse(["--device-id", " 3", "--no-p4"])
    with pytest.raises(switch_options.OptionError, match="2 ports .* --max-port-count 1"):
        parse(["--max-port-count", "1", "-i", "0@a", "-i", "1@b", "--no-p4"])


def test_each_flavour_takes_its_binarys_defaults():
    assert parse(["--device-id", "3", "--no-p4"]).thrift_port == 9093  # aggnet switch: one per device
    bmv2 = parse(["--flavour", "simple_switch_grpc", "--device-id", "3", "--no-p4"])
    assert (bmv2.thrift_port, bmv2.grpc_server_addr) == (9090, "0.0.0.0:9559")
    with pytest.raises(switch_options.OptionError, match="please specify an input JSON configuration file"):
        parse(["--flavour", "simple_switch"])


def table_options() -> list[str]:
    """The options docs/targets.md's table has a row for, in its order."""
    return re.findall(r"^\| `(--[a-z0-9-]+)", DOCS.read_text(), re.M)


@pytest.mark.parametrize("prog", ["aggnet", "simple_switch"])
def test_help_version_and_json_version_print_and_exit_0(prog, capsys):
    def printed(*argv: str) -> str:
        with pytest.raises(SystemExit) as done:
            cli.main(["switch", *argv] if prog == "aggnet" else list(argv), prog=prog)
        assert done.value.code == 0
        return capsys.readouterr().out

    for flag in ("--help", "-h"):
        text = printed(flag)
        assert [o for o in table_options() if o not in text] == [], flag  # every row's option is listed
    assert printed("--version") == printed("-v") == f"aggnet switch {version('aggnet')}\n"  # the installed one
    assert printed("--json-version") == "2.24\n"  # what simple_switch 1.15 prints


def test_defaults_are_the_tables():
    args = parse(["--no-p4"])
    assert (args.log_file_max_size, args.log_file_max_files, args.max_port_count, args.dump_packet_data,
            args.cpu_port, args.log_level) == (5242880, 3, 512, 0, 255, None)  # log level None: info
    assert (args.drop_port, args.priority_queues, args.max_mc_groups, args.max_l1_entries,
            args.max_l2_entries) == (511, 1, 4096, 4096, 8192)
    assert parse(["--max-port-count", "2", "-i", "0@a", "-i", "1@b", "--no-p4"]).interface == ["0@a", "1@b"]


# In-process refusals name a program that does not exist: were the refusal gone, the run would end at once
# (exit 2) rather than serve until the test's timeout.
NO_PROGRAM = "/nonexistent/none.p4"


def test_more_ports_than_max_port_count_is_one_line_exit_1(capsys):
    ports = [f"-i{n}@p{n}" for n in range(513)]
    assert cli.main(["switch", NO_PROGRAM, *ports]) == 1  # 512 by default
    assert capsys.readouterr().err == "error: 513 ports (-i) but --max-port-count 512\n"


def test_log_console_and_log_file_are_exclusive_as_on_bmv2(capsys, tmp_path):
    assert cli.main(["switch", NO_PROGRAM, "--log-console", "--log-file", str(tmp_path / "s1")]) == 1
    assert capsys.readouterr().err == "error: --log-console and --log-file are exclusive\n"  # simple_switch's words


def test_a_port_given_twice_or_past_510_is_one_line(capsys):
    for ports, message in [(["-i", "0@a", "-i", " 0@b"], "error: -i ' 0@b': port 0 is given twice"),
                           (["-i", "511@a"], "error: -i '511@a': port 511 out of range 0..510 (511 is the drop port)")]:
        assert cli.main(["switch", NO_PROGRAM, *ports]) == 2
        assert capsys.readouterr().err == message + "\n"


# ------------------------------------------------------------------------------------------ flavours

def listening_ports(pid: int) -> set[int]:
    """TCP ports process `pid` listens on (its sockets' inodes matched in /proc/net/tcp and tcp6)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


@pytest.fixture
def bmv2_names(tmp_path):
    """A folder with links named simple_switch and simple_switch_grpc to this checkout's `aggnet`."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for name in cli.BMV2_NAMES:
        (folder / name).symlink_to(AGGNET)
    return folder


def start(argv: list[str], cwd: Path, log: Path) -> subprocess.Popen:
    with open(log, "w") as out:
        return subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)


def test_simple_switch_serves_thrift_only_beside_one_simple_switch_grpc(bmv2_names, tmp_path):
    thrift = [free_port() for _ in range(3)]
    grpc = free_port()
    procs = []
    try:
        for i, port in enumerate(thrift[:2]):
            procs.append(start([str(bmv2_names / "simple_switch"), "--device-id", str(i), "--thrift-port", str(port),
                                "--no-p4"], tmp_path, tmp_path / f"s{i}.log"))
        procs.append(start([str(bmv2_names / "simple_switch_grpc"), "--device-id", "2", "--thrift-port", str(thrift[2]),
                            "--no-p4", "--", "--grpc-server-addr", f"127.0.0.1:{grpc}"], tmp_path, tmp_path / "s2.log"))
        for i, (proc, port) in enumerate(zip(procs, thrift)):
            wait_for(port, proc, tmp_path / f"s{i}.log")
        wait_for(grpc, procs[2], tmp_path / "s2.log")
        assert [listening_ports(p.pid) for p in procs] == [{thrift[0]}, {thrift[1]}, {thrift[2], grpc}]
        # the line saying so may reach the log after the port listens (a busy machine): wait for it
        said = wait_until(lambda: "no grpc" in (text := (tmp_path / "s0.log").read_text()) and text, procs[0])
        assert "(simple_switch)" in said
    finally:
        for proc in procs:
            stop_process(proc)
    assert [p.returncode for p in procs] == [0, 0, 0]  # SIGTERM: a clean stop, with or without a gRPC server
    refused = subprocess.run([str(bmv2_names / "simple_switch"), "--no-p4", "--", "--grpc-server-addr", "127.0.0.1:1"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("error: --grpc-server-addr: simple_switch has no such option "
                                      "(simple_switch_grpc has)")
    for name in cli.BMV2_NAMES:  # an option neither binary has: exit 1, as BMv2's parser (aggnet switch: 2)
        unknown = subprocess.run([str(bmv2_names / name), "--no-such-option"], capture_output=True, text=True,
                                 timeout=120)
        assert unknown.returncode == 1 and "unrecognized arguments: --no-such-option" in unknown.stderr
    assert subprocess.run([str(AGGNET), "switch", "--no-such-option"], capture_output=True, timeout=120).returncode == 2


# ------------------------------------------------------------------------------------------ pcap-file ports

ENTRIES = ["table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.1.1/32 => 00:00:00:00:01:01 1",
           "table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.2/32 => 00:00:00:00:02:02 0"]


def ipv4(dst: str, ttl: int = 64) -> bytes:
    header = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28, 0, 0, ttl, 17, 0, socket.inet_aton("10.0.0.9"),
                         socket.inet_aton(dst))
    return bytes.fromhex("000000000101" "000000000909" "0800") + header + b"udp-ish!"


# per input port: frames, in file order (10.0.9.9 has no route: dropped)
INPUTS = {0: [ipv4("10.0.1.1"), ipv4("10.0.2.2"), ipv4("10.0.9.9")], 1: [ipv4("10.0.1.1", 7)]}


def open_fifo_writer(path: Path, proc: subprocess.Popen, log: Path) -> int:
    """The FIFO opened for writing once the switch has opened it for reading (no timing assumed)."""
    deadline = time.monotonic() + 120
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            return fd
        except OSError:  # ENXIO: no reader yet
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)


def files_exchange(argv: list[str], folder: Path, before_traffic: Callable[[], None] = lambda: None
                   ) -> dict[int, list[bytes]]:
    """An STF-style run through pcap files: the switch (ARGV + files options) started on FIFOs, entries added by
    simple_switch_CLI, then the packets; what each port wrote, once every expected frame is out.
    `before_traffic` runs once the switch answers on Thrift."""
    folder.mkdir()
    for port in INPUTS:
        os.mkfifo(folder / f"pcap{port}_in.pcap")
    thrift, log = free_port(), folder / "switch.log"
    proc = start([*argv, "--use-files", "0", "--thrift-port", str(thrift),
                  *[f"-i {port}@pcap{port}" for port in INPUTS]], folder, log)  # one argument each, as p4c's driver
    writers = {}
    try:
        for port in INPUTS:
            writers[port] = open_fifo_writer(folder / f"pcap{port}_in.pcap", proc, log)
            os.write(writers[port], struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        wait_for(thrift, proc, log)
        before_traffic()
        done = subprocess.run(["simple_switch_CLI", "--thrift-port", str(thrift)], input="\n".join(ENTRIES) + "\n",
                              capture_output=True, text=True, timeout=120)
        assert done.stdout.count("Entry has been added") == len(ENTRIES), done.stdout + done.stderr
        t = 1000.0
        for port, frames in INPUTS.items():
            for frame in frames:
                os.write(writers[port], struct.pack("<IIII", int(t), 0, len(frame), len(frame)) + frame)
                t += 3600.0  # an hour apart: BMv2 keeps the records' order, not their spacing
            os.close(writers.pop(port))
        deadline = time.monotonic() + 120
        while sum(len(outputs(folder)[p]) for p in INPUTS) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.05)
    finally:
        for fd in writers.values():
            os.close(fd)
        stop_process(proc)
    return outputs(folder)


def records(path: Path) -> list[bytes]:
    """The frames of a pcap file (none while it has no header yet)."""
    return [f for _, f in read_pcap(str(path))] if path.exists() and path.stat().st_size >= 24 else []


def outputs(folder: Path) -> dict[int, list[bytes]]:
    return {port: records(folder / f"pcap{port}_out.pcap") for port in INPUTS}


def pcap_file(path: Path, frames: list[bytes]) -> None:
    writer = PcapWriter(str(path))
    for frame in frames:
        writer.write(frame)
    writer.close()


def simple_switch(program: str, folder: Path) -> list[str]:
    """BMv2's simple_switch with its nanomsg notifications in `folder`: by default every simple_switch of
    device 0 binds ipc:///tmp/bmv2-0-notifications.ipc, so another one running on the machine stops it."""
    return ["simple_switch", program, "--notifications-addr", f"ipc://{folder}/notifications.ipc"]


@pytest.fixture(scope="module")
def basic_json(tmp_path_factory):
    return bmv2_ref.compile_json(str(BASIC), str(tmp_path_factory.mktemp("p4c")))


@pytest.fixture(scope="module")
def simple_switch_outputs(basic_json, tmp_path_factory):
    return files_exchange(simple_switch(basic_json, folder := tmp_path_factory.mktemp("bmv2")), folder / "run")


@pytest.mark.bmv2
@needs_bmv2
@pytest.mark.parametrize("engine", ["native", "python"])
def test_stf_exchange_through_pcap_files_equals_simple_switch(engine, basic_json, simple_switch_outputs, bmv2_names,
                                                             tmp_path):
    # simple_switch's own outputs first: the routed frames, on their ports, TTL down by one
    assert [f[30:34] for f in simple_switch_outputs[1]] == [socket.inet_aton("10.0.1.1")] * 2
    assert [f[22] for f in simple_switch_outputs[1]] == [63, 6]
    assert [f[:6] for f in simple_switch_outputs[0]] == [bytes.fromhex("000000000202")]
    ours = files_exchange([str(bmv2_names / "simple_switch"), "--engine", engine, basic_json], tmp_path / "run")
    assert ours == simple_switch_outputs
    assert f"pipeline set ({engine} engine)" in (tmp_path / "run" / "switch.log").read_text()


def test_missing_input_file_is_one_line(bmv2_names, tmp_path):
    done = subprocess.run([str(bmv2_names / "simple_switch"), "--use-files", "0", "-i", "0@nowhere", "--no-p4"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == "error: port 0: nowhere_in.pcap: no such file (--use-files reads it)"


def test_use_files_waits_wait_seconds_before_reading(tmp_path):
    """--use-files WAIT: nothing is read before a wait of WAIT seconds (the clock is the replay's stop event,
    made to pass its time at once and to note what it waited)."""
    frames = [bytes([i]) * 60 for i in range(3)]
    pcap_file(tmp_path / "p0_in.pcap", frames)
    port = FilePort(0, str(tmp_path / "p0"))
    injected: list[bytes] = []
    waits: list[tuple[float | None, int]] = []

    class PassingAtOnce(threading.Event):
        def wait(self, timeout: float | None = None) -> bool:
            waits.append((timeout, len(injected)))
            return super().wait(0)

    def inject(_port: int, frame: bytes) -> bool:
        injected.append(frame)
        return True

    replay = PcapReplay([port], 7, inject)
    replay._stop = PassingAtOnce()
    replay.start()
    wait_until(lambda: len(injected) == len(frames))
    replay.stop()
    port.close()
    assert waits[0] == (7, 0) and injected == frames


# ------------------------------------------------------------------------------------------ --nanolog event log

PORT_EVENTS = (nanolog.Event.PACKET_IN, nanolog.Event.PACKET_OUT)


def event_log_exchange(argv: list[str], folder: Path) -> list[tuple[bytes, ...]]:
    """The pcap-files exchange with `--nanolog ipc://...` read as BMv2's nanomsg_client.py reads it (a SUB
    socket, connected before any packet); the messages until every routed packet's PACKET_OUT is in."""
    addr = f"ipc://{folder}.ipc"
    sub = nanolog.Subscriber(addr, timeout_ms=100)
    messages: list[bytes] = []
    done = threading.Event()

    def read() -> None:  # PACKET_OUT is each packet's last event: after the third one, nothing is left to come
        deadline = time.monotonic() + 120
        outs = 0
        while outs < 3 and not done.is_set() and time.monotonic() < deadline:
            msg = sub.recv()
            if msg is not None:
                messages.append(msg)
                outs += nanolog.decode(msg)[0] == nanolog.Event.PACKET_OUT

    def connected() -> None:
        deadline = time.monotonic() + 120
        while not sub.connected():
            assert time.monotonic() < deadline, "no connection to the --nanolog socket"
            time.sleep(0.01)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        files_exchange([*argv, "--nanolog", addr], folder, before_traffic=connected)
        reader.join(120)
    finally:
        done.set()
        reader.join()
        sub.close()
    return messages


def per_packet(messages: list[bytes]) -> list[list[tuple[str, tuple[int, ...]]]]:
    """Each packet's events (kind, fields), packets in the order they came in (ids aside: threads interleave
    packets differently, one packet's events keep their order)."""
    events: dict[int, list[tuple[str, tuple[int, ...]]]] = {}
    for msg in messages:
        kind, switch_id, packet_id, copy_id, fields = nanolog.decode(msg)
        assert (switch_id, copy_id) == (0, 0)
        events.setdefault(packet_id, []).append((kind.name, fields))
    return [events[k] for k in sorted(events)]


def test_nanolog_address_nanomsg_cannot_bind_is_one_line(capsys):
    assert cli.main(["switch", "--no-p4", "--thrift-port", "1", "--nanolog", "ipc-less"]) == 1
    assert capsys.readouterr().err.strip() == "error: --nanolog ipc-less: Invalid argument"


@pytest.fixture(scope="module")
def simple_switch_events(basic_json, tmp_path_factory):
    return event_log_exchange(simple_switch(basic_json, folder := tmp_path_factory.mktemp("bmv2log")), folder / "run")


@pytest.mark.bmv2
@needs_bmv2
@pytest.mark.parametrize("engine", ["native", "python"])
def test_nanolog_publishes_simple_switchs_packet_events(engine, basic_json, simple_switch_events, bmv2_names,
                                                        tmp_path):
    theirs = [[e for e in packet if e[0] in ("PACKET_IN", "PACKET_OUT")] for packet in per_packet(simple_switch_events)]
    # simple_switch's: four packets in (port 0, 0, 0, 1); three out (the third has no route)
    assert theirs == [[("PACKET_IN", (0,)), ("PACKET_OUT", (1,))], [("PACKET_IN", (0,)), ("PACKET_OUT", (0,))],
                      [("PACKET_IN", (0,))], [("PACKET_IN", (1,)), ("PACKET_OUT", (1,))]]
    ours = event_log_exchange([str(bmv2_names / "simple_switch"), "--engine", engine, basic_json], tmp_path / "run")
    assert {len(m) for m in ours} == {len(m) for m in simple_switch_events if m[0] in PORT_EVENTS} == {44}
    assert per_packet(ours) == theirs  # and no other kind: the pipeline's events are not published (docs table)
    assert f"pipeline set ({engine} engine)" in (tmp_path / "run" / "switch.log").read_text()


# ------------------------------------------------------------------------------------------ captures after SIGKILL

REFLECT = """#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers_t { eth_t eth; }
struct meta_t { }
parser P(packet_in pkt, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { pkt.extract(h.eth); transition accept; } }
control V(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = sm.ingress_port; } }
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers_t h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers_t h) { apply { pkt.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""
SW_END, HOST_END = "kill9-sw", "kill9-host"
FRAMES = 50  # 50 records of 80 bytes: less than one stdio or Python buffer, so a buffered capture holds none


@pytest.mark.root
@pytest.mark.parametrize("engine", ["native", "python"])
def test_captures_hold_every_packet_after_sigkill_right_after_traffic(engine, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root for a veth pair")
    program = tmp_path / "reflect.p4"
    program.write_text(REFLECT)
    thrift, log = free_port(), tmp_path / "switch.log"
    with veth_pairs([(SW_END, HOST_END)]):
        proc = start([str(AGGNET), "switch", "--engine", engine, "-i", f"1@{SW_END}", "--pcap",  # DIR: . (cwd)
                      "--thrift-port", str(thrift), "--grpc-server-addr", f"127.0.0.1:{free_port()}", str(program)],
                     tmp_path, log)
        host = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88B5))
        try:
            host.bind((HOST_END, 0x88B5))
            host.settimeout(60)
            wait_for(thrift, proc, log)
            sent = [bytes.fromhex("ffffffffffff" "000000000909" "88b5") + i.to_bytes(2, "big") + bytes(48)
                    for i in range(FRAMES)]
            for frame in sent:
                host.send(frame)
            back = []
            while len(back) < FRAMES:
                data, addr = host.recvfrom(2048)
                if addr[2] != socket.PACKET_OUTGOING:
                    back.append(data)
            proc.send_signal(signal.SIGKILL)  # every frame is out: its records were written before it left
            proc.wait()
        finally:
            host.close()
            stop_process(proc)
    assert back == sent
    assert [f for _, f in read_pcap(str(tmp_path / f"{SW_END}_in.pcap"))] == sent
    assert [f for _, f in read_pcap(str(tmp_path / f"{SW_END}_out.pcap"))] == sent


def test_pcap_writer_record_is_on_disk_when_write_returns(tmp_path):
    writer = PcapWriter(str(tmp_path / "x.pcap"))
    writer.write(b"\x01" * 60)
    assert [f for _, f in read_pcap(str(tmp_path / "x.pcap"))] == [b"\x01" * 60]  # before close(): not buffered
    writer.close()



# ------------------------------------------------------------------------------------------ logs, dumps, CPU port

def test_log_file_rotates_as_bmv2s_and_dumps_every_frame(tmp_path):
    """--log-file BASE rotated at --log-file-max-size into BASE.1.txt, BASE.2.txt (spdlog's names, checked on
    simple_switch) keeping --log-file-max-files (--log FILE, AggNet's own, keeps every line); --log-flush: lines
    on disk while it runs; --dump-packet-data N: the first N bytes of each frame in and out, on the Python engine;
    --pcap is ignored with --use-files; BMv2's values of the fixed target options are taken."""
    (tmp_path / "reflect.p4").write_text(REFLECT)
    (tmp_path / "caps").mkdir()
    frames = [bytes.fromhex("ffffffffffff" "000000000909" "88b5") + i.to_bytes(2, "big") + bytes(48) for i in range(40)]
    pcap_file(tmp_path / "pcap0_in.pcap", frames)
    full, stderr = tmp_path / "full.log", tmp_path / "stderr.txt"
    with open(stderr, "w") as err:
        proc = subprocess.Popen([str(AGGNET), "switch", "--use-files", "0", "-i", "0@pcap0", "--pcap", "caps",
                                 "--dump-packet-data", "20", "--log", "full.log", "--log-file", "s1", "--log-flush",
                                 "--log-file-max-size", "2000", "--log-file-max-files", "2",
                                 "--thrift-port", str(free_port()), "reflect.p4",
                                 "--", "--grpc-server-addr", f"127.0.0.1:{free_port()}", "--drop-port", "511",
                                 "--priority-queues", "1", "--max-mc-groups", "4096", "--max-l1-entries", "4096",
                                 "--max-l2-entries", "8192"], cwd=tmp_path, stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=err)
    last_out = f"packet out on port 0: {frames[-1][:20].hex()}\n"
    try:
        wait_until(lambda: records(tmp_path / "pcap0_out.pcap") == frames, proc, stderr.read_text)
        wait_until(lambda: last_out in (tmp_path / "s1.txt").read_text(), proc, stderr.read_text)  # flushed
    finally:
        stop_process(proc)
    assert proc.returncode == 0, stderr.read_text()
    every = full.read_text()
    assert "pipeline set (python engine)" in every
    for way in ("in", "out"):  # 20 bytes each (a frame is 64), in the order the frames came
        assert re.findall(rf" INFO packet {way} on port 0: (\w*)$", every, re.M) == [f[:20].hex() for f in frames]
    assert sorted(p.name for p in tmp_path.glob("s1*")) == ["s1.1.txt", "s1.2.txt", "s1.txt"]
    kept = [(tmp_path / name).read_text() for name in ("s1.2.txt", "s1.1.txt", "s1.txt")]
    assert all(0 < len(text.encode()) <= 2000 for text in kept)
    assert every.endswith("".join(kept)) and len(every) > 3 * 2000  # the newest lines, older ones gone
    assert list((tmp_path / "caps").iterdir()) == []


def test_log_file_with_no_copies_kept_starts_over_as_bmv2s(tmp_path):
    """--log-file-max-files 0: simple_switch keeps no copy and BASE.txt starts over at the size (Python's
    handler would keep appending: the file would grow without bound)."""
    handler = Bmv2LogFile(str(tmp_path / "s1"), 100, 0)
    for i in range(10):
        handler.emit(logging.makeLogRecord({"msg": f"line {i} ".ljust(39, ".")}))
    handler.close()
    assert [p.name for p in tmp_path.iterdir()] == ["s1.txt"]
    assert (tmp_path / "s1.txt").read_text() == "".join(f"line {i} ".ljust(39, ".") + "\n" for i in (8, 9))  # 2 fit


def test_log_level_drops_the_lines_below_it_and_log_console_prints_the_rest(tmp_path):
    (tmp_path / "reflect.p4").write_text(REFLECT)
    thrift, stdout = free_port(), tmp_path / "stdout.txt"
    with open(stdout, "w") as out:
        proc = subprocess.Popen([str(AGGNET), "switch", "reflect.p4", "--no-p4", "-L", "warn", "--log-console",
                                 "--thrift-port", str(thrift), "--grpc-server-addr", f"127.0.0.1:{free_port()}"],
                                cwd=tmp_path, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.DEVNULL)
    try:
        wait_for(thrift, proc, stdout)
    finally:
        stop_process(proc)
    assert proc.returncode == 0  # it ran to its "stopping" line (info)
    lines = stdout.read_text().splitlines()
    assert [line.split(" ", 3)[2:] for line in lines] == [
        ["WARNING", "ignoring reflect.p4: --no-p4 was given (simple_switch_grpc ignores its program too)"]]


TO_CPU = REFLECT.replace("sm.egress_spec = sm.ingress_port;",
                         "if (sm.ingress_port == 7) { sm.egress_spec = 0; } else { sm.egress_spec = 7; }")


def test_cpu_port_carries_packet_ins_and_packet_outs(tmp_path):
    """--cpu-port 7: a frame the program sends to port 7 is a PacketIn, a PacketOut enters on port 7 (the
    program sends what comes from 7 to port 0, the rest to 7; port 0 is a pcap file)."""
    (tmp_path / "to_cpu.p4").write_text(TO_CPU)
    fifo, log = tmp_path / "pcap0_in.pcap", tmp_path / "switch.log"
    os.mkfifo(fifo)
    grpc = free_port()
    proc = start([str(AGGNET), "switch", "--use-files", "0", "-i", "0@pcap0", "--thrift-port", str(free_port()),
                  "to_cpu.p4", "--", "--grpc-server-addr", f"127.0.0.1:{grpc}", "--cpu-port", "7"], tmp_path, log)
    frame_in, frame_out = (bytes.fromhex("ffffffffffff" "000000000909" "88b5") + bytes([i]) * 50 for i in (1, 2))
    fd = None
    try:
        fd = open_fifo_writer(fifo, proc, log)
        wait_for(grpc, proc, log)
        with SwitchConnection(f"127.0.0.1:{grpc}", device_id=0) as controller:
            os.write(fd, struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1)
                     + struct.pack("<IIII", 1000, 0, len(frame_in), len(frame_in)) + frame_in)
            assert controller.packet_ins.get(timeout=120).payload == frame_in
            controller.packet_out(frame_out)
            wait_until(lambda: records(tmp_path / "pcap0_out.pcap") == [frame_out], proc, log.read_text)
    finally:
        if fd is not None:
            os.close(fd)
        stop_process(proc)
