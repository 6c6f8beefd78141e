"""One run whose records hold a bit of everything (server errors, ends the client caused, requests
never sent, percentiles of too few requests, a tenant that missed its SLO) and every place that
shows a figure or a verdict of it: the console, report.md, report.html, summary.parquet, the
manifest's error gate and SLO gate, a capacity probe judged over the same records, and the live
board's table. Each must give the same count and the same verdict (the board's percentiles are
its histograms', within 1%)."""

from __future__ import annotations

import html
import json
import math
import re

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.gate import probe_verdict
from analysis.reader import read_requests
from analysis.slo import join_targets
from loadtest.live.board import table_row
from loadtest.request.tally import Tally, added_up, tenant_targets
from tests.conftest import DATA, cli, sim_server

pytestmark = pytest.mark.e2e
TP4 = ("--tensor-parallel-size", "4", "--served-model-name", "m")
MAX_ERRORS = 0.5


def _long(run_dir) -> dict[tuple[str, str, str], float]:
    return {(r["tenant"], r["metric"], r["statistic"]): r["value"]
            for r in pq.read_table(run_dir / "summary.parquet").to_pylist() if r["mode"] == "baseline"}


def test_every_view_of_a_mixed_run_gives_the_same_figures_and_verdicts(tmp_path):
    # rust's E2E target (1 ms) no request meets: missed on any count; chat's TTFT target is met by
    # every request but by too few of them to bound a p99 (not judged)
    mixed = tmp_path / "mixed.toml"
    mixed.write_text((DATA / "tiny-mix.toml").read_text().replace("ttft_p99_ms = 1000", "ttft_p99_ms = 60000")
                     + "slo = { e2e_p99_ms = 1 }\n")
    with sim_server(*TP4, "--fault", "http-error=0.15:500", "--seed", "5") as url:
        # 60 requests at 12/s are 5 s of arrivals: --deadline 3 cuts those in flight at 3 s (the
        # client's ends) and never sends the rest
        out = cli("run", "--endpoints", f"baseline={url}", "--scenario", str(mixed), "--requests", "60",
                  "--deadline", "3", "--max-errors", f"{MAX_ERRORS:.0%}", "--slo-gate", "--out", str(tmp_path),
                  "--run-id", "mixed")
    run_dir = tmp_path / "mixed"
    assert out.returncode == 1, out.stdout + out.stderr     # rust missed its SLO: the gate failed
    records = read_requests(run_dir)
    status = records["status"].to_pylist()
    kinds = records["error_kind"].to_pylist()
    truth = {"ok": status.count("ok"), "not_sent": status.count("not_sent"),
             "failed": sum(s in ("error", "timeout") and k != "deadline" for s, k in zip(status, kinds, strict=True)),
             "client": sum(k == "deadline" for k in kinds)}
    assert records.num_rows == 60 and all(truth.values()), truth   # every kind of end is there
    long = _long(run_dir)

    # summary.parquet: the counts of the records
    for name, n in truth.items():
        assert long["all", "requests", name] == n, name
    # the error gate in the manifest counts what the summary counts
    manifest = json.loads((run_dir / "manifest.json").read_text())
    check = manifest["checks"][0]
    sent = truth["ok"] + truth["failed"]
    assert (check["ok"], check["failed"], check["sent"]) == (truth["ok"], truth["failed"], sent)
    assert check["passed"] and check["error_share"] == pytest.approx(truth["failed"] / check["sent"], abs=1e-4)
    # the console's modes table: errors (+ the client's ends) and never sent, as the summary has them
    row = next(line for line in out.stdout.splitlines() if line.startswith("│ baseline"))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells[-2:] == [f"{truth['failed']} +{truth['client']} client", str(truth["not_sent"])], row
    # report.md's modes table, and report.html's
    report = (run_dir / "report.md").read_text()
    md = next([c.strip() for c in line.strip("|").split("|")] for line in report.splitlines()
              if line.startswith("| baseline |"))
    assert md[-3:] == [str(truth["ok"]), f"{truth['failed']} (+{truth['client']} client)", str(truth["not_sent"])]
    page = html.unescape(re.sub(r"<[^>]+>", "", (run_dir / "report.html").read_text()))   # its text

    # the SLO verdicts: the manifest's SLO gate, the console, report.md and report.html
    slos = {s["tenant"]: s for s in manifest["slos"]}
    assert (slos["rust"]["verdict"], slos["chat"]["verdict"]) == ("missed", "too few to judge")
    assert manifest["gate"] == "failed" and "gate failed: baseline: rust missed its SLO (--slo-gate)" in out.stdout
    within = f"not judged† ({long['chat', 'goodput_share', 'share']:.0%} within)"   # errors and unsent count
    assert 0 < long["chat", "goodput_share", "share"] < 1 and long["rust", "goodput_share", "share"] == 0
    console = " ".join(out.stdout.split())
    assert within in console and "│ rust   │ missed 0%: e2e " in out.stdout, out.stdout
    assert f"| chat | {within} |" in report and "| rust | **missed** (0%): e2e p99" in report
    assert within in page and "missed (0%): e2e p99" in page
    for tenant in ("chat", "rust"):   # the share within target: the summary's, the manifest's
        assert slos[tenant]["met_share"] == pytest.approx(long[tenant, "goodput_share", "share"])

    # a capacity probe over the same records: the same two checks, the same answer
    trace = pq.read_table(run_dir / "trace.parquet")
    verdict = probe_verdict(join_targets(records, trace), "baseline", MAX_ERRORS)
    assert not verdict.passed and verdict.judged           # rust missed: judged on any count
    assert [b.split(" (")[0] for b in verdict.binding] == ["rust"]
    assert verdict.error_share == pytest.approx(truth["failed"] / check["sent"])
    met = sum(long[t, "goodput_share", "share"] * sum(long[t, "requests", s] for s in ("ok", "error", "timeout",
                                                                                        "not_sent"))
              for t in ("chat", "rust"))
    assert verdict.met == pytest.approx(met)

    # the live board's table, from the same records as the replay tallies them
    tally = Tally(tenant_targets(run_dir / "trace.parquet"))
    tally.observe_many(records.to_pylist())
    board = table_row(added_up(tally.tenants), elapsed_s=1.0)
    assert (board["ok"], board["errors"], board["client"], board["not_sent"]) == (
        truth["ok"], truth["failed"], truth["client"], truth["not_sent"])
    assert board["good"] == verdict.met
    assert board["good_share"] == pytest.approx(long["all", "goodput_share", "share"], abs=1e-3)
    for metric in ("ttft", "e2e"):
        exact = long["all", f"{metric}_ms", "p99"]
        assert math.isclose(board[f"{metric}_p99"], exact, rel_tol=0.01), (metric, board[f"{metric}_p99"], exact)
    # and nothing the records do not hold: every row's status is one of the four ends
    assert set(pc.unique(records["status"]).to_pylist()) <= {"ok", "error", "timeout", "not_sent"}
