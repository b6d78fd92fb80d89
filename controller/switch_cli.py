"""The client of a switch's CLI verbs (its side channel), whichever target runs it: one interface,
`run(lines) -> replies`. The switch end of the embedded target's side channel is p4target.sidechannel.

P4Runtime has no message for queue settings, and BMv2's P4Runtime server answers RegisterEntry
reads and writes with UNIMPLEMENTED (p4lang/PI#376). Both targets take these operations as
`simple_switch_CLI` command lines instead:

- embedded: `TcpSideChannel`, the switch's own line protocol on TCP 127.0.0.1:PORT
  (p4target.sidechannel), which speaks the CLI's verbs natively.
- bmv2: `Bmv2Cli`, which feeds the lines to `simple_switch_CLI --thrift-port PORT` and turns its
  printed output back into the replies the embedded switch gives, so callers never see the
  difference. The verbs it carries:

      register_read NAME [INDEX]      -> "V", or "V0 V1 ..." for the whole array
      register_write NAME INDEX VALUE -> ""
      register_reset NAME             -> ""
      counter_read NAME INDEX         -> "packets=P bytes=B"
      set_queue_rate PPS [PORT]       -> ""  (BMv2 takes whole packets/s)
      set_queue_rate_bps BPS [PORT]   -> ""  (as packets/s of FRAME_BYTES frames)
      set_queue_depth PKTS [PORT]     -> ""

  Delay, loss and queue/port statistics exist only in the embedded traffic manager; those verbs
  fail with a one-line error. All lines of one `run` go to one CLI process: starting a process
  per register cell would take minutes for one job's slot region.

Errors of either kind are `p4target.sidechannel.SideChannelError`, one line naming the command.
"""
from __future__ import annotations

import re
import subprocess
from collections.abc import Sequence
from typing import Protocol

from p4target.sidechannel import SideChannelError, send_commands

CLI_PROMPT = "RuntimeCmd: "
CLI_TIMEOUT_S = 300.0  # one batch; a job's slot region is a few thousand register writes
# BMv2 shapes in packets/s only; a bit rate becomes packets/s of full-size Ethernet frames, so the
# link never carries more than the asked bit rate (smaller packets get less).
FRAME_BYTES = 1500
TM_ONLY = ("set_queue_delay", "set_ingress_delay", "set_queue_loss", "queue_stats", "port_stats")
_PASSED = ("register_read", "register_write", "register_reset", "counter_read", "set_queue_depth")
_READ_ONE = re.compile(r"^\S+\[\d+\]=\s*(-?\d+)$")
_READ_ALL = re.compile(r"^\S+=\s*(.*)$")
_COUNTER = re.compile(r"^\S+\[\d+\]=\s*\((\d+) bytes, (\d+) packets\)$")


class SideChannel(Protocol):
    """What SwitchConnection and the testbed need from a side channel."""

    port: int

    def run(self, lines: Sequence[str]) -> list[str]:
        """Execute the command lines in order; one reply per line (the text after `ok`)."""


class TcpSideChannel:
    """The embedded switch's side channel on 127.0.0.1:port."""

    def __init__(self, port: int):
        self.port = port

    def run(self, lines: Sequence[str]) -> list[str]:
        return send_commands(self.port, lines)


