"""A table of records' long summary, as the console's views read it (tests that check a figure
without a run folder)."""

from __future__ import annotations

import pyarrow as pa

from analysis.long_summary import SummaryView, long_summary


def summarize(table: pa.Table, modes: list[str]) -> SummaryView:
    return SummaryView(long_summary(table, "", modes))
