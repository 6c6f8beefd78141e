"""The one live statistic (loadtest.request.tally) as the web UI's comparison shows it, against
numpy on raw rows, and the board, the progress bars and /metrics reading the same tally, without
a server or a Locust process."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pytest
import requests

from analysis.server import ACCEPTED, DRAFT_TOKENS
from analysis.slo import request_meets
from analysis.stats import itl_per_chunk, tokens_per_step
from loadtest.engine.events import Began
from loadtest.live.board import WINDOW_S, Board, BoardServer, table_row, window_row
from loadtest.live.progress import live_text
from loadtest.replay import protocol
from loadtest.request.exporter import ClientMetrics, key_of
from loadtest.request.tally import LiveTallies, Tally, TenantTally, added_up


def records(n: int, seed: int, mode: str = "ngram", start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    status = rng.choice(["ok", "ok", "ok", "error", "timeout", "not_sent"], n)
    sent = np.where(status == "not_sent", None, time.time_ns() - rng.integers(0, 5_000_000_000, n))
    chunks = [rng.integers(1, 5, rng.integers(1, 8)).tolist() for _ in range(n)]
    ok = status == "ok"
    # real errors and timeouts, and the ends the client caused (interrupted, cut by --deadline)
    kind = np.where(status == "error", rng.choice(["http", "interrupted"], n),
                    np.where(status == "timeout", rng.choice(["stream", "deadline"], n), None))
    return pa.table({
        "mode": [mode] * n, "tenant": rng.choice(["chat", "code"], n).tolist(),
        "request_id": [f"r{start + i}" for i in range(n)], "status": status.tolist(),
        "error_kind": pa.array(kind.tolist(), pa.string()), "sent_ns": pa.array(sent.tolist(), pa.int64()),
        "e2e_ms": pa.array(np.where(ok, rng.uniform(100, 900, n), np.nan)),
        # an error may carry a TTFT (it failed after its first token): not counted in the latencies
        "ttft_ms": pa.array(np.where(status != "not_sent", rng.uniform(10, 90, n), np.nan)),
        "tpot_ms": pa.array(np.where(ok, rng.uniform(5, 30, n), np.nan)),
        "itl_ms": pa.array([rng.uniform(1, 50, len(c)).tolist() for c in chunks], pa.list_(pa.float32())),
        "chunk_tokens": pa.array(chunks, pa.list_(pa.int32())),
        "completion_tokens": pa.array([sum(c) for c in chunks], pa.int32()),
        "slo_ttft_p99_ms": pa.array(np.full(n, 60.0)), "slo_tpot_p99_ms": pa.array(np.full(n, np.nan)),
        "slo_e2e_p99_ms": pa.array(np.full(n, np.nan))})


def _failed(t: pa.Table) -> np.ndarray:
    """The server's errors and timeouts, as the gate counts them (the client's own ends apart)."""
    status, kind = np.array(t["status"].to_pylist()), np.array(t["error_kind"].to_pylist(), dtype=object)
    return np.isin(status, ["error", "timeout"]) & ~np.isin(kind, ["interrupted", "deadline"])


TARGETS = {"chat": (60.0, np.nan, np.nan), "code": (60.0, np.nan, np.nan)}   # as records() sets them


def _tally(t: pa.Table, pieces: int = 1) -> Tally:
    """`t`'s rows through a Locust process's tally, shipped in `pieces` reports and added up."""
    process, command = Tally(TARGETS), Tally()
    rows = t.to_pylist()
    for k in range(pieces):
        process.observe_many(rows[k * len(rows) // pieces:(k + 1) * len(rows) // pieces])
        command.merge(process.take())
    return command


def test_the_table_is_the_tally_added_in_pieces_and_numpy_on_all_the_rows():
    t = records(400, 1)
    row = table_row(added_up(_tally(t, pieces=3).tenants), elapsed_s=20.0)
    status = np.array(t["status"].to_pylist())
    assert row["ok"] == (status == "ok").sum() and row["not_sent"] == (status == "not_sent").sum()
    assert row["done"] == (status != "not_sent").sum()
    assert row["errors"] == _failed(t).sum()
    assert row["client"] == (status != "not_sent").sum() - row["ok"] - row["errors"] > 0
    ttft = t["ttft_ms"].to_numpy(zero_copy_only=False)
    expected_good = ((status == "ok") & (ttft <= 60.0)).sum()   # ok and within the 60 ms TTFT target
    assert expected_good == request_meets(t).sum()               # the report's own count
    assert row["good"] == expected_good and row["goodput"] == pytest.approx(expected_good / 20.0, abs=1e-3)
    assert row["good_share"] == pytest.approx(expected_good / len(status), abs=1e-3)   # of all recorded
    ok = t.filter(pa.array(status == "ok"))   # as the report: latencies and tokens of the successes only
    assert row["output_tok_s"] == pytest.approx(ok["completion_tokens"].to_numpy().sum() / 20.0, abs=1e-3)
    assert row["tokens_per_step"] == pytest.approx(tokens_per_step(ok["chunk_tokens"]), abs=1e-3)
    ok_ttft = ok["ttft_ms"].to_numpy(zero_copy_only=False)
    for metric, values in [("ttft", ok_ttft), ("itl", itl_per_chunk(ok["itl_ms"])),
                           ("e2e", ok["e2e_ms"].to_numpy(zero_copy_only=False))]:
        for q in (50, 90, 99):   # the 1% histogram
            assert row[f"{metric}_p{q}"] == pytest.approx(np.quantile(values, q / 100), rel=0.02)


def test_a_window_is_numpy_on_its_rows_per_second():
    t = records(200, 2)
    row = window_row(added_up(_tally(t).tenants), window_s=WINDOW_S)
    status = np.array(t["status"].to_pylist())
    assert row["req_s"] == pytest.approx((status != "not_sent").sum() / WINDOW_S, abs=1e-3)
    assert row["errors_s"] == pytest.approx(_failed(t).sum() / WINDOW_S, abs=1e-3)
    ok = t.filter(pa.array(status == "ok"))
    assert row["e2e_p99"] == pytest.approx(np.quantile(ok["e2e_ms"].to_numpy(), 0.99), rel=0.02)
    assert row["itl_p50"] == pytest.approx(np.quantile(itl_per_chunk(ok["itl_ms"]), 0.5), rel=0.02)
    empty = window_row(TenantTally(), WINDOW_S)
    assert empty["ttft_p99"] is None and empty["req_s"] == 0 and empty["tokens_per_step"] is None


def _report(live: LiveTallies, board: Board, t: pa.Table) -> None:
    """A Locust process's Observed, as the command's reader passes it on: into the tally, then the board."""
    process = Tally(TARGETS)
    process.observe_many(t.to_pylist())
    msg = protocol.Observed(process.take())
    live.add(key_of("run1", "ngram"), msg.tally)
    board.line("ngram", "run1", msg)


def test_the_board_the_bars_and_metrics_read_one_tally_and_the_server_counters_as_deltas():
    counters = {"ngram": {"r0": {ACCEPTED: 100.0, DRAFT_TOKENS: 1000.0}}}
    live = LiveTallies()
    live.expect(key_of("run1", "ngram"), ["chat", "code"], TARGETS)
    board = Board(["baseline", "ngram"])
    board.starting("building")
    board.begin(Began("run1", ["ngram"], 300, live, lambda: counters))
    board.line("ngram", "run1", protocol.Progress(total=300, sent=90, done=80))
    first, second = records(100, 4), records(50, 5, start=100)
    _report(live, board, first)
    board.tick()
    counters["ngram"]["r0"] = {ACCEPTED: 400.0, DRAFT_TOKENS: 2000.0}
    _report(live, board, second)
    board.tick()
    counters["ngram"]["r0"] = {ACCEPTED: 30.0, DRAFT_TOKENS: 100.0}   # the replica restarted: its counters reset
    board.tick()   # and no new report: nothing counted twice
    view = board.view()
    row = view["table"]["ngram"]["all"]
    both = pa.concat_tables([first, second])
    assert row["ok"] + row["errors"] + row["client"] + row["not_sent"] == 150
    assert row["errors"] == _failed(both).sum()
    assert row["total"] == 300 and row["sent"] == 90
    assert row["acceptance"] == pytest.approx((300 + 30) / (1000 + 100))   # increases, the reset's included
    assert view["tenants"] == ["chat", "code"] and set(view["table"]["ngram"]) == {"all", "chat", "code"}
    assert [p["seq"] for p in view["points"]] == [1, 2, 3] and [p["seq"] for p in board.view(2)["points"]] == [3]
    assert view["points"][-1]["modes"]["ngram"]["all"]["req_s"] > 0   # both reports are in the last window
    # the progress bar and /metrics read the same tally: the same TTFT p50, the same ok count
    assert f"TTFT p50 {row['ttft_p50']:.1f}" in live_text(live.of(key_of("run1", "ngram")))
    scraped = [s for family in ClientMetrics(live).collect() if family.name == "loadtest_requests"
               for s in family.samples]
    assert sum(s.value for s in scraped if s.labels["status"] == "ok") == row["ok"]
    feed = board.take_feed()   # Locust's statistics: one request per record that was sent
    assert len(feed) == 2 and board.take_feed() == []
    assert feed[0][0] == "ngram"
    sent = sum(sum(times.values()) + sum(failed.values()) for _, times, failed in feed)
    assert sent == row["done"]
    board.end("finished", "completed", tmp_report := "run/report.html")
    assert board.view()["state"] == "finished" and board.view()["report"] == tmp_report


def test_the_board_answers_only_with_its_token():
    with BoardServer(Board(["baseline"])) as server:
        assert requests.get(f"{server.url}/board", timeout=5).status_code == 403
        bad = requests.get(f"{server.url}/board", headers={"X-Loadtest-Token": "nope"}, timeout=5)
        assert bad.status_code == 403
        ok = requests.get(f"{server.url}/board", headers={"X-Loadtest-Token": server.token}, timeout=5)
        assert ok.status_code == 200 and ok.json()["state"] == "waiting" and ok.json()["available"] == ["baseline"]
        assert server.url.startswith("http://127.0.0.1:")


def test_every_view_hears_every_event_of_the_engine():
    """Each live view answers each of the engine's events as a method: an attribute of the same
    name (the board's `state` once hid the event `state`) would fail the run it watches."""
    import inspect

    from rich.console import Console

    from loadtest.engine.events import Observer
    from loadtest.live.metrics_server import MetricsServer
    from loadtest.live.progress import ProgressView

    events = [n for n, f in inspect.getmembers(Observer, inspect.isfunction) if not n.startswith("_")]
    assert {"begin", "line", "mode_state", "mode_started", "mode_ended", "say"} <= set(events)
    for view in (Board(["baseline"]), ProgressView(Console(), 1.0), MetricsServer("127.0.0.1", 0, None)):
        shadowed = [n for n in events if not callable(getattr(view, n))]
        assert not shadowed, f"{type(view).__name__}: {shadowed}"
