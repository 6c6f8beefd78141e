"""The Locust master's coordinator in-process, on a virtual clock: the shard map, progress added up
from reports, a lost worker's rows recorded as error/worker_lost (due before it was lost) or
not_sent (after), a worker that only missed heartbeats left alone, and the end of the replay."""

from __future__ import annotations

from loadtest.replay import protocol
from loadtest.replay.coordinator import LOST_GRACE_S, T0_MARGIN_S, Coordinator, CoordinatorOptions
from loadtest.request.client_stats import ClientStats
from scenarios.trace import trace_table, write_trace
from tests.fake_runtime import FakeLoop

N = 10  # rows, one every second: offsets 0..9


class FakeMaster:
    def __init__(self, clients: list[str]) -> None:
        self.connected = list(clients)
        self.gone: set[str] = set()
        self.sent: list[tuple[str, protocol.Wire]] = []
        self.quit_called = False

    def clients(self) -> list[str]:
        return self.connected

    def missing(self, client_id: str) -> bool:
        return client_id in self.gone

    def send(self, msg: protocol.Wire, client_id: str) -> None:
        self.sent.append((client_id, msg))

    def quit(self) -> None:
        self.quit_called = True


class ListSink:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self.closed = False

    def add(self, row: dict) -> None:
        self.rows.append(row)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def _trace(path) -> str:
    t = trace_table({
        "request_id": [f"q{i}" for i in range(N)], "tenant": ["t"] * N, "domain": ["chat"] * N,
        "language": [None] * N, "offset_s": [float(i) for i in range(N)], "api": ["completions"] * N,
        "prompt": ["hi"] * N, "messages": [None] * N, "max_tokens": [4] * N, "temperature": [0.0] * N,
        "ignore_eos": [True] * N, "prompt_tokens_est": [1] * N, "slo_ttft_p99_ms": [None] * N,
        "slo_tpot_p99_ms": [None] * N, "slo_e2e_p99_ms": [None] * N, "prompt_source": [None] * N,
        "category": [None] * N})
    write_trace(t, path, "t", "0" * 64)
    return str(path)


def _coordinator(tmp_path, clients=("a", "b"), recorded=None):
    loop, master, sink, said = FakeLoop(100.0), FakeMaster(list(clients)), ListSink(), []
    c = Coordinator(master, CoordinatorOptions(_trace(tmp_path / "trace.parquet"), N, "r", "m", start_delay_s=0.5),
                    loop, lambda: 1_000.0 + loop.now(), said.append, lambda: sink,
                    lambda worker: (recorded or {}).get(worker, set()))
    return c, loop, master, sink, said


def test_no_shard_goes_to_a_worker_before_it_says_it_is_ready(tmp_path):
    """A Locust worker takes messages while it connects, before its handlers are in: a shard sent
    then would be dropped (a clean-clone CI run lost a worker so). The shards wait for every
    connected worker's WorkerReady, the test's start or a tick sending them once all have said it."""
    c, _loop, master, _, _ = _coordinator(tmp_path)
    c.ready = set()
    c.on_message("a", protocol.WorkerReady())
    c.start()
    assert master.sent == [] and c.t0 is None      # b is still setting up
    c.tick()
    assert master.sent == []
    c.on_message("b", protocol.WorkerReady())
    assert sorted(client for client, _ in master.sent) == ["a", "b"] and c.t0 is not None
    c.on_message("b", protocol.WorkerReady())       # said twice: still one shard each
    assert len(master.sent) == 2


def _report(sent: int, recorded: int, not_sent: int = 0) -> protocol.WorkerReport:
    return protocol.WorkerReport(protocol.Counts(recorded, sent, not_sent), ClientStats().take(0.1))


def test_the_shard_map_is_explicit_and_shares_one_offset_zero(tmp_path):
    c, _loop, master, _, _ = _coordinator(tmp_path, clients=("zz", "aa", "mm"))
    c.start()
    shards = {client: msg for client, msg in master.sent}
    by_index = sorted(shards.items(), key=lambda x: x[1].index)
    assert [(client, m.index, m.count, m.worker_id) for client, m in by_index] == [
        ("aa", 0, 3, "w0"), ("mm", 1, 3, "w1"), ("zz", 2, 3, "w2")]
    assert {m.t0_epoch for m in shards.values()} == {1_100.0 + 0.5 + T0_MARGIN_S}
    assert c.t0 == 100.0 + 0.5 + T0_MARGIN_S  # the same instant on the master's monotonic clock


def test_progress_adds_up_the_workers_reports(tmp_path):
    c, _loop, _master, _, said = _coordinator(tmp_path)
    c.start()
    c.on_message("a", _report(sent=3, recorded=2))
    c.on_message("b", _report(sent=4, recorded=4, not_sent=1))
    c.tick()
    assert said[-1] == protocol.Progress(total=N, sent=7, done=5, not_sent=1)
    c.on_message("stranger", _report(sent=99, recorded=99))  # not in the shard map: ignored
    assert c.progress().sent == 7


