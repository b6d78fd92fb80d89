"""The embedded switch process: `aggnet switch`, shaped like `simple_switch_grpc`.

    aggnet switch --device-id 1 -i 1@s1-eth1 -i 2@s1-eth2 \\
        --grpc-server-addr 127.0.0.1:50001 [--cpu-port 255] [--thrift-port 9091] \\
        [--log s1.log] [--pcap DIR] [PROG.p4]

It takes simple_switch_grpc's command line as it is (`--log-file`, `--no-p4`, `-- TARGET-OPTIONS`,
the TLS flags, ...; the options BMv2 has and this switch does not are named in one log line):
see "command line" below and docs/targets.md.

One thread moves packets. On the native engine (`--engine native`, the default) that is
the engine's own loop in C (p4target/native/engine/loop.c: receive rings -> pipeline -> traffic
manager -> egress -> sendmmsg, pcap), with no Python per packet; a pump thread hands
PacketIns, digests and log lines to Python. On the Python engine (or for a program the
native engine cannot run): poll() over the port sockets -> the receiving port's ingress
delay, if set (PacketOuts have none) -> pipeline.ingress -> traffic manager (per egress
port: loss, delay, queue, shaper) -> pipeline.egress (with the queue depths) -> send.
Both engines run that same order. Without PROG.p4 the switch drops everything until a
controller sets the pipeline over P4Runtime. The P4Runtime server and the side channel
(p4target.sidechannel, on 127.0.0.1:--thrift-port) run in their own threads; the
traffic manager is guarded by `Switch.lock`, the pipeline state by its own lock.
SIGTERM/SIGINT stop the loop; sockets are closed on the way out (pcap records are written one by one). Whatever the
clients did (streams held open, malformed messages, a flood nobody reads, a program still compiling),
the stop is bounded: the P4Runtime server gets its grace and a margin (p4target.runtime.server), the
side channel's connections are closed, and a request's worker still busy after EXIT_WAIT_S is not
waited for: the process exits.
"""
from __future__ import annotations

import argparse
import logging
import logging.handlers
import os
import select
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from p4target import externs, switch_options
from p4target.constants import DEFAULT_CPU_PORT, IDLE_WAKE_S, RX_BATCH
from p4target.limits import PACKET_OUT_QUEUE, PACKET_OUT_QUEUE_BYTES
from p4target.nanolog import Event, EventLogger, NanomsgError
from p4target.native.pipeline import NativePipeline
from p4target.native.queues import NativeTrafficManager
from p4target.ports import FilePort, PcapReplay, Port, PortError, parse_port_spec

log = logging.getLogger("aggnet.switch")


