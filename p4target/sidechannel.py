"""Side channel: run-time control of a running switch on TCP 127.0.0.1:THRIFT_PORT.

Two protocols share the port; the first byte of a connection tells which one it speaks:
- BMv2's Thrift runtime API (p4target.runtime.bmv2_thrift), so that `simple_switch_CLI
  --thrift-port THRIFT_PORT` and p4-utils work unchanged against the switch;
- a tiny line protocol of our own, with verbs BMv2 lacks (delay, loss, ingress delay,
  queue and port statistics), which the controller and `aggnet counters` use.
BMv2 listens on every address; this switch listens on loopback only (control stays on
the machine).

The line protocol: one command per line, one reply line per command:

    set_queue_rate RATE_PPS [PORT]        packets/s, 0 = unlimited; no PORT = all ports
    set_queue_rate_bps RATE_BPS [PORT]    bits/s of frame bytes, 0 = unlimited
    set_queue_depth PKTS [PORT]           queue capacity in packets (tail drop)
    set_queue_delay MS [PORT]             added one-way delay in milliseconds
    set_ingress_delay MS [PORT]           hold packets arriving on the port this long before the
                                          parser: the delay of the link into it
    set_queue_loss P [SEED] [PORT]        random loss probability in [0, 1]
    queue_stats [PORT]                    settings, qdepth and drop counters as JSON
    port_stats                            rx/tx packets and bytes per port as JSON
    engine                                the engine running the program: native or python
    register_read NAME [INDEX]            one value, or all cells space-separated
    register_write NAME INDEX VALUE
    counter_read NAME INDEX               "packets=N bytes=M"
    table_add TABLE ACTION KEY... => PARAM... [PRIORITY]
        keys: exact V, lpm V/LEN, ternary V&&&MASK, range LO->HI, optional V;
        values: decimal, 0x hex, dotted IPv4 or colon MAC

Replies are `ok` or `ok RESULT`, or `error: MESSAGE`. Names may be fully qualified
(`MyIngress.ipv4_lpm`) or a unique suffix (`ipv4_lpm`). "All ports" means every
port the switch was started with.

Bounds: a command line is at most LINE_BYTES (a longer one is answered `error:` and the
connection closed: nothing is held for it), at most SIDE_CHANNEL_CONNECTIONS connections of
either protocol are open at once (one more is closed at once, a line client told why), and a
Thrift call is bounded as p4target.runtime.bmv2_thrift.wire says. `stop()` closes them all.

The switch object served must offer: `tm` (TrafficManager), `lock` (guards `tm`),
`state` (the current p4target.state.State, or None before a pipeline is set), `pipeline`
(with its `engine_name`),
`port_numbers()` and `port_stats() -> dict[int, dict]`.
"""
from __future__ import annotations

import ipaddress
import json
import socket
import socketserver
import threading
from collections.abc import Callable, Sequence
from typing import Any

from p4target import state as st
from p4target.errors import MESSAGE_CHARS, shorten
from p4target.limits import LINE_BYTES, SIDE_CHANNEL_CONNECTIONS


class SideChannelError(Exception):
    """An `error:` reply or an unreachable switch, as a one-line user error."""

    exit_code = 1


class CommandError(Exception):
    """A malformed command; its message becomes the `error:` reply."""


def parse_value(text: str) -> int:
    """simple_switch_CLI's value forms: 12, 0xff, 10.0.0.1, 00:11:22:33:44:55."""
    try:
        if text.count(".") == 3:
            return int(ipaddress.IPv4Address(text))
        if ":" in text:
            return int(text.replace(":", ""), 16)
        return int(text, 0)
    except ValueError:
        raise CommandError(f"bad value {shorten(text)!r}") from None


