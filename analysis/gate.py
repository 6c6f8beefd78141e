"""The error gate of a run: a mode whose requests failed is not a result.

A mode fails the gate when none of its requests succeeded, or when its errors and timeouts pass
a share of the requests it sent (`--max-errors`, 10% by default). What the client did to itself
does not count: requests never sent (a deadline, an interrupt), in flight when the run was
stopped (`interrupted`) or its --deadline came (`timeout/deadline`), or on a worker that was lost
(`worker_lost`, reported as the mode's end): the outcome `client` of `contract.records.outcomes`, the one
definition the console, the reports, capacity probes and soak windows count by too.
The gate turns into exit code 1 (DESIGN.md, "Exit codes"); with --slo-gate a tenant's missed SLO
fails it too, and an SLO the data cannot judge (analysis.slo) leaves it not judged: exit 3, the
check could not complete.

Every gate lives here, each with three answers (passed, failed, not judged): the run's error and
SLO gate (`judge_gate`), a capacity probe's (`probe_verdict`), compare's (`compare_gate`) and a
soak's (`soak_gate`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pyarrow as pa

from analysis.compare import Change
from analysis.long_summary import SUMMARY_COLUMNS, SummaryView, long_summary
from analysis.slo import MISSED, SLO_TOO_FEW_RULE, UNJUDGED, judged, targets_of
from analysis.summary import attainment, request_counts
from common import exits
from contract.records import FAILED, OK, SLO_COLUMNS, STATUSES, outcome_of

# what a probe's verdict reads of its records: the summary's columns (not the chunk lists) and the targets
PROBE_COLUMNS = {*SUMMARY_COLUMNS, *SLO_COLUMNS}


@dataclass(frozen=True)
class ErrorCheck:
    mode: str
    ok: int
    kinds: dict[str, int]       # failures by kind ("error/not_sse", "timeout", ...), most first
    max_share: float

    @property
    def failed(self) -> int:
        """Errors and timeouts the server is answerable for."""
        return sum(self.kinds.values())

    @property
    def sent(self) -> int:
        return self.ok + self.failed

    @property
    def error_share(self) -> float:
        return self.failed / self.sent if self.sent else 0.0

    @property
    def passed(self) -> bool:
        return self.ok > 0 and self.error_share <= self.max_share

    def kinds_text(self) -> str:
        return ", ".join(f"{k} {n:,}" for k, n in self.kinds.items())

    def reason(self) -> str | None:
        """Why the mode failed the gate (None when it passed)."""
        if self.passed:
            return None
        if self.sent == 0:
            return f"{self.mode}: no request was sent"
        head = (f"{self.mode}: no request succeeded ({self.failed:,} of {self.sent:,} sent failed" if self.ok == 0
                else f"{self.mode}: {self.failed:,} of {self.sent:,} sent requests failed ({self.error_share:.0%}, "
                f"more than --max-errors {self.max_share:.0%}")
        return f"{head}: {self.kinds_text()})"

    def as_dict(self) -> dict:
        return {**asdict(self), "sent": self.sent, "failed": self.failed, "error_share": round(self.error_share, 4),
                "passed": self.passed, "reason": self.reason()}


def error_checks(summary: SummaryView, modes: list[str], max_share: float) -> list[ErrorCheck]:
    """One check per mode of `modes`, read off the run's long summary (its `requests` counts by
    status and `status/error_kind`, each kind's outcome by contract.records.outcome_of: the one
    definition of a failed request): it fails past `max_share` (--max-errors; its default:
    loadtest.options.replaying.MAX_ERROR_SHARE)."""
    out = []
    for mode in modes:
        counts = request_counts(summary, mode)
        by_kind = {k: n for k, n in counts.items() if "/" in k}
        for status in STATUSES:     # a status's records without a kind
            rest = counts.get(status, 0) - sum(n for k, n in by_kind.items() if k.partition("/")[0] == status)
            if rest:
                by_kind[status] = rest
        failures = [(k, n) for k, n in by_kind.items() if outcome_of(*_status_and_kind(k)) == FAILED]
        failures.sort(key=lambda kv: (-kv[1], kv[0]))      # most first, then by name
        out.append(ErrorCheck(mode=mode, ok=counts.get(OK, 0), kinds=dict(failures), max_share=max_share))
    return out


def _status_and_kind(name: str) -> tuple[str, str | None]:
    status, _, kind = name.partition("/")
    return status, kind or None


@dataclass(frozen=True)
class GateVerdict:
    """The gate's answer: why it failed, and what it could not judge (--slo-gate on p99s of too
    few requests: analysis.slo), a line each; it passed when both are empty."""

    failed: list[str]
    unjudged: list[str]

    @property
    def state(self) -> str:
        return "failed" if self.failed else "not judged" if self.unjudged else "passed"

    @property
    def code(self) -> int:
        """GATE_FAILED when a check failed, INCOMPLETE when one could not be judged, OK otherwise."""
        return exits.GATE_FAILED if self.failed else exits.INCOMPLETE if self.unjudged else exits.OK


def judge_gate(checks: list[ErrorCheck], slos: list[dict], slo_gate: bool = False) -> GateVerdict:
    """The run's gate: the error checks, and with `slo_gate` every tenant's SLOs (`slos`, as the
    manifest keeps them: failed on a p99 whose interval lies above its target, not judged on one
    whose interval holds it or is open above)."""
    lines = slo_gate_lines(slos) if slo_gate else GateVerdict([], [])
    return GateVerdict([c.reason() for c in checks if not c.passed] + lines.failed, lines.unjudged)


def slo_gate_lines(slos: list[dict], prefix: str = "") -> GateVerdict:
    """--slo-gate on a manifest's `slos`: the tenants that missed, and those too few requests judge."""
    return GateVerdict(
        [f"{prefix}{s['mode']}: {s['tenant']} missed its SLO (--slo-gate)" for s in slos if s["verdict"] == MISSED],
        [f"{prefix}{s['mode']}: {s['tenant']}: {'; '.join(s['unjudged'])}: {SLO_TOO_FEW_RULE}" for s in slos
         if s["verdict"] == UNJUDGED])


