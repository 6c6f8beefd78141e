"""Server-side view of a run, from the scraped /metrics: speculative-decoding acceptance per mode.

acceptance rate = Δ vllm:spec_decode_num_accepted_tokens / Δ vllm:spec_decode_num_draft_tokens
mean acceptance length = 1 + Δ accepted / Δ vllm:spec_decode_num_drafts
per-position acceptance = Δ vllm:spec_decode_num_accepted_tokens_per_pos{position=i} / Δ drafts
(increases over each replica's scrapes of the mode, a counter reset counted as a restart from
zero, summed over replicas).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from analysis.stats import counter_increase

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"


@dataclass(frozen=True)
class SpecDecodeStats:
    drafts: float
    draft_tokens: float
    accepted: float
    per_position: list[float]

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens else None

    @property
    def mean_acceptance_length(self) -> float | None:
        return 1 + self.accepted / self.drafts if self.drafts else None


def load_server_metrics(run_dir: Path) -> pa.Table | None:
    path = run_dir / "server_metrics"
    if not path.exists():
        return None
    table = ds.dataset(path, format="parquet", partitioning="hive").to_table()
    return table if table.num_rows else None   # a folder with no part yet (a full disk) has no columns either


def _delta(t: pa.Table, metric: str, labels: str | None = None) -> float:
    sub = t.filter(pc.equal(t["metric"], metric))
    if labels is not None:
        sub = sub.filter(pc.equal(sub["labels"], labels))
    total = 0.0
    for replica in set(sub["replica"].to_pylist()):
        r = sub.filter(pc.equal(sub["replica"], replica)).sort_by("time_ns")
        for lab in set(r["labels"].to_pylist()):
            total += counter_increase(r.filter(pc.equal(r["labels"], lab))["value"].to_numpy())
    return total


def spec_decode_stats(metrics: pa.Table, mode: str) -> SpecDecodeStats | None:
    t = metrics.filter(pc.equal(metrics["mode"], mode))
    if t.num_rows == 0 or DRAFTS not in set(t["metric"].to_pylist()):
        return None
    per_pos = t.filter(pc.equal(t["metric"], PER_POS))
    positions = sorted({int(orjson.loads(lab)["position"]) for lab in per_pos["labels"].to_pylist()})
    pos_deltas = []
    for p in positions:
        labels = {lab for lab in per_pos["labels"].to_pylist() if orjson.loads(lab)["position"] == str(p)}
        pos_deltas.append(sum(_delta(per_pos, PER_POS, lab) for lab in labels))
    drafts = _delta(t, DRAFTS)
    return SpecDecodeStats(drafts, _delta(t, DRAFT_TOKENS), _delta(t, ACCEPTED),
                           [d / drafts if drafts else 0.0 for d in pos_deltas])
