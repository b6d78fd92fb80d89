"""Tables on screen read well in an 80-column terminal (and a narrower one): no line is wider than
the terminal, and no word of a cell or header (a number such as 5,914,800, "accuracy", a link
name) is split across lines, as rich alone does when it shrinks a table's widest columns."""
from __future__ import annotations

import re

import pytest
from rich.console import Console
from rich.table import Table

from testbed import report

BIG = 5_914_800_123


def compare_summary(train: bool) -> dict:
    def scheme(time_s: float, link: str, link_bytes: int, bottleneck: str) -> dict:
        return {"time_s": time_s, "final_accuracy": 0.961 if train else None, "correct": None if train else True,
                "link": link, "link_bytes": link_bytes, "bottleneck": bottleneck,
                "target_accuracy": 0.95 if train else None, "time_to_target_s": 12.5 if train else None}

    return {"innet": scheme(0.3421, "s1-h1", 5_914_800, "link h1->s1 97%"),
            "ring": scheme(0.6703, "s1-h10", 10_351_900, "machine 2 cores 100%"),
            "ps": scheme(3.1684, "s1-h9", 73_918_400, "host process ps 100%")}


COUNTERS = {s: {"jobs": {1: {k: BIG // 1000 for k in report.JOB_HEADERS}},
                "ports": {p: {k: BIG for k in report.PORT_FIELDS} for p in range(1, 10)}} for s in ("s1", "s10")}


def words(text: str) -> set[str]:
    """Every word on the screen: what lies between spaces and box-drawing characters."""
    return {w for line in text.splitlines() for w in re.split(r"[\s\u2500-\u257f]+", line) if w}


def cell_words(table: Table) -> set[str]:
    return {w for column in table.columns for cell in (column.header, *column.cells) for w in str(cell).split()}


def rendered(renderable, width: int) -> str:
    console = Console(width=width, record=True)
    console.print(renderable)
    return console.export_text()


def tables(renderable) -> list[Table]:
    """The tables inside what report returns (WordWrapped, or a grid of them)."""
    if isinstance(renderable, report.WordWrapped):
        return [renderable.table]
    return [t for column in renderable.columns for cell in column.cells for t in tables(cell)]


@pytest.mark.parametrize("width", [80, 60, 40])
@pytest.mark.parametrize("make", [lambda: report.comparison_table(compare_summary(train=True)),
                                  lambda: report.comparison_table(compare_summary(train=False)),
                                  lambda: report.counters_table(COUNTERS)], ids=["train", "allreduce", "counters"])
def test_no_word_is_split_and_no_line_is_too_wide(make, width):
    renderable = make()
    text = rendered(renderable, width)
    assert max(len(line.rstrip()) for line in text.splitlines()) <= width
    missing = set().union(*(cell_words(t) for t in tables(renderable))) - words(text)
    assert not missing, f"split across lines at width {width}: {sorted(missing)}\n{text}"


def test_the_comparison_keeps_its_columns_side_by_side_in_80_columns():
    text = rendered(report.comparison_table(compare_summary(train=True)), 80)
    innet = next(line.split() for line in text.splitlines() if line.startswith("innet"))
    assert innet[:7] == ["innet", "342.1", "0.961", "12.50", "s1-h1", "5,914,800", "1.00x"]


def test_rich_alone_splits_words_at_80_columns():
    """What the tables above guard against (and that `words` sees it): rich's default table with the
    same cells, as `aggnet compare` printed it before, cuts words."""
    table = report.comparison_table(compare_summary(train=True)).table
    plain = Table(*(str(c.header) for c in table.columns))
    for row in range(table.row_count):
        plain.add_row(*(str(list(c.cells)[row]) for c in table.columns))
    assert {"accuracy", "73,918,400"} <= cell_words(table) - words(rendered(plain, 80))