@dataclass(frozen=True)
class ProbeVerdict:
    """A capacity probe's answer on one mode's records (measured or predicted), from the run's own
    two checks: every tenant's SLOs (analysis.summary.attainment) and the error gate (`error_checks`)."""

    passed: bool
    judged: bool          # decided on p99s the data bounds (or on errors past the limit)
    binding: list[str]    # what failed: a tenant's missed p99s, or the errors
    error_share: float    # of the requests sent (NaN: none was sent)
    met: int              # requests within every target of their tenant
    requests: int         # every scheduled request of the probe
    fewest: int           # the smallest tenant's requests (0: no tenant has targets)

    def goodput_over_arrivals(self, rate: float) -> float:
        """Requests within every target per second of the probe's arrivals (it offered `rate`)."""
        return rate * self.met / self.requests if self.requests else float("nan")


def probe_verdict(records: pa.Table, mode: str, max_share: float) -> ProbeVerdict:
    """Whether `mode` held at a probe's rate: its records (joined with their tenants' targets,
    analysis.slo.join_targets) pass when every tenant's p99s are within target and its errors
    within `max_share` (--max-errors), judged as `loadtest run` judges a run."""
    # the probe's long summary, as its run folder's summary.parquet holds it (the chunk lists apart)
    summary = SummaryView(long_summary(records.select([c for c in records.column_names if c in PROBE_COLUMNS]), "",
                                       [mode]))
    verdicts = attainment(summary, targets_of(records, [mode]))
    check = error_checks(summary, [mode], max_share)[0]
    errors = check.error_share if check.sent else float("nan")
    over = errors > max_share
    binding = [f"{v.tenant} ({'; '.join(v.missed())})" for v in verdicts if not v.passed]
    if over:
        binding.append(f"errors {errors:.0%} > {max_share:.0%}")
    passed = bool(verdicts) and all(v.passed for v in verdicts) and check.sent > 0 and not over
    return ProbeVerdict(passed, judged(verdicts) or over, binding, errors, sum(v.met for v in verdicts),
                        records.num_rows, min((v.requests for v in verdicts), default=0))


@dataclass(frozen=True)
class CompareGate:
    """The compare gate's answer over every figure: failed (a judged figure regressed), passed
    (figures judged, none regressed) or not judged (no figure had the pairs it needs)."""

    regressed: list[Change]
    judged: int
    figures: int

    @property
    def verdict(self) -> str:
        return "failed" if self.regressed else "passed" if self.judged else "not judged"


def compare_gate(changes: list[Change], max_regression: float) -> CompareGate:
    return CompareGate([c for c in changes if c.verdict(max_regression) == "regressed"],
                       sum(not c.too_few for c in changes), len(changes))


def soak_gate(errors: GateVerdict, findings: list[str]) -> GateVerdict:
    """A soak's gate: the run's error gate, failed too by each finding of its SLO windows and drift
    checks (analysis.soak, a line each)."""
    return GateVerdict([*errors.failed, *findings], errors.unjudged)
