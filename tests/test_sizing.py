"""`--workers auto`: the trace's busiest window of requests and streamed events, at the client's
measured per-core cost, in workers of half a core; within the room there is, and said."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from loadtest.replay.sizing import (
    EVENT_CORE_S,
    PEAK_WINDOW_S,
    REQUEST_CORE_S,
    WORKER_SHARE,
    choose_workers,
    size_load,
)


@given(st.lists(st.tuples(st.floats(0, 100), st.integers(1, 4096)), min_size=1, max_size=60))
def test_the_peak_is_the_busiest_window_of_arrivals_counted_by_hand(rows):
    offsets = np.array([r[0] for r in rows])
    events = np.array([r[1] for r in rows])
    sizing = size_load(offsets, events)
    # every window that starts at an arrival, counted directly
    counts = [((offsets >= t) & (offsets < t + PEAK_WINDOW_S)).sum() for t in offsets]
    tokens = [events[(offsets >= t) & (offsets < t + PEAK_WINDOW_S)].sum() for t in offsets]
    assert sizing.peak_requests_per_s == max(counts) / PEAK_WINDOW_S
    assert sizing.peak_events_per_s == max(tokens) / PEAK_WINDOW_S
    cores = sizing.peak_requests_per_s * REQUEST_CORE_S + sizing.peak_events_per_s * EVENT_CORE_S
    assert math.isclose(sizing.cores, cores)
    assert sizing.workers == max(1, math.ceil(cores / WORKER_SHARE - 1e-9))


def test_a_heavy_trace_takes_several_workers_and_a_light_one_one():
    # 2,048 req/s (binary fractions of a second: exact windows) of 256-token streams for a minute:
    # 524,288 events/s, 13.8 cores at the measured costs
    heavy = size_load(np.arange(122_880) / 2_048, np.full(122_880, 256))
    assert heavy.peak_requests_per_s == 2_048 and heavy.peak_events_per_s == 524_288
    assert heavy.workers == math.ceil((2_048 * REQUEST_CORE_S + 524_288 * EVENT_CORE_S) / WORKER_SHARE) == 28
    assert size_load(np.arange(400) / 8, np.full(400, 256)).workers == 1   # chat: 8 req/s


def test_the_choice_is_the_flag_or_the_need_within_the_room_and_says_which():
    need = size_load(np.arange(122_880) / 2_048, np.full(122_880, 256))
    assert choose_workers(3, need, 8, "here").text() == "client: 3 Locust worker(s) per mode (--workers)"
    auto = choose_workers(None, need, 64, "the 1 Ray node(s) without GPUs, of 3")
    assert auto.workers == 28 and auto.text() == (
        "client: 28 Locust worker(s) per mode (auto: the trace peaks at 2,048.0 req/s and 524,288 events/s "
        "(busiest 10 s), 13.77 core(s) of client work: 28 worker(s) at most 50% of a core each)")
    short = choose_workers(None, need, 6, "this machine's free cores")
    assert short.workers == 6 and short.why.endswith(
        "; this machine's free cores has room for 6: the replay may be client-limited (its verdict will say)")
    closed = choose_workers(None, None, 6, "this machine's free cores", closed=4, unsized="a closed loop's rate is "
                            "the server's")
    assert closed.why == ("auto: a closed loop's rate is the server's, so one per free CPU on this machine's free "
                          "cores; at most 4, one per request the closed loop keeps in flight") and closed.workers == 4
    assert choose_workers(None, need, 0, "nowhere").workers == 1   # never none
    assert auto.as_dict()["sizing"]["workers"] == 28