def test_a_lost_workers_rows_are_recorded_by_when_they_were_due(tmp_path):
    # worker "b" (shard 1: q1, q3, q5, q7, q9) recorded q1 and q3, then vanished at t0 + 4.2
    c, loop, master, sink, said = _coordinator(tmp_path, recorded={"w1": {"q1", "q3"}})
    c.start()
    t0 = c.t0
    loop.run_until(t0 + 4.2)
    master.gone.add("b")
    c.tick()                                     # missing: noticed, not yet lost
    assert not any(isinstance(m, protocol.Abandon) for _, m in master.sent)
    loop.run_until(t0 + 4.2 + LOST_GRACE_S)
    c.tick()                                     # still missing after the grace: lost, told to stop
    assert ("b", protocol.Abandon()) in master.sent and not sink.rows
    loop.run_until(t0 + 4.2 + 2 * LOST_GRACE_S)
    c.tick()                                     # its last part file has landed: its rows are written
    rows = {r["request_id"]: r for r in sink.rows}
    assert set(rows) == {"q5", "q7", "q9"}      # q1, q3 it recorded itself
    assert rows["q5"]["status"] == "not_sent" and rows["q5"]["worker"] == "w1"   # due at t0 + 5, after the loss
    assert {r["status"] for r in rows.values()} == {"not_sent"}
    c.on_message("b", _report(sent=9, recorded=9))  # a declared-lost worker is not heard any more
    c.on_message("a", protocol.WorkerDone("completed", protocol.Counts(5, 5, 0), ClientStats().take(0.0)))
    c.tick()
    assert said[-1] == protocol.Finished("worker_lost", 5 + 5) and master.quit_called and sink.closed


def test_rows_due_before_the_loss_are_errors_of_unknown_outcome(tmp_path):
    c, loop, master, sink, _ = _coordinator(tmp_path, recorded={"w0": {"q0"}})
    c.start()
    loop.run_until(c.t0 + 6.5)
    master.gone.add("a")
    for _ in range(3):
        c.tick()
        loop.sleep(LOST_GRACE_S)
    rows = {r["request_id"]: r for r in sink.rows}
    assert {k: (r["status"], r["error_kind"]) for k, r in rows.items()} == {
        "q2": ("error", "worker_lost"), "q4": ("error", "worker_lost"), "q6": ("error", "worker_lost"),
        "q8": ("not_sent", None)}


def test_a_worker_that_only_missed_heartbeats_is_left_alone(tmp_path):
    c, loop, master, sink, _ = _coordinator(tmp_path)
    c.start()
    master.gone.add("a")
    c.tick()
    loop.sleep(LOST_GRACE_S / 2)
    master.gone.discard("a")                     # back before the grace ran out
    c.tick()
    loop.sleep(LOST_GRACE_S * 2)
    c.tick()
    assert not sink.rows and not any(isinstance(m, protocol.Abandon) for _, m in master.sent)


def test_a_worker_that_failed_has_its_rows_filled_in(tmp_path):
    c, loop, master, sink, said = _coordinator(tmp_path, recorded={"w0": set()})
    c.start()
    c.on_message("a", protocol.WorkerDone("failed", protocol.Counts(), ClientStats().take(0.0)))
    assert ("a", protocol.Abandon()) in master.sent
    loop.sleep(LOST_GRACE_S)
    c.tick()
    assert sorted(r["request_id"] for r in sink.rows) == ["q0", "q2", "q4", "q6", "q8"]
    c.on_message("b", protocol.WorkerDone("completed", protocol.Counts(5, 5, 0), ClientStats().take(0.0)))
    c.tick()
    assert said[-1] == protocol.Finished("failed", 10)


def test_every_row_is_not_sent_when_no_worker_ever_connected(tmp_path):
    c, _loop, _master, sink, said = _coordinator(tmp_path, clients=())
    assert c.record_unstarted("never started") == N
    assert len(sink.rows) == N and {r["status"] for r in sink.rows} == {"not_sent"} and sink.closed
    assert said[-1] == protocol.Finished("failed", N)
    assert c.record_unstarted("again") == 0  # once


def test_a_worker_that_connects_after_the_rows_were_recorded_unstarted_gets_no_shard(tmp_path):
    """Locust may still fire test_start once the last worker connects while the master writes
    every row as not_sent: no shard goes out, or the worker would record its rows a second time."""
    c, _loop, master, sink, _said = _coordinator(tmp_path)
    assert c.record_unstarted("stopped before the workers connected") == N
    c.start()
    assert not any(isinstance(m, protocol.ShardAssignment) for _, m in master.sent) and len(sink.rows) == N


def test_shards_go_out_once(tmp_path):
    c, _loop, master, _sink, _said = _coordinator(tmp_path)
    c.start()
    c.start()
    assert sum(isinstance(m, protocol.ShardAssignment) for _, m in master.sent) == 2   # two workers, once each


def test_a_master_that_quits_early_says_how_far_it_got(tmp_path):
    c, _loop, _master, _sink, said = _coordinator(tmp_path)
    c.start()
    c.on_message("a", _report(sent=2, recorded=2))
    c.interrupted()
    assert said[-2:] == [protocol.Progress(N, 2, 2, 0), protocol.Finished("interrupted", 2)]


def test_stop_now_is_passed_on_to_the_workers_still_replaying(tmp_path):
    # workers on Ray nodes get no signal from the command: the master tells them
    c, _loop, master, _, _ = _coordinator(tmp_path, clients=("a", "b"))
    c.start()
    c.on_message("a", protocol.WorkerDone("completed", protocol.Counts(5, 5, 0), ClientStats().take(0.1)))
    master.sent.clear()
    c.stop_now()
    assert master.sent == [("b", protocol.StopNow())]
