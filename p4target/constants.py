"""The switch's numbers both engines must agree on, defined once.

The Python engine (pipeline.py, tm.py, switch.py, backends/python.py) imports them; the native
engine's build writes them as the C header `constants.h` (`c_header`), so the C side never
holds a copy of its own.
"""
from __future__ import annotations

DROP_PORT = 511              # egress_spec that drops the packet (BMv2's default drop port)
DEFAULT_CPU_PORT = 255       # the controller's port (PacketIn/PacketOut)

# BMv2's standard_metadata.instance_type values.
NORMAL, I2E_CLONE, E2E_CLONE, RECIRCULATED, REPLICATED, RESUBMITTED = 0, 1, 2, 4, 5, 6
MAX_LOOPS = 16               # resubmit/recirculate/clone generations per original packet
MAX_DIGESTS_QUEUED = 65536   # digests waiting for the control plane; more are dropped
# Jumps back (loop iterations) one run of an action may take; past them the packet is dropped, as a packet error.
# A loop need not end (`for (bit<8> i = 0; i <= n; ...)` with n = 255 never does; simple_switch spins on it for
# good), and a client's packet must not hold the switch: 65536 lets every loop over a bit<8> counter, and two
# nested ones, run to the end, while a packet that loops costs ~13 ms of the Python engine, ~0.04 ms natively (a
# one-line loop body, load 5.3; a normal packet 0.007 / 0.005 ms).
MAX_BACKWARD_JUMPS = 1 << 16

DEFAULT_DEPTH = 64           # packets, BMv2's default queue depth
DEFAULT_BURST_S = 0.005      # a token bucket holds this much time's worth of tokens
RX_BATCH = 32                # frames read from one port's socket before the queues are served
IDLE_WAKE_S = 1.0            # the packet loop wakes at least this often when nothing happens

# Kinds of the events the native engine hands to Python (eng_event).
EV_PACKET_IN, EV_LOG, EV_DIGEST = 1, 2, 3

_C_NAMES = ("DROP_PORT", "DEFAULT_CPU_PORT", "NORMAL", "I2E_CLONE", "E2E_CLONE", "RECIRCULATED", "REPLICATED",
            "RESUBMITTED", "MAX_LOOPS", "MAX_BACKWARD_JUMPS", "DEFAULT_DEPTH", "DEFAULT_BURST_S", "RX_BATCH", "IDLE_WAKE_S",
            "EV_PACKET_IN", "EV_LOG", "EV_DIGEST")


def c_header() -> str:
    """These constants as C `#define`s (the native engine's constants.h)."""
    lines = ["/* constants.h: written by p4target/constants.py (the one definition); do not edit. */",
             "#ifndef AGGNET_CONSTANTS_H", "#define AGGNET_CONSTANTS_H"]
    for name in _C_NAMES:
        value = globals()[name]
        lines.append(f"#define {name} {value!r}" if isinstance(value, float) else f"#define {name} {value}")
    lines.append("#endif")
    return "\n".join(lines) + "\n"