class SwitchError(Exception):
    """The switch cannot start (one line; exit code 1, or 2 for a bad program)."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


class Switch:
    """Ports + traffic manager + (replaceable) pipeline, and the loop that moves packets."""

    def __init__(self, ports: dict[int, str], device_id: int = 0, cpu_port: int = DEFAULT_CPU_PORT,
                 pcap_dir: str | None = None, clock: Callable[[], float] = time.monotonic, pcap_max_bytes: int = 0,
                 use_files: bool = False):
        """`use_files`: the ports are pcap files (FilePort, BMv2's --use-files), `pcap_dir` unused as on BMv2."""
        self.device_id = device_id
        self.pcap_max_bytes = pcap_max_bytes  # per pcap file, both engines; 0: no cap
        self.cpu_port = cpu_port
        self.tm = NativeTrafficManager(clock)
        self.lock = threading.Lock()
        self.pipeline: Any = None
        self.packet_in: Callable[[bytes], None] | None = None
        self.dropped_no_pipeline = self.dropped_no_port = self.pipeline_errors = 0
        self.dump_bytes = 0  # --dump-packet-data: log this many bytes of every frame in and out (Python loop)
        self.event_log: EventLogger | None = None  # --nanolog: BMv2's packet-in/packet-out events, both engines
        self._next_packet_id = 0  # the event log's id of the next packet into ingress
        self.ports: dict[int, Port] = {}
        try:
            for number, ifname in sorted(ports.items()):
                self.ports[number] = (FilePort(number, ifname, pcap_max_bytes) if use_files
                                      else Port(number, ifname, pcap_dir, pcap_max_bytes))
        except PortError:
            self.close()
            raise
        self._injected: deque[tuple[int, bytes]] = deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._stopping = False
        self._native: NativePipeline | None = None  # the pipeline whose engine loop runs now
        # PacketOuts go to exactly one loop while engines change; set_pipeline waits on it for the old engine to go
        self._handover = threading.Condition(threading.Lock())

    # -- what the control plane uses -----------------------------------------------------
    @property
    def state(self) -> Any:
        """The current pipeline's State, or None before a program is loaded."""
        return self.pipeline.state if self.pipeline is not None else None

    def set_pipeline(self, pipeline: Any) -> None:
        """Install a new pipeline (at start or from SetForwardingPipelineConfig).

        Returns once the packet path has let go of the previous one, as BMv2's swap does: a frame that
        arrives afterwards runs on `pipeline` (a client writes entries and sends packets straight after
        SetForwardingPipelineConfig; the old engine's loop would otherwise still take them for a moment).
        """
        with self._handover:
            self.pipeline = pipeline
            running = self._native
        log.info("pipeline set (%s engine)", getattr(pipeline, "engine_name", "python"))
        if running is not None:
            running.engine.stop()  # its loop returns and run() switches over
        self._wake()
        if running is not None:
            with self._handover:  # the engine's rings are closed: frames wait on the port sockets for the next loop
                self._handover.wait_for(lambda: self._native is not running)

    def port_numbers(self) -> list[int]:
        return sorted(self.ports)

    def port_stats(self) -> dict[int, dict]:
        stats = {number: port.stats() for number, port in self.ports.items()}
        native = self._native
        if native is not None:
            for number, entry in stats.items():
                for name, value in native.engine.port_stats(number).items():
                    entry[name] += value
        with self.lock:
            for number, q in self.tm.queues.items():
                qs = q.stats()
                stats.setdefault(number, {}).update({k: qs[k] for k in ("tail_drops", "loss_drops", "qdepth")})
        return stats

    def inject(self, port: int, data: bytes) -> bool:
        """Feed a frame into ingress as if it arrived on `port` (PacketOut uses the CPU port); False when
        PACKET_OUT_QUEUE frames or PACKET_OUT_QUEUE_BYTES wait for the loop already: this one is dropped,
        so a client sending faster than the switch forwards costs it a bounded queue. Thread-safe: the
        frame is handed to the packet loop, which is woken up."""
        with self._handover:
            native = self._native
            if native is not None and native is self.pipeline:
                return native.engine.inject(port, data, PACKET_OUT_QUEUE, PACKET_OUT_QUEUE_BYTES)
            waiting = sum(len(frame) for _, frame in self._injected)
            if len(self._injected) >= PACKET_OUT_QUEUE or waiting + len(data) > PACKET_OUT_QUEUE_BYTES:
                return False
            self._injected.append((port, data))  # the Python loop's, or the next engine's when it starts
        self._wake()
        return True

    def stop(self) -> None:
        """Ask the loop to finish (safe from signal handlers and other threads)."""
        self._stopping = True
        native = self._native
        if native is not None:
            native.engine.stop()
        self._wake()

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except BlockingIOError:
            pass  # the pipe is full: the loop is going to wake up anyway

    # -- the packet path -----------------------------------------------------------------
    def run(self) -> None:
        """Move packets until stop() is called, on whichever engine the pipeline has."""
        while not self._stopping:
            if isinstance(self.pipeline, NativePipeline):
                self._run_native(self.pipeline)
            else:
                self._run_python()

    def _run_native(self, pipeline: NativePipeline) -> None:
        """The engine's loop owns the ports until stop() or a new pipeline."""
        engine = pipeline.engine
        for number, port in self.ports.items():
            port.hand_over()  # its pcap files closed first: the engine continues them
            engine.port_add(number, port.fileno(), *port.pcap_paths)
        engine.set_cpu_port(self.cpu_port)
        engine.set_pcap_cap(self.pcap_max_bytes)
        if self.event_log is not None:
            engine.set_event_log(self.event_log.send_function(), self.event_log.sock, self.device_id,
                                 self._next_packet_id)
        pipeline.state.on_packet_in = lambda _port, frame: self._transmit(self.cpu_port, frame)
        with self.lock:
            self.tm.attach(engine)
        done = threading.Event()
        pump = threading.Thread(target=self._pump, args=(pipeline, done), name="native-events", daemon=True)
        with self._handover:
            self._native = pipeline
            while self._injected:
                engine.inject(*self._injected.popleft(), PACKET_OUT_QUEUE, PACKET_OUT_QUEUE_BYTES)
        pump.start()
        loop = threading.Thread(target=engine.run, name="native-loop", daemon=True)
        try:
            if self.pipeline is pipeline and not self._stopping:
                # Its own thread: Python runs signal handlers (SIGTERM -> stop()) in the main thread only.
                loop.start()
                while loop.is_alive():
                    loop.join(0.25)
        finally:
            if not loop.is_alive():  # (still running only when this thread was interrupted: the process ends)
                engine.ports_release()
            with self._handover:
                self._native = None
                self._handover.notify_all()
            with self.lock:
                self.tm.detach()
            for number, port in self.ports.items():
                port.hand_over(engine.port_stats(number))
            no_port, errors = engine.counts()
            self._next_packet_id = max(self._next_packet_id, engine.event_log_next_id())
            self.dropped_no_port += no_port
            self.pipeline_errors += errors
            done.set()
            engine.event_wake()
            pump.join()

    @staticmethod
    def _pump(pipeline: NativePipeline, done: threading.Event) -> None:
        """Move what the engine queued for Python (PacketIns, digests, log lines) until `done`."""
        fd = pipeline.engine.event_fd()
        while not done.is_set():
            os.read(fd, 4096)
            pipeline.state.pump_events()
        pipeline.state.pump_events()

    def _run_python(self) -> None:
        """The Python loop, until stop() or a pipeline the native engine runs."""
        poller = select.poll()
        by_fd = {port.fileno(): port for port in self.ports.values() if port.fileno() >= 0}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        while not self._stopping and not isinstance(self.pipeline, NativePipeline):
            for fd, _ in poller.poll(self._timeout_ms()):
                port = by_fd.get(fd)
                if port is None:
                    self._drain_wake_pipe()
                    continue
                for _ in range(RX_BATCH):
                    data = port.recv()
                    if data is None:
                        break
                    self._arrive(port.number, data)
                self._serve_queues()
            for _ in range(len(self._injected)):  # each once: _ingress hands them on if a native engine is next
                self._ingress(*self._injected.popleft())
            self._serve_queues()

    def _timeout_ms(self) -> int:
        with self.lock:
            when = self.tm.next_event()
        wait = IDLE_WAKE_S if when is None else min(IDLE_WAKE_S, max(0.0, when - self.tm.clock()))
        return int(wait * 1000) if wait >= 0.001 else (0 if wait == 0 else 1)

    def _drain_wake_pipe(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _arrive(self, port: int, data: bytes) -> None:
        """A frame received on `port`: into ingress now, or once the port's ingress delay is over."""
        with self.lock:
            held = self.tm.hold(port, data)
        if not held:
            self._ingress(port, data)

    def _ingress(self, port: int, data: bytes) -> None:
        pipeline = self.pipeline
        if isinstance(pipeline, NativePipeline):  # engines changing hands: the engine's loop takes it
            with self._handover:
                self._injected.append((port, data))
            return
        if self.dump_bytes:
            log.info("packet in on port %d: %s", port, data[:self.dump_bytes].hex())
        packet_id = self._next_packet_id
        self._next_packet_id += 1
        if self.event_log is not None:
            self.event_log.send(Event.PACKET_IN, packet_id, 0, port)
        if pipeline is None:
            self.dropped_no_pipeline += 1
            return
        try:
            items = pipeline.ingress(port, data)
        except Exception:  # noqa: BLE001 - one bad packet must not stop the switch
            self.pipeline_errors += 1
            log.exception("ingress failed on a %d-byte packet from port %d", len(data), port)
            return
        with self.lock:
            for item in items:
                item.packet_id = packet_id
                self.tm.enqueue(item.egress_port, item, item.length)

    def _serve_queues(self) -> None:
        """Ingress the held frames that are due, then egress what may leave the queues now."""
        with self.lock:
            arrived = list(self.tm.arrivals())
        for port, data in arrived:
            self._ingress(port, data)
        with self.lock:
            ready = list(self.tm.dequeue())
        pipeline = self.pipeline
        for _port, item, enq_qdepth, deq_qdepth in ready:
            try:
                out = pipeline.egress(item, enq_qdepth, deq_qdepth)
            except Exception:  # noqa: BLE001
                self.pipeline_errors += 1
                log.exception("egress failed on a packet to port %d", item.egress_port)
                continue
            for port, frame in out:
                self._transmit(port, frame, item.packet_id)

    def _transmit(self, port: int, frame: bytes, packet_id: int | None = None) -> None:
        """`frame` leaves on `port`; `packet_id`: the event log's id (None: the native engine logged it)."""
        if self.event_log is not None and packet_id is not None:
            self.event_log.send(Event.PACKET_OUT, packet_id, 0, port)
        if self.dump_bytes:
            log.info("packet out on port %d: %s", port, frame[:self.dump_bytes].hex())
        target = self.ports.get(port)
        if target is not None:
            target.send(frame)
        elif port == self.cpu_port and self.packet_in is not None:
            self.packet_in(frame)
        else:
            self.dropped_no_port += 1

    def close(self) -> None:
        for port in self.ports.values():
            port.close()
        for name in ("_wake_r", "_wake_w"):  # absent when __init__ failed early or after a first close
            fd = self.__dict__.pop(name, None)
            if fd is not None:
                os.close(fd)


# -- the process ------------------------------------------------------------------------
# The command line (simple_switch's and simple_switch_grpc's, all of it) is p4target.switch_options.
normalize_argv = switch_options.normalize_argv
add_arguments = switch_options.add_arguments
LOG_LEVELS = {"trace": logging.DEBUG, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
              "error": logging.ERROR, "off": logging.CRITICAL + 1}
BMV2_LOG_SUFFIX = ".txt"  # simple_switch --log-file BASE writes BASE.txt (and rotates it)
EXIT_WAIT_S = 5.0  # what a stopped switch waits for a request's busy worker before it exits anyway


class Bmv2LogFile(logging.handlers.RotatingFileHandler):
    """simple_switch's `--log-file BASE` as its spdlog sink writes it: BASE.txt, rotated at `max_bytes` into
    BASE.1.txt .. BASE.N.txt (newest first); with N = 0 no copy is kept: BASE.txt starts over."""

    def __init__(self, base: str, max_bytes: int, max_files: int):
        super().__init__(base + BMV2_LOG_SUFFIX, maxBytes=max_bytes, backupCount=max_files)

    def rotation_filename(self, default_name: str) -> str:
        """BASE.txt.N (Python's name) -> BASE.N.txt (BMv2's)."""
        stem, _, index = default_name.rpartition(".")
        return f"{stem.removesuffix(BMV2_LOG_SUFFIX)}.{index}{BMV2_LOG_SUFFIX}"

    def doRollover(self) -> None:
        if self.backupCount:
            super().doRollover()
        elif self.stream is not None:  # Python keeps appending when it keeps no copy; spdlog truncates
            self.stream.seek(0)
            self.stream.truncate()


def _setup_logging(args: argparse.Namespace) -> None:
    """Log where the options say: --log FILE, --log-file BASE (BMv2's BASE.txt, rotated), --log-console;
    stderr when none is given."""
    handlers: list[logging.Handler] = []
    if args.log:
        handlers.append(logging.handlers.RotatingFileHandler(args.log, maxBytes=args.log_max_mb << 20, backupCount=1))
    if args.log_file:
        handlers.append(Bmv2LogFile(args.log_file, args.log_file_max_size, args.log_file_max_files))
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stdout))
    if not handlers:
        handlers.append(logging.StreamHandler())
    for handler in handlers:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger("aggnet")
    root.handlers[:] = handlers
    root.setLevel(LOG_LEVELS[args.log_level] if args.log_level else logging.INFO)


