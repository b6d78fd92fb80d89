"""Runner for p4c-style STF packet tests on the embedded pipeline.

An .stf file is a list of commands, one per line (`#` starts a comment):

    add TABLE [PRIO] KEY:VALUE ... ACTION(PARAM:VALUE, ...) [= HANDLE]
    setdefault TABLE ACTION(PARAM:VALUE, ...)
    packet PORT HEX...             expect PORT [HEX...[$]]
    wait
    mc_mgrp_create GROUP           mc_node_create RID PORT...      mc_node_associate GROUP NODE
    mirroring_add SESSION PORT     mirroring_add_mc SESSION GROUP
    register_write REG INDEX VALUE register_read REG INDEX [OP VALUE]   register_reset REG
    check_counter COUNTER(INDEX|$HANDLE) [packets|bytes OP VALUE]

It follows p4c's bmv2 runner (backends/bmv2/bmv2stf.py) and STF grammar (tools/stf):
names are fully qualified or a unique dotted suffix; key values for lpm/ternary may use
`*` nibble wildcards (`0x0A0001**` is a /24); ternary also takes `value&&&mask`, lpm
`value/len`, range `lo..hi` (or bmv2's `lo->hi`); a higher `add` priority wins; in
`expect`, `*` is a don't-care nibble and `$` means the packet ends there. Expectations
are matched per port, in order, after the whole file ran; a packet that leaves on a port
without a matching `expect` fails the test, unless `expect PORT` (no data) allowed any.
`register_read ... OP VALUE` is this runner's way to check a register (p4c's runner only
prints it).
"""
from __future__ import annotations

import operator
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from p4target.errors import P4Error

if TYPE_CHECKING:
    from p4target.state import ProgramSchema, State, TableEntry

_HEX_CHARS = re.compile(r"^[0-9a-fA-F]*$")
_EXPECT_CHARS = re.compile(r"^[0-9a-fA-F*]*$")
_COMPARISONS = {"==": operator.eq, "!=": operator.ne, "<=": operator.le, "<": operator.lt,
                ">=": operator.ge, ">": operator.gt}


class StfError(P4Error):
    """A malformed STF test (or one that names things the program lacks): exit 2."""


@dataclass
class Command:
    """One STF line: its verb, the rest of the line, and where it came from."""

    verb: str
    rest: str
    line: int


@dataclass
class Expectation:
    """`expect PORT HEX[$]`: nibbles ('*' = any) and whether the packet must end there."""

    pattern: str
    exact_end: bool
    line: int

    def matches(self, data: bytes) -> bool:
        got = data.hex().upper()
        if len(got) < len(self.pattern) or (self.exact_end and len(got) != len(self.pattern)):
            return False
        return all(p == "*" or p == g for p, g in zip(self.pattern, got))

    def text(self) -> str:
        return _spaced(self.pattern) + (" $" if self.exact_end else "")


@dataclass
class Output:
    """A packet that left the switch, and the `packet` line that caused it."""

    data: bytes
    cause_line: int


@dataclass
class StfResult:
    """Outcome of one STF run. `failures` are human-readable lines, empty when it passed."""

    failures: list[str] = field(default_factory=list)
    packets_in: int = 0
    packets_out: int = 0
    log: list[str] = field(default_factory=list)  # register_read / check_counter values seen

    @property
    def passed(self) -> bool:
        return not self.failures

    def report(self, test_name: str) -> str:
        if self.passed:
            return f"PASS {test_name}: {self.packets_in} packets in, {self.packets_out} out"
        return "\n".join([f"FAIL {test_name}"] + self.failures)


def parse_stf(text: str, filename: str = "<stf>") -> list[Command]:
    """Split an STF file into commands; raise StfError on unknown verbs."""
    commands = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        verb, _, rest = line.partition(" ")
        verb = verb.lower()
        if verb not in _HANDLERS:
            raise StfError(f"unknown STF command '{verb}'", filename, number)
        commands.append(Command(verb, rest.strip(), number))
    return commands


def run_stf_file(program_path: str, stf_path: str, engine: str = "python",
                 defines: dict[str, str] | None = None) -> StfResult:
    """Load the P4 program (with -D `defines`) and the STF file, run the test on `engine`
    ('python' or 'native'), return its result."""
    from p4target import externs, load

    externs.load()  # the STF runner is a composition root
    try:
        with open(stf_path) as f:
            text = f.read()
    except OSError as exc:
        raise StfError(f"cannot read STF file: {exc.strerror}", stf_path) from None
    commands = parse_stf(text, stf_path)  # a malformed test is reported before loading the program
    pipeline = load.pipeline(load.from_file(program_path, defines), engine)  # PROG.json: p4c's BMv2 JSON
    return StfRunner(pipeline, stf_path).run(commands)