class Bmv2Cli:
    """A BMv2 switch's Thrift port driven through `simple_switch_CLI` (see the module docstring)."""

    def __init__(self, port: int, program: str = "simple_switch_CLI"):
        self.port = port
        self.program = program

    @property
    def name(self) -> str:
        return f"{self.program} --thrift-port {self.port}"

    def run(self, lines: Sequence[str]) -> list[str]:
        if not lines:
            return []
        cli_lines = [cli_line(line) for line in lines]
        try:
            done = subprocess.run([self.program, "--thrift-port", str(self.port)], input="\n".join(cli_lines) + "\n",
                                  capture_output=True, text=True, timeout=CLI_TIMEOUT_S)
        except FileNotFoundError:
            raise SideChannelError(f"error: {self.program} not found on PATH (BMv2 registers and queues need it)"
                                   ) from None
        except subprocess.TimeoutExpired:
            raise SideChannelError(f"error: {self.name}: no answer to {len(lines)} commands within "
                                   f"{CLI_TIMEOUT_S:g} s") from None
        outputs = split_outputs(done.stdout)
        if len(outputs) <= len(lines):  # a full run ends with one more prompt, answered by end of input
            completed = max(0, len(outputs) - 1)
            why = _last_line(done.stderr) or _first_line(done.stdout) or f"exit code {done.returncode}"
            raise SideChannelError(f"error: {self.name} stopped after {completed} of {len(lines)} commands "
                                   f"(at {lines[completed]!r}): {why}")
        replies = []
        for line, output in zip(lines, outputs):
            try:
                replies.append(parse_reply(line, output))
            except SideChannelError as exc:
                raise SideChannelError(f"error: {self.name}: {exc}") from None
        return replies


def cli_line(line: str) -> str:
    """Our command line as simple_switch_CLI spells it; SideChannelError for what BMv2 cannot do."""
    words = line.split()
    if not words:
        raise SideChannelError("error: empty side channel command")
    verb, args = words[0], words[1:]
    if verb in TM_ONLY:
        raise SideChannelError(f"error: {verb} is not available on BMv2: delay, loss and queue statistics exist "
                               "only in the embedded target's traffic manager")
    if verb in ("set_queue_rate", "set_queue_rate_bps"):
        rate = _number(args[0] if args else "", line)
        pps = rate / (8 * FRAME_BYTES) if verb == "set_queue_rate_bps" else rate
        return " ".join(["set_queue_rate", str(max(1, round(pps)) if pps else 0), *args[1:]])
    if verb not in _PASSED:
        raise SideChannelError(f"error: {verb} is not a side channel command on BMv2 (it takes "
                               f"{', '.join(_PASSED + ('set_queue_rate', 'set_queue_rate_bps'))})")
    return " ".join(words)


def split_outputs(stdout: str) -> list[str]:
    """The CLI's output per command: the text after each prompt (the last one is end of input)."""
    return [part.strip() for part in stdout.split(CLI_PROMPT)[1:]]


def parse_reply(line: str, output: str) -> str:
    """The embedded side channel's reply for `line`, from what simple_switch_CLI printed for it.

    Anything but the expected shape is the CLI reporting an error ("Error: Invalid register
    name (x)", "Invalid register operation (ERROR_INDEX_OUT_OF_RANGE)", ...).
    """
    words = line.split()
    verb = words[0]
    if verb == "register_read":
        match = (_READ_ONE if len(words) == 3 else _READ_ALL).match(output)
        if match:
            return match.group(1) if len(words) == 3 else " ".join(v.strip() for v in match.group(1).split(","))
    elif verb == "counter_read":
        match = _COUNTER.match(output)
        if match:
            return f"packets={match.group(2)} bytes={match.group(1)}"
    elif not output:
        return ""
    raise SideChannelError(f"{line!r}: {output.splitlines()[0] if output else 'no output'}")


def side_channel(target: str, port: int) -> SideChannel:
    """The side channel of a switch of `target` listening on side-channel port `port` (BMv2: its Thrift port)."""
    if target == "bmv2":
        return Bmv2Cli(port)
    if target == "embedded":
        return TcpSideChannel(port)
    raise SideChannelError(f"error: unknown target {target!r} (embedded or bmv2)")


def _number(text: str, line: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise SideChannelError(f"error: {line!r}: {text!r} is not a number") from None


def _first_line(text: str) -> str:
    return next((s.strip() for s in text.splitlines() if s.strip()), "")


def _last_line(text: str) -> str:
    return _first_line("\n".join(reversed(text.splitlines())))