def _resolve(name: str, names: list[str], what: str) -> str:
    if name in names:
        return name
    matches = [n for n in names if n.endswith("." + name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise CommandError(f"unknown {what} {shorten(name)!r}")
    raise CommandError(f"{what} {shorten(name)!r} is ambiguous: {', '.join(sorted(matches))}")


def _parse_match(key: st.KeyField, text: str) -> st.Match:
    kind = key.match_kind
    if kind == "lpm":
        value, sep, length = text.partition("/")
        return st.Lpm(parse_value(value), int(length) if sep else key.bitwidth)
    if kind == "ternary":
        value, sep, mask = text.partition("&&&")
        if not sep:
            raise CommandError(f"key {key.name}: ternary needs VALUE&&&MASK, got {shorten(text)!r}")
        return st.Ternary(parse_value(value), parse_value(mask))
    if kind == "range":
        low, sep, high = text.partition("->")
        if not sep:
            raise CommandError(f"key {key.name}: range needs LOW->HIGH, got {shorten(text)!r}")
        return st.Range(parse_value(low), parse_value(high))
    if kind == "optional":
        return st.Optional(parse_value(text))
    return st.Exact(parse_value(text))


class Commands:
    """The verbs, each `verb(args) -> reply text`, run against one switch."""

    def __init__(self, switch: Any):
        self.switch = switch

    def run(self, line: str) -> str:
        """Execute one command line and return its reply line."""
        words = line.split()
        if not words:
            return "error: empty command"
        handler: Callable[[list[str]], str] | None = getattr(self, "do_" + words[0], None)
        if handler is None:
            return f"error: unknown command {shorten(words[0])!r}"
        try:
            result = handler(words[1:])
        except (CommandError, st.StateError, ValueError) as exc:
            return f"error: {shorten(str(exc), MESSAGE_CHARS)}"
        return f"ok {result}".rstrip()

    # -- traffic manager
    def _ports(self, args: list[str], n_values: int) -> list[int]:
        if len(args) == n_values:
            return list(self.switch.port_numbers())
        if len(args) == n_values + 1:
            return [int(args[n_values])]
        raise CommandError(f"expected {n_values} value(s) and an optional PORT, got {len(args)} arguments")

    def _set(self, args: list[str], n_values: int, apply: Callable[[Any], None]) -> str:
        ports = self._ports(args, n_values)
        with self.switch.lock:
            for port in ports:
                apply(self.switch.tm.queue(port))
        return ""

    def do_set_queue_rate(self, args: list[str]) -> str:
        return self._set(args, 1, lambda q: q.set_rate_pps(float(args[0])))

    def do_set_queue_rate_bps(self, args: list[str]) -> str:
        return self._set(args, 1, lambda q: q.set_rate_bps(float(args[0])))

    def do_set_queue_depth(self, args: list[str]) -> str:
        return self._set(args, 1, lambda q: q.set_depth(int(args[0])))

    def do_set_queue_delay(self, args: list[str]) -> str:
        return self._set(args, 1, lambda q: q.set_delay_ms(float(args[0])))

    def do_set_ingress_delay(self, args: list[str]) -> str:
        return self._set(args, 1, lambda q: q.set_ingress_delay_ms(float(args[0])))

    def do_set_queue_loss(self, args: list[str]) -> str:
        if len(args) <= 1:  # P alone (none: _ports says what is missing)
            return self._set(args, 1, lambda q: q.set_loss(float(args[0])))
        seed = int(args[1])
        return self._set(args, 2, lambda q: q.set_loss(float(args[0]), seed))

    def do_queue_stats(self, args: list[str]) -> str:
        ports = self._ports(args, 0)
        with self.switch.lock:
            return json.dumps({str(p): self.switch.tm.queue(p).stats() for p in ports})

    def do_port_stats(self, args: list[str]) -> str:
        if args:
            raise CommandError("port_stats takes no arguments")
        return json.dumps({str(p): s for p, s in self.switch.port_stats().items()})

    # -- pipeline state
    def do_engine(self, args: list[str]) -> str:
        if args:
            raise CommandError("engine takes no arguments")
        self._state()  # a program is loaded
        return self.switch.pipeline.engine_name

    def _state(self) -> st.State:
        state = self.switch.state
        if state is None:
            raise CommandError("no P4 program loaded yet")
        return state

    def do_register_read(self, args: list[str]) -> str:
        state = self._state()
        if len(args) not in (1, 2):
            raise CommandError("usage: register_read NAME [INDEX]")
        name = _resolve(args[0], list(state.registers), "register")
        if len(args) == 2:
            return str(state.register_read(name, parse_value(args[1])))
        size = state.schema.registers[name].size
        return " ".join(str(state.register_read(name, i)) for i in range(size))

    def do_register_write(self, args: list[str]) -> str:
        state = self._state()
        if len(args) != 3:
            raise CommandError("usage: register_write NAME INDEX VALUE")
        name = _resolve(args[0], list(state.registers), "register")
        state.register_write(name, parse_value(args[1]), parse_value(args[2]))
        return ""

    def do_counter_read(self, args: list[str]) -> str:
        state = self._state()
        if len(args) != 2:
            raise CommandError("usage: counter_read NAME INDEX")
        name = _resolve(args[0], list(state.counters), "counter")
        packets, nbytes = state.counter_read(name, parse_value(args[1]))
        return f"packets={packets} bytes={nbytes}"

    def do_table_add(self, args: list[str]) -> str:
        state = self._state()
        if len(args) < 2 or "=>" not in args:
            raise CommandError("usage: table_add TABLE ACTION KEY... => PARAM... [PRIORITY]")
        table = state.schema.tables[_resolve(args[0], list(state.schema.tables), "table")]
        action = _resolve(args[1], list(table.actions), f"action of table {table.name}")
        arrow = args.index("=>")
        keys, rest = args[2:arrow], args[arrow + 1:]
        if len(keys) != len(table.keys):
            raise CommandError(f"table {table.name} has {len(table.keys)} key field(s), got {len(keys)}")
        params = state.schema.actions[action].params
        priority = 0
        if len(rest) == len(params) + 1:
            priority = int(rest.pop())
        if len(rest) != len(params):
            raise CommandError(f"action {action} takes {len(params)} parameter(s), got {len(rest)}")
        match = {k.name: _parse_match(k, text) for k, text in zip(table.keys, keys)}
        entry = st.TableEntry(match, action, {p: parse_value(v) for (p, _), v in zip(params, rest)}, priority)
        state.insert_entry(table.name, entry)
        return ""


class _Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        """A Thrift client's first byte is 0x80 (a strict binary message); a command's is text."""
        thrift = self.server.thrift  # type: ignore[attr-defined]
        try:
            first = self.request.recv(1, socket.MSG_PEEK)
        except OSError:
            return
        if first and first[0] == thrift.FIRST_BYTE:
            thrift.serve(self.rfile.read, self.wfile.write)
            return
        commands: Commands = self.server.commands  # type: ignore[attr-defined]
        try:
            while raw := self.rfile.readline(LINE_BYTES + 1):
                if len(raw) > LINE_BYTES:
                    self.wfile.write(f"error: a command line is at most {LINE_BYTES} bytes\n".encode())
                    return
                reply = commands.run(raw.decode("utf-8", "replace").strip())
                self.wfile.write(reply.encode() + b"\n")
        except OSError:
            pass  # the client went away


class SideChannelServer(socketserver.ThreadingTCPServer):
    """The TCP server of both protocols; `start()` serves from a daemon thread, `stop()` closes it."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, switch: Any, port: int, host: str = "127.0.0.1"):
        try:
            super().__init__((host, port), _Handler)
        except OSError as exc:
            raise SideChannelError(f"error: side channel {host}:{port}: {exc.strerror}") from None
        from p4target.runtime.bmv2_thrift.service import BmRuntime  # here: clients of this module need no gRPC

        self.commands = Commands(switch)
        self.thrift = BmRuntime(switch, port)
        self._thread = threading.Thread(target=self.serve_forever, name="sidechannel", daemon=True)
        self._open: set[socket.socket] = set()  # connections being served
        self._open_lock = threading.Lock()

    def start(self) -> SideChannelServer:
        self._thread.start()
        return self

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve a connection on a thread of its own, unless SIDE_CHANNEL_CONNECTIONS are open already."""
        with self._open_lock:
            full = len(self._open) >= SIDE_CHANNEL_CONNECTIONS
            if not full:
                self._open.add(request)
        if full:
            try:
                request.sendall(f"error: the side channel serves {SIDE_CHANNEL_CONNECTIONS} connections at once; "
                                "try again later\n".encode())
            except OSError:
                pass
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def close_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().close_request(request)

    def stop(self) -> None:
        """Stop listening and end every open connection (their threads then return)."""
        self.shutdown()
        self.server_close()
        with self._open_lock:
            connections = list(self._open)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def send_commands(port: int, lines: Sequence[str], host: str = "127.0.0.1", timeout: float = 5.0) -> list[str]:
    """Send command lines to a switch's side channel over one connection; return each reply after `ok`.

    One connection for all: a connection per line leaves a TIME_WAIT socket per line, and thousands
    of register writes to a switch on another machine run out of local ports. Raises
    SideChannelError at the first `error:` reply and when the switch cannot be reached.
    """
    replies: list[str] = []
    try:
        with socket.create_connection((host, port), timeout=timeout) as conn, conn.makefile("rb") as answers:
            for line in lines:
                conn.sendall(line.strip().encode() + b"\n")
                reply = answers.readline().decode().strip()
                if not reply.startswith("ok"):
                    raise SideChannelError(f"{host}:{port}: {reply or 'error: connection closed'}")
                replies.append(reply[2:].strip())
    except OSError as exc:
        raise SideChannelError(f"error: side channel {host}:{port}: {exc}") from None
    return replies


def send_command(port: int, line: str, host: str = "127.0.0.1", timeout: float = 5.0) -> str:
    """send_commands with one line."""
    return send_commands(port, [line], host, timeout)[0]
