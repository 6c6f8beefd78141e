"""Which requests two runs share, the rule `loadtest compare` pairs them by: the same request (id,
tenant, body) sent at the same offset, never ids alone (every trace numbers from r000000)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from analysis.compare import CompareError, common_requests
from scenarios.spec import load_scenario
from scenarios.trace import build_trace


def _trace(name: str, requests: int = 200, seed: int = 1, rate_scale: float | None = None) -> pa.Table:
    return build_trace(load_scenario(name)[0], requests=requests, seed=seed, rate_scale=rate_scale)


def test_a_trace_is_comparable_with_itself_and_its_own_first_requests():
    whole = _trace("saas-mix")
    same = common_requests(whole, _trace("saas-mix"))
    assert len(same.ids) == 200 and same.text() == "paired by request: the same 200 requests in both"
    first = common_requests(whole, whole.slice(0, 120))   # a shorter run of the same trace
    assert first.ids.to_pylist() == whole["request_id"].to_pylist()[:120]
    assert "the 120 requests both traces hold (BASE has 200, NEW 120)" in first.text()


def test_two_scenarios_share_ids_but_no_request():
    saas, chat = _trace("saas-mix"), _trace("chat")
    assert set(saas["request_id"].to_pylist()) & set(chat["request_id"].to_pylist())   # ids alone would pair
    with pytest.raises(CompareError, match=r"^a and b replayed different traces: no request is the same in both"):
        common_requests(saas, chat, "a", "b")
    with pytest.raises(CompareError, match="replayed different traces"):
        common_requests(saas, _trace("saas-mix", seed=2))   # another seed: other prompts


def test_the_same_requests_on_another_schedule_are_not_compared():
    with pytest.raises(CompareError, match="sent the same requests on different schedules"):
        common_requests(_trace("saas-mix"), _trace("saas-mix", rate_scale=2.0))
