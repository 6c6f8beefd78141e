"""The web UI's live comparison: analysis/live.py against numpy on raw rows, and the board that
reads record parts as they reach disk (each once), without a server or a Locust process."""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from analysis.live import WINDOW_S, Totals, good, window_row
from analysis.server import ACCEPTED, DRAFT_TOKENS
from analysis.stats import itl_per_chunk, tokens_per_step
from loadtest.replay import protocol
from loadtest.session.board import Board, BoardServer


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


def test_totals_added_in_pieces_are_numpy_on_all_the_rows():
    t = records(400, 1)
    totals = Totals()
    for piece in (t.slice(0, 150), t.slice(150)):
        totals.add(piece, good(piece))
    row = totals.row(elapsed_s=20.0)
    status = np.array(t["status"].to_pylist())
    assert row["ok"] == (status == "ok").sum() and row["not_sent"] == (status == "not_sent").sum()
    assert row["done"] == (status != "not_sent").sum()
    assert row["errors"] == _failed(t).sum()
    assert row["client"] == (status != "not_sent").sum() - row["ok"] - row["errors"] > 0
    ttft = t["ttft_ms"].to_numpy(zero_copy_only=False)
    expected_good = ((status == "ok") & (ttft <= 60.0)).sum()   # ok and within the 60 ms TTFT target
    assert row["good"] == expected_good and row["goodput"] == pytest.approx(expected_good / 20.0, abs=1e-3)
    assert row["good_share"] == pytest.approx(expected_good / len(status), abs=1e-3)   # of all recorded
    ok = t.filter(pa.array(status == "ok"))   # as the report: latencies and tokens of the successes only
    assert row["output_tok_s"] == pytest.approx(ok["completion_tokens"].to_numpy().sum() / 20.0, abs=1e-3)
    assert row["tokens_per_step"] == pytest.approx(tokens_per_step(ok["chunk_tokens"]), abs=1e-3)
    ok_ttft = ok["ttft_ms"].to_numpy(zero_copy_only=False)
    for metric, values in [("ttft", ok_ttft), ("itl", itl_per_chunk(ok["itl_ms"]))]:
        for q in (50, 90, 99):   # the 1% histogram
            assert row[f"{metric}_p{q}"] == pytest.approx(np.quantile(values, q / 100), rel=0.02)


def test_a_window_is_numpy_on_its_rows_per_second():
    t = records(200, 2)
    row = window_row(t, good(t), window_s=WINDOW_S)
    status = np.array(t["status"].to_pylist())
    assert row["req_s"] == pytest.approx((status != "not_sent").sum() / WINDOW_S, abs=1e-3)
    assert row["errors_s"] == pytest.approx(_failed(t).sum() / WINDOW_S, abs=1e-3)
    ok = t.filter(pa.array(status == "ok"))
    assert row["e2e_p99"] == pytest.approx(np.quantile(ok["e2e_ms"].to_numpy(), 0.99), abs=1e-3)
    assert row["itl_p50"] == pytest.approx(np.quantile(itl_per_chunk(ok["itl_ms"]), 0.5), abs=1e-3)
    empty = window_row(t.slice(0, 0), np.zeros(0, bool))
    assert empty["ttft_p99"] is None and empty["req_s"] == 0 and empty["tokens_per_step"] is None


def _part(run_dir, mode: str, n: int, table: pa.Table) -> None:
    folder = run_dir / "requests" / f"mode={mode}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.drop_columns(["mode", *[c for c in table.column_names if c.startswith("slo_")]]),
                   folder / f"part-w0-{n:05d}.parquet")


def test_the_board_reads_each_part_once_and_the_server_counters_as_deltas(tmp_path):
    counters = {"ngram": {"r0": {ACCEPTED: 100.0, DRAFT_TOKENS: 1000.0}}}
    trace = records(300, 3).select(["request_id", "slo_ttft_p99_ms", "slo_tpot_p99_ms", "slo_e2e_p99_ms"])
    board = Board(["baseline", "ngram"])
    board.starting("building")
    board.begin("run1", tmp_path, ["ngram"], trace, lambda: counters)
    board.on_line("ngram", protocol.Progress(total=300, sent=90, done=80))
    first = records(100, 4)
    _part(tmp_path, "ngram", 0, first)
    board.tick()
    counters["ngram"]["r0"] = {ACCEPTED: 400.0, DRAFT_TOKENS: 2000.0}
    _part(tmp_path, "ngram", 1, records(50, 5, start=100))
    board.tick()
    counters["ngram"]["r0"] = {ACCEPTED: 30.0, DRAFT_TOKENS: 100.0}   # the replica restarted: its counters reset
    board.tick()   # and no new part: nothing counted twice
    view = board.view()
    row = view["table"]["ngram"]["all"]
    assert row["ok"] + row["errors"] + row["client"] + row["not_sent"] == 150
    assert row["total"] == 300 and row["sent"] == 90
    assert row["acceptance"] == pytest.approx((300 + 30) / (1000 + 100))   # increases, the reset's included
    assert view["tenants"] == ["chat", "code"] and set(view["table"]["ngram"]) == {"all", "chat", "code"}
    assert [p["seq"] for p in view["points"]] == [1, 2, 3] and [p["seq"] for p in board.view(2)["points"]] == [3]
    feed = board.take_feed()
    assert len(feed) == 150 and board.take_feed() == []
    assert feed[0][0] == "ngram" and feed[0][1] == first["status"][0].as_py()
    board.end("finished", "completed", tmp_path / "report.html")
    assert board.view()["state"] == "finished" and board.view()["report"].endswith("report.html")


def test_the_board_answers_only_with_its_token():
    with BoardServer(Board(["baseline"])) as server:
        assert requests.get(f"{server.url}/board", timeout=5).status_code == 403
        bad = requests.get(f"{server.url}/board", headers={"X-Loadtest-Token": "nope"}, timeout=5)
        assert bad.status_code == 403
        ok = requests.get(f"{server.url}/board", headers={"X-Loadtest-Token": server.token}, timeout=5)
        assert ok.status_code == 200 and ok.json()["state"] == "waiting" and ok.json()["available"] == ["baseline"]
        assert server.url.startswith("http://127.0.0.1:")
