"""What the native engine queued for Python (the twin of p4target/state/events.py): digests, log lines and
PacketIns, moved to where the Python engine puts them."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from p4target import state as st
from p4target.constants import EV_DIGEST, EV_LOG, EV_PACKET_IN, MAX_DIGESTS_QUEUED
from p4target.native.binding import Engine
from p4target.native.store.words import WORD_BITS, words


class NativeEvents(st.Events):
    """Events whose digests and log lines the engine queues; `pump` moves them here."""

    def __init__(self, engine: Engine, digests: list[tuple[str, tuple[int, ...]]]):
        """`digests`: (name, field widths) by digest id (CProgram.digests)."""
        super().__init__()
        self._engine, self._layouts = engine, digests

    def pump(self, on_packet_in: Callable[[int, bytes], None] | None) -> None:
        """Digests to `digests`, log lines to `log`, PacketIns to `on_packet_in(port, frame)` (dropped without one)."""
        for kind, arg, data in self._engine.events():
            if kind == EV_DIGEST:
                if len(self.digests) < MAX_DIGESTS_QUEUED:
                    name, widths = self._layouts[arg]
                    cells = iter(int(v) for v in np.frombuffer(data, dtype=np.uint64))
                    values = tuple(sum(next(cells) << (WORD_BITS * i) for i in range(words(w))) for w in widths)
                    self.digests.append((name, values))
            elif kind == EV_LOG:
                self.log.append(data.decode("utf-8", "replace"))
            elif kind == EV_PACKET_IN and on_packet_in is not None:
                on_packet_in(arg, data)

    def clear(self) -> None:
        self._engine.events()  # what the engine still holds is forgotten too
        super().clear()
