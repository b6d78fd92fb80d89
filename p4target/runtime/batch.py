"""A Write's runs of table-entry updates, handed to the state at once (the native engine takes each in one call).

`Device.write` (without rollback) groups consecutive updates by `batched_table` and gives each run, WRITE_RUN
updates at a time, to `write_table_run`: every update is checked as `Translator.apply` checks it, with the same
status when it fails, and the state applies the rest in order (`State.write_entries`). Only what `apply` would do
with no more than a table's insert, modify or delete is batched: entries of tables without an action profile, not
the default entry, with no counter data, meter config or metadata.
"""
from __future__ import annotations

from collections.abc import Iterator

import grpc
from finsy.proto import p4i, p4r

from p4target import state as st
from p4target.runtime.errors import RuntimeStatus
from p4target.runtime.translate import DELETE, INSERT, MODIFY, Translator

_STATE_WRITES = {INSERT: "insert", MODIFY: "modify", DELETE: "delete"}  # a table entry's update -> state.Table's


def batched_table(translator: Translator, update: p4r.Update) -> int:
    """The table id of an update write_table_run may take with others, else 0."""
    if update.type not in _STATE_WRITES or update.entity.WhichOneof("entity") != "table_entry":
        return 0
    te = update.entity.table_entry
    if te.is_default_action or te.HasField("counter_data") or te.HasField("meter_config") or \
            te.controller_metadata or te.metadata:
        return 0
    table = translator.info.find("tables", te.table_id)
    return 0 if table is None or table.implementation_id else te.table_id


def write_table_run(translator: Translator, table_id: int, updates: list[p4r.Update]) -> list[RuntimeStatus | None]:
    """Updates of table `table_id` that batched_table allowed, applied as `Translator.apply` applies each in turn
    (the same per-update failures, None = applied), handed to the state as one run."""
    table = translator.by_id("tables", table_id)
    failures: list[RuntimeStatus | None] = [None] * len(updates)
    at: list[int] = []
    actions: dict[bytes, tuple[str, dict[str, int]]] = {}  # the run's distinct actions, each checked once

    def writes() -> Iterator[tuple[str, st.TableEntry]]:  # each entry made as the state takes it (see NativeTable)
        for i, update in enumerate(updates):
            te = update.entity.table_entry
            try:
                entry = st.TableEntry(translator.match_in(table, te.match), "", {}, te.priority,
                                      idle_timeout_ns=te.idle_timeout_ns)
                if update.type != DELETE:
                    entry.action, entry.params = _action_once(translator, table, te.action, actions)
            except RuntimeStatus as failure:
                failures[i] = failure
                continue
            at.append(i)
            yield _STATE_WRITES[update.type], entry

    errors = translator.state.write_entries(table.preamble.name, writes())
    for i, error in zip(at, errors):
        if error is not None:
            failures[i] = RuntimeStatus(grpc.StatusCode[error.code], str(error))
    return failures


def _action_once(translator: Translator, table: p4i.Table, ta: p4r.TableAction,
                 seen: dict[bytes, tuple[str, dict[str, int]]]) -> tuple[str, dict[str, int]]:
    """The (action, params) a table entry's action message names, worked out once per distinct message in `seen`
    (the params a copy each time: every entry owns its own). Routes share their next hops: a run's actions are
    mostly a few."""
    key = ta.SerializeToString(deterministic=True)
    known = seen.get(key)
    if known is None:
        known = seen[key] = translator.entry_action_in(table, ta)
    return known[0], dict(known[1])