class StfRunner:
    """Drives one pipeline (anything with `.state` and `.process(port, data)`) through a test."""

    def __init__(self, pipeline, filename: str = "<stf>"):
        self.pipeline = pipeline
        self.state: State = pipeline.state
        self.schema: ProgramSchema = pipeline.state.schema
        self.filename = filename
        self.result = StfResult()
        self.expected: dict[int, list[Expectation]] = {}
        self.any_ok: set[int] = set()
        self.got: dict[int, list[Output]] = {}
        self.handles: dict[str, tuple[str, TableEntry]] = {}  # `add ... = H` -> (table, entry)
        self.mc_nodes: list[tuple[int, list[int]]] = []  # node handle -> (rid, ports)

    def error(self, cmd: Command, message: str) -> StfError:
        return StfError(message, self.filename, cmd.line)

    def run(self, commands: list[Command]) -> StfResult:
        from p4target.state import StateError

        for cmd in commands:
            try:
                _HANDLERS[cmd.verb](self, cmd)
            except StateError as exc:
                raise self.error(cmd, str(exc)) from None
        self._compare_outputs()
        return self.result

    # -- names

    def _resolve(self, cmd: Command, kind: str, name: str, names) -> str:
        """Fully qualified name for `name` among `names` (exact, else unique dotted suffix)."""
        names = list(names)
        if name in names:
            return name
        found = [n for n in names if n.endswith("." + name)]
        if len(found) == 1:
            return found[0]
        if found:
            raise self.error(cmd, f"{kind} name '{name}' is ambiguous: {', '.join(sorted(found))}")
        raise self.error(cmd, f"no {kind} named '{name}'")

    def _key_field(self, cmd: Command, table, name: str):
        """The table's KeyField for an STF key name (`hdr.h$0.f` = `hdr.h[0].f`, `X.$valid$`)."""
        name = re.sub(r"\$([0-9]+)", r"[\1]", name)
        name = re.sub(r"\.(\$valid\$|valid)$", ".isValid()", name)
        keys = {k.name: k for k in table.keys}
        return keys[self._resolve(cmd, f"key field of table {table.name}", name, keys)]

    # -- table commands

    def _parse_action(self, cmd: Command, table, text: str) -> tuple[str, dict[str, int]]:
        m = re.fullmatch(r"([A-Za-z_.$0-9\[\]]+)\s*\((.*)\)", text.strip())
        if not m:
            raise self.error(cmd, f"expected ACTION(PARAM:VALUE, ...), got '{text.strip()}'")
        action = self._resolve(cmd, f"action of table {table.name}", m.group(1), table.actions)
        widths = dict(self.schema.actions[action].params)
        params: dict[str, int] = {}
        for arg in filter(None, (a.strip() for a in m.group(2).split(","))):
            pname, sep, value = arg.partition(":")
            pname = pname.strip()
            if not sep:
                raise self.error(cmd, f"action argument '{arg}' is not PARAM:VALUE")
            if pname not in widths:
                raise self.error(cmd, f"action {action} has no parameter '{pname}'")
            params[pname] = self._number(cmd, value.strip(), f"parameter {pname}")
        return action, params

    def _number(self, cmd: Command, text: str, what: str) -> int:
        try:
            return int(text, 0)
        except ValueError:
            raise self.error(cmd, f"{what}: '{text}' is not a number") from None

    def _match(self, cmd: Command, key, value: str):
        """A state match spec for `value` on `key` (see the module docstring for the forms)."""
        from p4target import state as st

        what = f"key {key.name}"
        kind, width = key.match_kind, key.bitwidth
        if kind == "range":
            lo, sep, hi = value.partition("..") if ".." in value else value.partition("->")
            if sep:
                return st.Range(self._number(cmd, lo, what), self._number(cmd, hi, what))
        if "&&&" in value:
            if kind not in ("ternary", "lpm"):
                raise self.error(cmd, f"{what}: value&&&mask needs a ternary or lpm key, not {kind}")
            v, m = (self._number(cmd, part, what) for part in value.split("&&&", 1))
            if kind == "lpm":
                return st.Lpm(v & m, self._prefix_len(cmd, m, width, what))
            return st.Ternary(v & m, m)
        if kind == "lpm" and "/" in value:
            v_text, plen = value.split("/", 1)
            plen_i = self._number(cmd, plen, what)
            if not 0 <= plen_i <= width:
                raise self.error(cmd, f"{what}: prefix length {plen_i} out of range 0..{width}")
            mask = ((1 << plen_i) - 1) << (width - plen_i)
            return st.Lpm(self._number(cmd, v_text, what) & mask, plen_i)
        if "*" in value:
            wild_v, wild_m, digits, bits = _wildcard(value)
            if wild_v is None:
                raise self.error(cmd, f"{what}: '{value}' is not a number with '*' nibbles")
            if kind == "ternary":
                return st.Ternary(wild_v, wild_m)
            if kind == "lpm":
                known = min(width, (digits - value.count("*")) * bits)
                mask = ((1 << known) - 1) << (width - known)
                return st.Lpm(wild_v & mask, known)
            raise self.error(cmd, f"{what}: '*' wildcards need a ternary or lpm key, not {kind}")
        v = self._number(cmd, value, what)
        if kind == "exact":
            return st.Exact(v)
        if kind == "optional":
            return st.Optional(v)
        if kind == "lpm":
            return st.Lpm(v, width)
        if kind == "range":
            return st.Range(v, v)
        return st.Ternary(v, (1 << width) - 1)

    def _prefix_len(self, cmd: Command, mask: int, width: int, what: str) -> int:
        plen = bin(mask).count("1")
        if mask != ((1 << plen) - 1) << (width - plen):
            raise self.error(cmd, f"{what}: mask {mask:#x} is not a prefix mask")
        return plen

    def do_add(self, cmd: Command) -> None:
        from p4target.state import TableEntry

        text, handle = cmd.rest, None
        m = re.search(r"\)\s*=\s*([A-Za-z_][A-Za-z0-9_]*)\s*$", text)
        if m:
            handle, text = m.group(1), text[: m.start() + 1]
        paren = text.find("(")
        if paren < 0:
            raise self.error(cmd, "add: missing ACTION(...)")
        head = text[:paren].split()
        if len(head) < 2:
            raise self.error(cmd, "add: expected TABLE [PRIORITY] KEY:VALUE ... ACTION(...)")
        action_text = head.pop() + text[paren:]
        table = self.schema.tables[self._resolve(cmd, "table", head[0], self.schema.tables)]
        fields, priority = head[1:], 0
        if fields and fields[0].isdigit():
            priority = int(fields.pop(0))
        match = {}
        for item in fields:
            name, sep, value = item.partition(":")
            if not sep:
                raise self.error(cmd, f"add: key '{item}' is not FIELD:VALUE")
            key = self._key_field(cmd, table, name)
            match[key.name] = self._match(cmd, key, value)
        action, params = self._parse_action(cmd, table, action_text)
        needs_priority = any(k.match_kind in ("ternary", "range", "optional") for k in table.keys)
        # bmv2's runner passes the priority only to tables that need one; a missing one
        # means the lowest, so earlier entries win among equals.
        entry = TableEntry(match, action, params, (priority or 1) if needs_priority else 0)
        self.state.insert_entry(table.name, entry)
        if handle is not None:
            self.handles[handle] = (table.name, entry)

    def do_setdefault(self, cmd: Command) -> None:
        name, _, action_text = cmd.rest.partition(" ")
        table = self.schema.tables[self._resolve(cmd, "table", name, self.schema.tables)]
        action, params = self._parse_action(cmd, table, action_text)
        self.state.set_default(table.name, action, params)

    # -- packets

    def do_packet(self, cmd: Command) -> None:
        port_text, _, data_text = cmd.rest.partition(" ")
        port = self._number(cmd, port_text, "packet port")
        hex_text = "".join(data_text.split())
        if not hex_text or not _HEX_CHARS.match(hex_text) or len(hex_text) % 2:
            raise self.error(cmd, f"packet data must be an even number of hex digits, got '{data_text.strip()}'")
        self.result.packets_in += 1
        for out_port, data in self.pipeline.process(port, bytes.fromhex(hex_text)):
            self.got.setdefault(out_port, []).append(Output(bytes(data), cmd.line))
            self.result.packets_out += 1

    def do_expect(self, cmd: Command) -> None:
        port_text, _, data_text = cmd.rest.partition(" ")
        port = self._number(cmd, port_text, "expect port")
        pattern = "".join(data_text.split()).upper()
        if not pattern:
            self.any_ok.add(port)
            return
        exact_end = pattern.endswith("$")
        pattern = pattern.rstrip("$")
        if not _EXPECT_CHARS.match(pattern):
            raise self.error(cmd, f"expect data must be hex digits, '*' and a final '$', got '{data_text.strip()}'")
        self.expected.setdefault(port, []).append(Expectation(pattern, exact_end, cmd.line))

    def do_wait(self, cmd: Command) -> None:
        """Packets are processed synchronously, so there is nothing to wait for."""
        if cmd.rest:
            raise self.error(cmd, "wait takes no arguments")

    # -- packet replication engine

    def _ints(self, cmd: Command, count: int | None = None) -> list[int]:
        words = cmd.rest.split()
        if count is not None and len(words) != count:
            raise self.error(cmd, f"{cmd.verb} takes {count} numbers, got '{cmd.rest}'")
        return [self._number(cmd, w, cmd.verb) for w in words]

    def do_mc_mgrp_create(self, cmd: Command) -> None:
        (group,) = self._ints(cmd, 1)
        self.state.mc_group_insert(group, [])

    def do_mc_node_create(self, cmd: Command) -> None:
        numbers = self._ints(cmd)
        if len(numbers) < 2:
            raise self.error(cmd, "mc_node_create takes RID PORT [PORT ...]")
        self.mc_nodes.append((numbers[0], numbers[1:]))

    def do_mc_node_associate(self, cmd: Command) -> None:
        group, node = self._ints(cmd, 2)
        if not 0 <= node < len(self.mc_nodes):
            raise self.error(cmd, f"no multicast node handle {node} (created so far: {len(self.mc_nodes)})")
        if group not in self.state.multicast_groups:
            raise self.error(cmd, f"multicast group {group} was not created (mc_mgrp_create)")
        rid, ports = self.mc_nodes[node]
        replicas = self.state.multicast_groups[group] + [(p, rid) for p in ports]
        self.state.mc_group_modify(group, replicas)

    def do_mirroring_add(self, cmd: Command) -> None:
        session, port = self._ints(cmd, 2)
        self.state.clone_session_insert(session, [(port, 0)])

    def do_mirroring_add_mc(self, cmd: Command) -> None:
        session, group = self._ints(cmd, 2)
        if group not in self.state.multicast_groups:
            raise self.error(cmd, f"multicast group {group} was not created (mc_mgrp_create)")
        self.state.clone_session_insert(session, list(self.state.multicast_groups[group]))

    # -- registers and counters

    def _register(self, cmd: Command, name: str) -> str:
        return self._resolve(cmd, "register", name, self.schema.registers)

    def do_register_write(self, cmd: Command) -> None:
        words = cmd.rest.split()
        if len(words) != 3:
            raise self.error(cmd, "register_write takes REGISTER INDEX VALUE")
        name = self._register(cmd, words[0])
        index, value = (self._number(cmd, w, "register_write") for w in words[1:])
        self.state.register_write(name, index, value)

    def do_register_reset(self, cmd: Command) -> None:
        self.state.register(self._register(cmd, cmd.rest.strip())).reset()

    def do_register_read(self, cmd: Command) -> None:
        words = cmd.rest.split()
        if len(words) not in (2, 4):
            raise self.error(cmd, "register_read takes REGISTER INDEX [OP VALUE]")
        name = self._register(cmd, words[0])
        index = self._number(cmd, words[1], "register index")
        value = self.state.register_read(name, index)
        self.result.log.append(f"{name}[{index}] = {value}")
        if len(words) == 4:
            self._check(cmd, f"register {name}[{index}]", value, words[2], words[3])

    def do_check_counter(self, cmd: Command) -> None:
        m = re.fullmatch(r"([A-Za-z_.$0-9\[\]]+)\s*\(\s*([^)\s]+)\s*\)\s*(?:(packets|bytes)\s*(\S+)\s*(\S+))?",
                         cmd.rest)
        if not m:
            raise self.error(cmd, "check_counter takes COUNTER(INDEX) [packets|bytes OP VALUE]")
        name, index_text, unit, op, expected = m.groups()
        direct = self.schema.direct_counters
        full = self._resolve(cmd, "counter", name, list(self.schema.counters) + list(direct))
        if full in direct:
            handle = index_text.lstrip("$")
            if handle not in self.handles:
                raise self.error(cmd, f"direct counter {full} is indexed by an entry handle from "
                                      f"`add ... = HANDLE`; '{index_text}' is not one")
            entry = self.handles[handle][1]
            packets, nbytes = entry.packets, entry.bytes
        else:
            packets, nbytes = self.state.counter_read(full, self._number(cmd, index_text, "counter index"))
        self.result.log.append(f"{full}({index_text}) packets={packets} bytes={nbytes}")
        if unit is not None:
            self._check(cmd, f"counter {full}({index_text}) {unit}", packets if unit == "packets" else nbytes,
                        op, expected)

    def _check(self, cmd: Command, what: str, got: int, op: str, expected_text: str) -> None:
        compare = _COMPARISONS.get(op)
        if compare is None:
            raise self.error(cmd, f"unknown comparison '{op}' (use one of {' '.join(_COMPARISONS)})")
        expected = self._number(cmd, expected_text, what)
        if not compare(got, expected):
            self.result.failures.append(
                f"{self.filename}:{cmd.line}: {what}: expected {op} {expected}, got {got}")

    # -- the verdict

    def _compare_outputs(self) -> None:
        for port in sorted(set(self.expected) | set(self.got)):
            if port in self.any_ok:
                continue
            want = self.expected.get(port, [])
            got = self.got.get(port, [])
            for i in range(max(len(want), len(got))):
                w = want[i] if i < len(want) else None
                g = got[i] if i < len(got) else None
                if w is not None and g is not None and w.matches(g.data):
                    continue
                self.result.failures.append(_diff(port, i, w, g))


