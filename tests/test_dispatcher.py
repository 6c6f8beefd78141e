"""The open-loop dispatcher in-process, on a virtual clock: exact lateness at the in-flight cap, the
deadline, an interruption from a signal, the closed loop, and every row ending as one record."""

from __future__ import annotations

import pytest

from loadtest.replay.dispatcher import UNSENT_BECAUSE, Dispatcher, Schedule
from tests.fake_runtime import FakeLoop, FakePool


class Recorder:
    """What the sender and the unsent callback would write: one entry per row."""

    def __init__(self, loop: FakeLoop) -> None:
        self.loop = loop
        self.sent: dict[str, tuple[float, float]] = {}      # request_id -> (due, sent at)
        self.unsent: dict[str, tuple[float, str]] = {}      # request_id -> (due, why)

    def send(self, index: int, row: dict, due: float) -> None:
        self.sent[row["request_id"]] = (due, self.loop.now())

    def not_sent(self, row: dict, due: float, why: str) -> None:
        self.unsent[row["request_id"]] = (due, why)

    def lateness(self) -> dict[str, float]:
        return {rid: round(sent - due, 9) for rid, (due, sent) in self.sent.items()}


def _rows(offsets: list[float]):
    return iter([(i, {"request_id": f"q{i}", "offset_s": off}) for i, off in enumerate(offsets)])


def _dispatcher(offsets, cap=64, duration=lambda i: 1.0, t0=5.0, **schedule):
    loop = FakeLoop()
    pool = FakePool(loop, cap, duration)
    rec = Recorder(loop)
    d = Dispatcher(_rows(offsets), len(offsets), Schedule(t0=t0, **schedule), loop, pool, rec.send, rec.not_sent)
    return d, loop, pool, rec


def test_each_request_is_sent_at_its_time_and_waits_exactly_at_the_cap():
    d, loop, _pool, rec = _dispatcher([0.0, 0.1, 0.2, 0.3], cap=2, duration=lambda i: 1.0)
    assert d.run() == "completed"
    # two slots: q2 waits for q0 to end (t0 + 1.0), q3 for q1 (t0 + 1.1)
    assert {k: v for k, v in rec.sent.items()} == {"q0": (5.0, 5.0), "q1": (5.1, 5.1), "q2": (5.2, 6.0),
                                                    "q3": (5.3, 6.1)}
    assert rec.lateness() == {"q0": 0.0, "q1": 0.0, "q2": 0.8, "q3": 0.8}
    assert not rec.unsent and (d.sent, d.not_sent) == (4, 0) and loop.now() == pytest.approx(7.1)


def test_a_slow_server_cannot_throttle_the_offered_load():
    offsets = [i * 0.05 for i in range(100)]
    d, _, _, rec = _dispatcher(offsets, cap=1024, duration=lambda i: 30.0)  # every request takes 30 s
    assert d.run() == "completed"
    assert set(rec.lateness().values()) == {0.0}  # open loop: still sent at the schedule


def test_the_deadline_stops_sending_and_records_the_rest_as_not_sent():
    d, _loop, _pool, rec = _dispatcher([0.0, 0.1, 0.2, 0.3, 0.4], deadline_s=0.25, duration=lambda i: 0.01)
    assert d.run() == "deadline"
    assert sorted(rec.sent) == ["q0", "q1", "q2"]
    assert rec.unsent == {"q3": (5.3, UNSENT_BECAUSE["deadline"]), "q4": (5.4, UNSENT_BECAUSE["deadline"])}
    assert d.end_reason == "deadline" and (d.sent, d.not_sent) == (3, 2)


def test_time_left_caps_a_request_by_the_deadline():
    d, loop, _, _ = _dispatcher([0.0], deadline_s=2.0)
    loop.run_until(5.5)
    assert d.time_left() == pytest.approx(1.5)
    assert _dispatcher([0.0])[0].time_left() is None


def test_an_interrupt_gives_in_flight_requests_their_grace_then_stops_them():
    # requests last 10 s; SIGTERM at t0 + 0.25; the grace is 2 s
    d, loop, pool, rec = _dispatcher([0.0, 0.1, 0.2, 0.3, 0.4], duration=lambda i: 10.0, grace_s=2.0)
    loop.at(5.25, lambda: d.stop("interrupted"))
    assert d.run() == "interrupted"
    assert sorted(rec.sent) == ["q0", "q1", "q2"]
    assert pool.killed == [0, 1, 2]  # still in flight after the grace: stopped (each records itself)
    assert loop.now() == pytest.approx(5.3 + 2.0)  # woke for q3 at 5.3, stopped, waited the grace
    assert set(rec.unsent) == {"q3", "q4"} and {why for _, why in rec.unsent.values()} == {
        UNSENT_BECAUSE["interrupted"]}


def test_finish_from_outside_while_the_loop_sleeps_records_every_row_once():
    # what Locust's quitting hook does: finish() from another greenlet while run() waits for a row
    d, loop, _pool, rec = _dispatcher([0.0, 1.0, 2.0, 3.0], duration=lambda i: 0.1)
    loop.at(5.5, lambda: d.finish("interrupted"))
    assert d.run() == "interrupted"
    assert sorted(rec.sent) == ["q0"] and sorted(rec.unsent) == ["q1", "q2", "q3"]
    assert len(rec.sent) + len(rec.unsent) == 4 and not set(rec.sent) & set(rec.unsent)
    d.finish("interrupted")  # idempotent
    assert len(rec.unsent) == 3


def test_closed_loop_sends_as_soon_as_a_slot_frees():
    d, _loop, _, rec = _dispatcher([0.0] * 6, cap=2, duration=lambda i: 1.0, closed=True, t0=1.0)
    assert d.run() == "completed"
    assert [sent for _, sent in rec.sent.values()] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
    assert set(rec.lateness().values()) == {0.0}  # due the moment its slot freed


def test_an_empty_shard_completes_at_once():
    d, loop, _, rec = _dispatcher([])
    assert d.run() == "completed" and not rec.sent and not rec.unsent and loop.now() == 0.0
