"""simple_switch's and simple_switch_grpc's command line, as `aggnet switch` takes it.

Every option of both `--help` texts (BMv2 1.15) is here, and each either does what BMv2 does or is refused
with one line naming it (exit 1); none is accepted and ignored. docs/targets.md has the table.

Values are read as BMv2's boost::program_options reads them: `--opt VALUE`, `--opt=VALUE`, `-iVALUE` and the
single argument `-i 0@pcap0`; an unambiguous prefix of a long option (`--thr=9091`); a general option given
twice is an error, as there; integers are decimal with no surrounding whitespace (`--device-id ' 3'` is
refused, as there), while `-i` skips whitespace around the port number (BMv2 reads it with a stream). BMv2
reads no option files (`@FILE` is a program path there too).

Flavours: which BMv2 binary the switch stands in for. `aggnet switch` is simple_switch_grpc with AggNet's
defaults (side channel on 9090 + device id); a link to the `aggnet` command named `simple_switch` or
`simple_switch_grpc` (or `--flavour`) takes that binary's defaults, and `simple_switch` opens no P4Runtime
server: a topology of Thrift-only switches and one simple_switch_grpc on 9559 does not collide.
"""
from __future__ import annotations

import argparse
import os
import re

from p4target.constants import DEFAULT_CPU_PORT
from p4target.limits import DEFAULT_LOG_MAX_MB, DEFAULT_PCAP_MAX_MB, DEFAULT_STATE_CAP_MB
from p4target.load import ENGINES

FLAVOURS = ("aggnet", "simple_switch", "simple_switch_grpc")
BMV2_DROP_PORT = 511
BMV2_THRIFT_PORT = 9090
BMV2_GRPC_ADDR = "0.0.0.0:9559"
BMV2_JSON_VERSION = "2.24"  # what `simple_switch --json-version` prints; p4target.lowered reads format 2.x
LOG_LEVELS = ("trace", "debug", "info", "warn", "error", "off")

# BMv2 options this switch cannot honour: refused, with the reason and what to use instead.
REFUSED = {
    "packet_in": ("--packet-in", "BMv2's nanomsg packet socket; ports are -i interfaces or --use-files pcap files"),
    "notifications_addr": ("--notifications-addr", "nanomsg notifications; P4Runtime's stream carries digests "
                                                   "and idle timeouts"),
    "restore_state": ("--restore-state", "BMv2's state dump format"),
    "load_modules": ("--load-modules", "no .so extern modules: externs are p4target/externs plug-ins"),
    "enable_swap": ("--enable-swap", "Thrift config swap (bm_load_new_config, bm_swap_configs) is not served; "
                                     "P4Runtime's SetForwardingPipelineConfig swaps"),
    "disable_swap": ("--disable-swap", "SetForwardingPipelineConfig always swaps here"),
    "dp_grpc_server_addr": ("--dp-grpc-server-addr", "no dataplane gRPC channel; ports are -i interfaces"),
}
# Target options with one value here: BMv2's default is accepted, another value refused.
FIXED = {"drop_port": ("--drop-port", BMV2_DROP_PORT, "the drop port is 511"),
         "priority_queues": ("--priority-queues", 1, "one queue per port"),
         "max_mc_groups": ("--max-mc-groups", 4096, "multicast groups are bounded by the state cap"),
         "max_l1_entries": ("--max-l1-entries", 4096, "multicast entries are bounded by the state cap"),
         "max_l2_entries": ("--max-l2-entries", 8192, "multicast entries are bounded by the state cap")}
# simple_switch_grpc's target options: simple_switch has none of them (its parser refuses them).
GRPC_ONLY = ("grpc_server_addr", "grpc_server_ssl", "grpc_server_cacert", "grpc_server_cert", "grpc_server_key",
             "grpc_server_with_client_auth", "cpu_port", "dp_grpc_server_addr", "disable_swap")
# Integer options: (lowest, highest).
INT_OPTIONS: dict[str, tuple[int, int]] = {
    "device_id": (0, 2**64 - 1), "cpu_port": (1, 510), "thrift_port": (1, 65535), "use_files": (-2**31, 2**31 - 1),
    "max_port_count": (1, 2**31 - 1), "log_file_max_size": (1, 2**63 - 1), "log_file_max_files": (0, 10_000),
    "drop_port": (0, 511), "priority_queues": (0, 2**31 - 1), "max_mc_groups": (0, 2**31 - 1),
    "max_l1_entries": (0, 2**31 - 1), "max_l2_entries": (0, 2**31 - 1), "dump_packet_data": (0, 2**31 - 1),
    "log_max_mb": (1, 2**30), "pcap_max_mb": (1, 2**30), "max_state_mb": (1, 2**30)}
_INTEGER = re.compile(r"[+-]?[0-9]+")  # boost::lexical_cast<int>: no whitespace, no base prefix


class OptionError(Exception):
    """A refused or malformed option: one line, exit code 1 (as BMv2's parser exits)."""

    exit_code = 1


