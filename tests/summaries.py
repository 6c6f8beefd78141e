"""The console's rows of a table of records, read off its long summary as a run's are (tests
that check a figure without a run folder)."""

from __future__ import annotations

import pyarrow as pa

from analysis.long_summary import long_summary
from analysis.summary import ModeSummary, mode_summaries


def summarize(table: pa.Table, modes: list[str]) -> list[ModeSummary]:
    return mode_summaries(long_summary(table, "", modes), modes)