def run(args: argparse.Namespace) -> int:
    """Start the switch; return when SIGTERM/SIGINT arrives."""
    from p4target.sidechannel import SideChannelServer

    externs.load()  # the composition root: every program it loads uses them
    switch_options.check_options(args)
    try:
        _setup_logging(args)
    except OSError as exc:
        raise SwitchError(f"error: cannot open the log file {exc.filename}: {exc.strerror}") from None
    if args.program and args.no_p4:
        log.warning("ignoring %s: --no-p4 was given (simple_switch_grpc ignores its program too)", args.program)
        args.program = None
    ports = {}
    for spec in args.interface:
        number, ifname = parse_port_spec(spec)
        if number in ports:
            raise PortError(f"error: -i {spec!r}: port {number} is given twice")
        ports[number] = ifname
    if args.dump_packet_data and args.engine == "native":
        log.info("--dump-packet-data: the Python engine runs the program (the native engine logs no packets)")
        args.engine = "python"
    use_files = args.use_files is not None
    switch = Switch(ports, args.device_id, args.cpu_port, args.pcap, pcap_max_bytes=args.pcap_max_mb << 20,
                    use_files=use_files)
    switch.dump_bytes = args.dump_packet_data
    if args.nanolog:
        try:
            switch.event_log = EventLogger(args.nanolog, args.device_id)
        except NanomsgError as exc:
            switch.close()
            raise SwitchError(f"error: {exc}") from None
        log.info("--nanolog %s: BMv2's packet-in and packet-out events (both engines; no parser, table or action "
                 "events)", args.nanolog)
    thrift_port = args.thrift_port
    sidechannel = runtime = replay = None
    # before anything answers: a SIGTERM as soon as a server is up stops the switch the orderly way
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: switch.stop())
    try:
        runtime = _start_runtime(switch, args)  # first: once the side channel answers, PROG is loaded
        sidechannel = SideChannelServer(switch, thrift_port).start()
        if use_files:
            replay = PcapReplay([p for p in switch.ports.values() if isinstance(p, FilePort)], args.use_files,
                                switch.inject).start()
        grpc = f"grpc {args.grpc_server_addr}{_security(args)}" if _serves_p4runtime(args) else "no grpc"
        log.info("device %d up (%s): ports %s, %s, side channel 127.0.0.1:%d", args.device_id, args.flavour,
                 ", ".join(f"{n}@{p.ifname}" for n, p in sorted(switch.ports.items())) or "none", grpc, thrift_port)
        switch.run()
        log.info("stopping: %s; drops: no pipeline %d, no port %d, pipeline errors %d, unread stream messages %d",
                 switch.port_stats(), switch.dropped_no_pipeline, switch.dropped_no_port, switch.pipeline_errors,
                 runtime.stream_drops)
    finally:
        if replay is not None:
            replay.stop()
        if runtime is not None:
            runtime.stop()
        if sidechannel is not None:
            sidechannel.stop()
        switch.close()
        if switch.event_log is not None:
            switch.event_log.close()
    _exit_now_if_held()
    return 0