class _Once(argparse.Action):
    """A general option BMv2 takes once: given twice is an error there ("cannot be specified more than once")."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = namespace.__dict__.setdefault("_given", set())
        if self.dest in seen:
            raise argparse.ArgumentError(self, "cannot be specified more than once")
        seen.add(self.dest)
        setattr(namespace, self.dest, self.const if values is None and self.nargs == "?" else values)


def normalize_argv(argv: list[str]) -> list[str]:
    """BMv2's `GENERAL-OPTIONS -- TARGET-OPTIONS` as one list of options (the first `--` removed)."""
    if "--" not in argv:
        return argv
    cut = argv.index("--")
    return argv[:cut] + argv[cut + 1:]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Both binaries' options, general and target ones, and AggNet's own."""
    parser.add_argument("program", nargs="?", metavar="PROG.p4|PROG.json",
                        help="P4_16 v1model program or p4c's BMv2 JSON; without it (aggnet flavour), wait for "
                             "SetForwardingPipelineConfig")
    parser.add_argument("--flavour", choices=FLAVOURS, default="aggnet",
                        help="the BMv2 binary to stand in for (set by a link to `aggnet` named simple_switch or "
                             "simple_switch_grpc); simple_switch opens no P4Runtime server")
    general = parser.add_argument_group("general options (both binaries)")
    general.add_argument("-i", "--interface", action="append", default=[], metavar="PORT@IFACE",
                         help="attach an interface (or, with --use-files, the pcap files IFACE_in/_out.pcap) as a "
                              "port, e.g. -i 1@s1-eth1 (repeatable)")
    general.add_argument("--pcap", nargs="?", const=".", metavar="DIR", action=_Once,
                         help="write DIR/IFACE_in.pcap and DIR/IFACE_out.pcap per port (DIR defaults to .)")
    general.add_argument("--use-files", metavar="WAIT", action=_Once,
                         help="ports are pcap files: port N@NAME replays NAME_in.pcap WAIT seconds after start "
                              "(all files merged by timestamp) and writes what it sends to NAME_out.pcap")
    general.add_argument("--thrift-port", metavar="PORT", action=_Once,
                         help="Thrift runtime and side channel TCP port (default 9090, aggnet flavour 9090 + device "
                              "id); it listens on 127.0.0.1 only, never on other addresses: it has no authentication")
    general.add_argument("--device-id", default="0", action=_Once, help="device id (default 0)")
    general.add_argument("--log-console", action="store_true", help="log to stdout (not with --log-file, as BMv2)")
    general.add_argument("--log-file", metavar="BASE", action=_Once,
                         help="log to BASE.txt (simple_switch's name for it), rotated at --log-file-max-size")
    general.add_argument("-L", "--log-level", choices=LOG_LEVELS, action=_Once,
                         help="trace, debug, info, warn, error or off (default info)")
    general.add_argument("--log-flush", action="store_true", help="every log line is flushed at once (always)")
    general.add_argument("--log-file-max-size", default="5242880", metavar="BYTES", action=_Once,
                         help="rotate --log-file at this size (default 5 MB)")
    general.add_argument("--log-file-max-files", default="3", metavar="N", action=_Once,
                         help="rotated --log-file copies kept (default 3)")
    general.add_argument("--dump-packet-data", default="0", metavar="N", action=_Once,
                         help="log the first N bytes of every packet received and sent, at level info (the Python "
                              "engine runs the program then: the native one logs no packets); default 0: none")
    general.add_argument("--nanolog", metavar="ADDR", action=_Once,
                         help="publish BMv2's event log on a nanomsg PUB socket bound at ADDR (e.g. "
                              "ipc:///tmp/bm-0-log.ipc), in BMv2's format: packet in and packet out events, both "
                              "engines (no parser, table or action events)")
    general.add_argument("-v", "--version", action="version", version=f"aggnet switch {_version()}")
    general.add_argument("--json-version", action="version", version=BMV2_JSON_VERSION,
                         help="print the BMv2 JSON format version read (major.minor) and exit")
    general.add_argument("--no-p4", action="store_true", help="start without a program, even if PROG is given")
    general.add_argument("--max-port-count", default="512", metavar="N", action=_Once,
                         help="refuse more than N ports (default 512)")
    target = parser.add_argument_group("target options (after `--` on BMv2; accepted anywhere here)")
    target.add_argument("--grpc-server-addr", metavar="HOST:PORT",
                        help=f"P4Runtime server address (default {BMV2_GRPC_ADDR}; not with simple_switch)")
    target.add_argument("--cpu-port", help=f"port number of the controller (PacketIn/PacketOut), default "
                                           f"{DEFAULT_CPU_PORT}")
    target.add_argument("--grpc-server-ssl", action="store_true", help="serve P4Runtime over TLS")
    target.add_argument("--grpc-server-cert", metavar="PEM", help="the server's certificate (with --grpc-server-ssl)")
    target.add_argument("--grpc-server-key", metavar="PEM", help="the server's private key (with --grpc-server-ssl)")
    target.add_argument("--grpc-server-cacert", metavar="PEM", help="CA that client certificates must be signed by")
    target.add_argument("--grpc-server-with-client-auth", action="store_true",
                        help="require a client certificate signed by --grpc-server-cacert (mutual TLS)")
    for flag, value, why in FIXED.values():
        target.add_argument(flag, default=str(value), help=f"{value} only ({why}); another value is refused")
    refused = parser.add_argument_group("BMv2 options refused here (one line naming the option, exit 1)")
    for dest, (flag, why) in REFUSED.items():
        if dest in ("enable_swap", "disable_swap"):
            refused.add_argument(flag, action="store_true", help=why)
        else:
            refused.add_argument(flag, metavar="ARG", help=why)
    own = parser.add_argument_group("AggNet's own options")
    own.add_argument("--engine", choices=ENGINES, default="native",
                     help="native: the program compiled to C, no Python per packet (default; a program with a "
                          "construct it lacks runs on python, with one log line naming it); python: the "
                          "readable reference engine")
    own.add_argument("--log", metavar="FILE", help="log to FILE, and P4Runtime requests to FILE's stem + "
                                                   "-p4runtime-requests.txt; both rotated at --log-max-mb")
    own.add_argument("--log-max-mb", default=str(DEFAULT_LOG_MAX_MB), metavar="MB",
                     help=f"rotate --log and its request log at MB, one old file kept (default {DEFAULT_LOG_MAX_MB})")
    own.add_argument("--pcap-max-mb", default=str(DEFAULT_PCAP_MAX_MB), metavar="MB",
                     help=f"stop capturing into a pcap file once it holds MB (default {DEFAULT_PCAP_MAX_MB})")
    own.add_argument("--max-state-mb", default=str(DEFAULT_STATE_CAP_MB), metavar="MB",
                     help="refuse a program whose registers, counters, meters and tables (at their declared "
                          f"sizes) may take more than MB in all (default {DEFAULT_STATE_CAP_MB})")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("aggnet")
    except PackageNotFoundError:
        return "(source tree)"


def check_options(args: argparse.Namespace) -> None:
    """Refuse what this switch does not do, turn integers into ints, fill the flavour's defaults and check
    the combinations; OptionError (one line) if anything is wrong."""
    for dest, (flag, why) in REFUSED.items():
        if getattr(args, dest):
            raise OptionError(f"error: {flag}: not supported by aggnet switch ({why})")
    if args.flavour == "simple_switch":
        given = [d for d in GRPC_ONLY if getattr(args, d) not in (None, False)]
        if given:
            raise OptionError(f"error: --{given[0].replace('_', '-')}: simple_switch has no such option "
                              "(simple_switch_grpc has)")
    for dest, (lowest, highest) in INT_OPTIONS.items():
        text = getattr(args, dest)
        if text is None:
            continue
        flag = "--" + dest.replace("_", "-")
        if not _INTEGER.fullmatch(text):
            raise OptionError(f"error: {flag} {text!r}: expected a decimal integer")
        value = int(text)
        if not lowest <= value <= highest:
            raise OptionError(f"error: {flag} {value}: out of range {lowest}..{highest}")
        setattr(args, dest, value)
    for dest, (flag, fixed, why) in FIXED.items():
        if getattr(args, dest) != fixed:
            raise OptionError(f"error: {flag} {getattr(args, dest)}: not supported by aggnet switch ({why}; "
                              f"only {fixed})")
    if args.log_console and args.log_file:  # BMv2's words, and its exit code
        raise OptionError("error: --log-console and --log-file are exclusive")
    if len(args.interface) > args.max_port_count:
        raise OptionError(f"error: {len(args.interface)} ports (-i) but --max-port-count {args.max_port_count}")
    bmv2 = args.flavour != "aggnet"
    if args.thrift_port is None:
        args.thrift_port = BMV2_THRIFT_PORT if bmv2 else BMV2_THRIFT_PORT + args.device_id
    if args.cpu_port is None:
        args.cpu_port = DEFAULT_CPU_PORT
    if args.grpc_server_addr is None:
        args.grpc_server_addr = BMV2_GRPC_ADDR
    if bmv2 and args.program is None and not args.no_p4:
        raise OptionError("error: please specify an input JSON configuration file (or --no-p4)")
    if args.pcap is not None and args.use_files is None and not os.path.isdir(args.pcap):
        raise OptionError(f"error: --pcap {args.pcap}: not a directory")
    _check_tls(args)


def _check_tls(args: argparse.Namespace) -> None:
    tls_files = ("grpc_server_cert", "grpc_server_key", "grpc_server_cacert")
    given = ["--" + d.replace("_", "-") for d in (*tls_files, "grpc_server_with_client_auth") if getattr(args, d)]
    if not args.grpc_server_ssl and given:
        raise OptionError(f"error: {', '.join(given)} given without --grpc-server-ssl")
    if args.grpc_server_ssl and not (args.grpc_server_cert and args.grpc_server_key):
        raise OptionError("error: --grpc-server-ssl needs --grpc-server-cert and --grpc-server-key")
    if args.grpc_server_with_client_auth and not args.grpc_server_cacert:
        raise OptionError("error: --grpc-server-with-client-auth needs --grpc-server-cacert (the clients' CA)")