def _diff(port: int, index: int, want: Expectation | None, got: Output | None) -> str:
    """A readable expected-vs-got block for one packet position on one port."""
    lines = [f"port {port}, packet #{index + 1}:"]
    if want is None:
        lines.append("  expected: nothing (no `expect` for it)")
    else:
        lines.append(f"  expected: {want.text()}   (line {want.line})")
    if got is None:
        lines.append("  got:      nothing")
        return "\n".join(lines)
    lines.append(f"  got:      {_spaced(got.data.hex().upper())}   (from packet at line {got.cause_line})")
    if want is not None:
        hexgot = got.data.hex().upper()
        where = next((i for i, (p, g) in enumerate(zip(want.pattern, hexgot)) if p not in ("*", g)), None)
        if where is not None:
            lines.append(f"  first difference at byte {where // 2} (nibble {where})")
        elif len(hexgot) < len(want.pattern):
            lines.append(f"  packet too short: {len(got.data)} bytes, expected at least {(len(want.pattern) + 1) // 2}")
        else:
            lines.append(f"  packet too long: {len(got.data)} bytes, expected exactly {len(want.pattern) // 2} ($)")
    return "\n".join(lines)


def _spaced(hexstr: str) -> str:
    """Hex in 8-nibble groups, the way STF files usually write packets."""
    return " ".join(hexstr[i:i + 8] for i in range(0, len(hexstr), 8))