def _exit_now_if_held() -> None:
    """Exit at once when a thread would hold the process past its stop: Python waits at exit for every
    non-daemon thread, and a request's worker may still be busy with what a client asked (a program
    being compiled, a large Write), whose result no one is left to take. Waits EXIT_WAIT_S for them first."""
    deadline = time.monotonic() + EXIT_WAIT_S
    busy = [t for t in threading.enumerate() if not t.daemon and t is not threading.main_thread()]
    for thread in busy:
        thread.join(max(0.0, deadline - time.monotonic()))
    held = [t.name for t in busy if t.is_alive()]
    if held:
        log.warning("stopped; not waiting for %d busy thread(s): %s", len(held), ", ".join(held))
        logging.shutdown()
        sys.stdout.flush()
        os._exit(0)


def _security(args: argparse.Namespace) -> str:
    if not args.grpc_server_ssl:
        return ""
    return " (TLS, client certificates required)" if args.grpc_server_with_client_auth else " (TLS)"


def _serves_p4runtime(args: argparse.Namespace) -> bool:
    """simple_switch has no P4Runtime server; simple_switch_grpc (and `aggnet switch`) has."""
    return args.flavour != "simple_switch"


def _start_runtime(switch: Switch, args: argparse.Namespace) -> Any:
    """The P4Runtime device bound to this switch, serving gRPC unless the flavour has none (then the device
    holds the pipeline for the Thrift runtime alone); PROG.p4 loaded through it if given."""
    from p4target.runtime.errors import RuntimeStatus
    from p4target.runtime.server import RuntimeServer
    from p4target.tls import TlsFiles, server_credentials

    log_path = None
    if args.log:
        stem = os.path.splitext(args.log)[0]
        log_path = f"{stem}-p4runtime-requests.txt"
    credentials = None
    if args.grpc_server_ssl:
        credentials = server_credentials(TlsFiles(args.grpc_server_cacert, args.grpc_server_cert,
                                                  args.grpc_server_key), args.grpc_server_with_client_auth)
    server = RuntimeServer(args.device_id, args.grpc_server_addr, args.cpu_port,
                           on_pipeline_set=switch.set_pipeline, packet_out=switch.inject, log_path=log_path,
                           engine=args.engine, credentials=credentials, log_max_bytes=args.log_max_mb << 20)
    switch.packet_in = lambda frame: server.packet_in(args.cpu_port, frame)
    server.device.state_cap_mb = args.max_state_mb
    if args.program:
        from p4target.device_config import device_config_source
        from p4target.errors import P4Error

        try:  # as the controller would push it: its local includes inlined (source given as text reads no file)
            server.load_source(device_config_source(args.program), args.program)
        except P4Error as exc:  # a file it names cannot be read
            raise SwitchError(str(exc), exit_code=exc.exit_code) from None
        except RuntimeStatus as exc:
            raise SwitchError(exc.message, exit_code=2) from None
    if not _serves_p4runtime(args):
        return server
    try:
        server.start()
    except RuntimeError as exc:
        raise SwitchError(f"error: {exc}") from None
    return server
