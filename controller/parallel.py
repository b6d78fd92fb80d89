"""Work on many switches at once, a bounded number at a time: pushing a pipeline, installing entries,
connecting and reading counters wait on each switch's own process, so they overlap; the bound keeps
80 switches from meaning 80 threads, 80 RPCs and 80 compilations contending at once."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

PARALLEL_SWITCHES = 16
K = TypeVar("K")
T = TypeVar("T")


def each(items: Iterable[K], work: Callable[[K], T], limit: int = PARALLEL_SWITCHES) -> dict[K, T]:
    """item -> work(item) for every item, at most `limit` at a time, in the items' order; the first
    exception (in that order) is raised once all have ended. One at a time runs in the calling thread:
    a process started with PR_SET_PDEATHSIG gets its signal when the thread that started it ends."""
    items = list(items)
    if limit <= 1:
        return {item: work(item) for item in items}
    with ThreadPoolExecutor(max_workers=max(1, min(limit, len(items)))) as pool:
        return dict(zip(items, pool.map(work, items)))