def _wildcard(text: str) -> tuple[int | None, int, int, int]:
    """(value, mask, digit count, bits per digit) of a 0x/0b/0o number with '*' digits."""
    bases = {"0x": (16, 4), "0b": (2, 1), "0o": (8, 3)}
    base, bits = bases.get(text[:2].lower(), (None, 0))
    if base is None:
        return None, 0, 0, 0
    digits = text[2:]
    top_digit = "0123456789ABCDEF"[base - 1]
    try:
        value = int(digits.replace("*", "0"), base)
        mask = int("".join("0" if d == "*" else top_digit for d in digits), base)
    except ValueError:
        return None, 0, 0, 0
    return value, mask, len(digits), bits


_HANDLERS = {
    "add": StfRunner.do_add,
    "setdefault": StfRunner.do_setdefault,
    "packet": StfRunner.do_packet,
    "expect": StfRunner.do_expect,
    "wait": StfRunner.do_wait,
    "mc_mgrp_create": StfRunner.do_mc_mgrp_create,
    "mc_node_create": StfRunner.do_mc_node_create,
    "mc_node_associate": StfRunner.do_mc_node_associate,
    "mirroring_add": StfRunner.do_mirroring_add,
    "mirroring_add_mc": StfRunner.do_mirroring_add_mc,
    "register_write": StfRunner.do_register_write,
    "register_read": StfRunner.do_register_read,
    "register_reset": StfRunner.do_register_reset,
    "check_counter": StfRunner.do_check_counter,
}
