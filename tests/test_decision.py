"""The decision a run ends with, from runs built to be so: a mode to deploy (with a tenant it does not
suit), no mode better than the baseline, and too few requests to say."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from analysis.decision import DEPLOY, NONE_BETTER, TOO_FEW, decide_run
from analysis.long_summary import long_summary
from analysis.stats import MIN_BOOTSTRAP_PAIRS
from analysis.sweep import LEVEL_SCHEMA, decide_sweep, with_level
from contract.records import REQUEST_SCHEMA, RequestRecord


def _run(n: int, faster: dict[str, float], noise: float, seed: int = 1, failed: dict[str, int] | None = None,
         limited: dict[str, bool] | None = None) -> pa.Table:
    """`n` requests of two tenants in the baseline and in each mode of `faster` (tenant -> how many
    times faster than the baseline it serves that tenant's requests), each latency off by a
    lognormal `noise`; `failed`: mode -> requests that failed; `limited`: mode -> its client's verdict
    on itself (client_limited)."""
    rng = np.random.default_rng(seed)
    base = rng.uniform(500, 3000, n)
    rows = []
    for mode, by_tenant in {"baseline": {"chat": 1.0, "code": 1.0}, **faster}.items():
        for i in range(n):
            tenant = "chat" if i % 2 else "code"
            e2e = base[i] / by_tenant[tenant] * rng.lognormal(0, noise)
            status = "error" if i < (failed or {}).get(mode, 0) else "ok"
            r = RequestRecord(run_id="r", mode=mode, worker="w0", tenant=tenant, request_id=f"r{i:06d}",
                              scheduled_ns=i * 10**8, offset_s=i / 10, status=status)
            if status == "ok":
                r.sent_ns = r.scheduled_ns
                r.ttft_ms, r.e2e_ms = e2e / 10, e2e
                r.first_token_ns, r.last_token_ns = r.sent_ns + int(e2e * 1e5), r.sent_ns + int(e2e * 1e6)
                r.itl_ms, r.chunk_tokens, r.completion_tokens = [e2e / 10, 10.0], [1, 9], 10
            else:
                r.error_kind = "http"
            rows.append(r.as_row())
    table = pa.Table.from_pylist(rows, schema=REQUEST_SCHEMA)
    return long_summary(table, "r", ["baseline", *faster], client_limited=limited)


def test_a_mode_that_is_faster_is_deployed_and_a_tenant_it_slows_keeps_the_baseline():
    d = decide_run(_run(400, {"eagle": {"chat": 2.0, "code": 2.0}, "draft": {"chat": 1.6, "code": 0.8}},
                        noise=0.1), offered=10.0)
    assert d.kind == DEPLOY and d.mode == "eagle" and d.speedup.low > 1.5 and d.baseline_for == []
    assert d.text.startswith(f"deploy eagle at 10.00 req/s offered: E2E {d.speedup.value:.2f}x faster than the "
                             f"baseline [{d.speedup.low:.2f}, {d.speedup.high:.2f}], 400 requests paired")
    assert abs(d.speedup.value - 2.0) < 0.05 and "burst" not in d.text   # 40 s of arrivals: a steady window
    burst = decide_run(_run(40, {"eagle": {"chat": 2.0, "code": 2.0}}, noise=0.1))   # 4 s of 0.5-3 s requests
    assert burst.kind == DEPLOY and burst.text.endswith(
        "; measured on a burst too short for a steady state, so it holds for that burst, not a sustained load "
        "(replay more requests: --requests)")
    draft_only = decide_run(_run(400, {"draft": {"chat": 1.6, "code": 0.8}}, noise=0.1))
    assert draft_only.kind == DEPLOY and draft_only.mode == "draft"   # 1.6x on chat, 0.8x on code: 1.13x
    assert draft_only.baseline_for == ["code"] and "; keep the baseline for code (0.7" in draft_only.text


def test_modes_no_faster_than_the_baseline_say_no_mode_is_better():
    d = decide_run(_run(400, {"ngram": {"chat": 1.0, "code": 1.0}, "medusa": {"chat": 0.9, "code": 0.9}},
                        noise=0.1))
    assert d.kind == NONE_BETTER and d.mode is None
    assert d.text.startswith("no mode is better than the baseline here: ngram 1.00x (n.s.), medusa 0.")
    assert d.text.endswith("]")   # medusa's interval, below 1: it is slower
    # a mode faster only by failing more of its requests is left out, and said to be
    failing = decide_run(_run(400, {"eagle": {"chat": 2.0, "code": 2.0}}, noise=0.1, failed={"eagle": 40}))
    assert failing.kind == NONE_BETTER and "failing more requests than the baseline: eagle" in failing.text


def test_a_run_too_short_to_tell_says_so_and_how_many_requests_would():
    d = decide_run(_run(8, {"eagle": {"chat": 1.05, "code": 1.05}}, noise=0.5))
    assert d.kind == TOO_FEW and d.mode is None
    assert d.text.startswith("not enough data to say: eagle ") and "could be 10% better or worse" in d.text
    needed = int(d.text.split("about ")[1].split(" requests")[0].replace(",", ""))
    assert needed > 8
    assert decide_run(_run(8, {"eagle": {"chat": 1.0, "code": 1.0}}, noise=0.1)).kind == NONE_BETTER
    # two requests twice as fast: a bootstrap of 2 pairs has 3 distinct resamples, no interval to read
    two = decide_run(_run(2, {"eagle": {"chat": 2.0, "code": 2.0}}, noise=0.01))
    assert two.kind == TOO_FEW and "eagle 1.98x of 2 paired requests, too few for an interval (it needs 8)" in two.text
    assert f"about {MIN_BOOTSTRAP_PAIRS} requests per mode would tell" in two.text
    alone = decide_run(_run(50, {}, noise=0.1))   # nothing but the baseline
    assert alone.kind == TOO_FEW and alone.text.startswith("no decision: this run replayed only the baseline")


def _sweep(levels: dict[str, tuple[float, dict[str, dict[str, float]]]], requests: dict[str, int] | None = None,
           limited: dict[str, dict[str, bool]] | None = None) -> pa.Table:
    """A sweep of levels name -> (offered req/s, the modes' speedups as `_run` takes them), 400
    requests each (a steady window at every level) unless `requests` says otherwise; `limited`:
    level -> mode -> its client fell behind."""
    parts = [with_level(_run((requests or {}).get(name, 400), faster, noise=0.1, seed=k,
                             limited=(limited or {}).get(name)), name, offered)
             for k, (name, (offered, faster)) in enumerate(levels.items())]
    return pa.concat_tables(parts).cast(LEVEL_SCHEMA)


def test_a_sweep_deploys_the_mode_that_pays_up_to_the_highest_load_and_says_what_happens_above():
    both = {"chat": 1.0, "code": 1.0}
    sweep = _sweep({"low": (2.0, {"eagle": {"chat": 2.0, "code": 2.0}, "draft": {"chat": 1.5, "code": 1.5}}),
                    "mid": (4.0, {"eagle": {"chat": 1.5, "code": 1.5}, "draft": both}),
                    "high": (8.0, {"eagle": both, "draft": both})})
    d = decide_sweep(sweep)
    assert d.kind == DEPLOY and d.mode == "eagle"
    assert d.text.startswith("deploy eagle up to 4.00 req/s offered (mid: E2E ") and abs(d.speedup.value - 1.5) < 0.05
    assert d.text.endswith("; at high its speedup is 1.00x (n.s.)")
    none = decide_sweep(_sweep({"low": (2.0, {"eagle": both}), "high": (8.0, {"eagle": both})}))
    assert none.kind == NONE_BETTER and none.text == "no mode is better than the baseline at any level swept (from low)"


def test_a_sweep_names_no_ceiling_at_a_level_too_short_to_judge_or_whose_client_fell_behind():
    """Eagle pays 2x at every level; at `mid` its client fell behind, at `short` the arrivals were
    too few to tell whether the fleet kept up: the ceiling is the level below each, and the
    decision says why it stops there."""
    fast = {"eagle": {"chat": 2.0, "code": 2.0}}
    levels = {"low": (2.0, fast), "mid": (4.0, fast), "high": (8.0, fast)}
    behind = decide_sweep(_sweep(levels, limited={"mid": {"eagle": True, "baseline": False}}))
    assert behind.kind == DEPLOY and behind.text.startswith("deploy eagle up to 2.00 req/s offered (low: E2E ")
    assert behind.text.endswith("; at mid not judged: eagle's client fell behind")
    short = decide_sweep(_sweep(levels, requests={"mid": 12}))
    assert short.kind == DEPLOY and short.text.startswith("deploy eagle up to 2.00 req/s offered (low")
    assert short.text.endswith("; at mid not judged: too few requests to judge whether the fleet kept up")
    # the baseline's client behind at the lowest level: no level is judged, so no ceiling at all
    lowest = decide_sweep(_sweep(levels, limited={"low": {"baseline": True}}))
    assert lowest.kind == TOO_FEW and lowest.mode is None
    assert lowest.text.startswith("not enough data to say: at the lowest level (low) eagle 2.0")
    assert "but baseline's client fell behind" in lowest.text
    # and judged at every level, it pays up to the highest
    assert decide_sweep(_sweep(levels)).text.endswith(", the highest level swept: it may pay higher still")
