"""The engine's scheduler run in virtual time: the same admission, chunked prefill, speculation
and preemption as the live server, with no sleeping, so capacity questions and the calibration
rows (bench/calibrate.py) are answered in milliseconds and deterministically."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.sim import perf_model
from cluster.sim.engine import Engine, Sequence


@dataclass(frozen=True)
class SimRequest:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    domain: str = "chat"
    temperature: float = 0.0


@dataclass(frozen=True)
class SimResult:
    ttft_s: float
    e2e_s: float
    chunks: int
    tokens: int
    chunk_s: tuple[float, ...] = ()        # each chunk's time since the arrival
    chunk_tokens: tuple[int, ...] = ()     # the tokens each chunk carried
    spec: tuple[int, int, int, tuple[int, ...]] | None = None   # steps, drafts, accepted, histogram


class _VirtualEngine(Engine):
    def __init__(self, *args, **kwargs) -> None:
        self.now = 0.0
        super().__init__(*args, clock=lambda: self.now, **kwargs)
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.chunks: dict[int, int] = {}
        self.times: dict[int, list[float]] = {}
        self.tokens: dict[int, list[int]] = {}
        self.done: dict[int, Sequence] = {}

    def deliver(self, seq: Sequence, n: int, now: float) -> None:
        key = int(seq.request_id)
        if n:
            self.first.setdefault(key, now)
            self.last[key] = now
            self.chunks[key] = self.chunks.get(key, 0) + 1
            self.times.setdefault(key, []).append(now)
            self.tokens.setdefault(key, []).append(n)
        else:
            self.done[key] = seq


def simulate(dep: perf_model.Deployment, requests: list[SimRequest], max_num_seqs: int = 256,
             seed: int = 0) -> list[SimResult]:
    """Serve `requests` (sorted by arrival) and return each one's timings."""
    eng = _VirtualEngine(dep, max_num_seqs=max_num_seqs, seed=seed)
    order = sorted(range(len(requests)), key=lambda i: requests[i].arrival_s)
    nxt = 0
    while nxt < len(order) or eng.running or eng.waiting:
        while nxt < len(order) and requests[order[nxt]].arrival_s <= eng.now:
            r = requests[order[nxt]]
            eng.add(Sequence(request_id=str(order[nxt]), prompt_tokens=r.prompt_tokens,
                             target_tokens=r.output_tokens, domain=r.domain, temperature=r.temperature,
                             arrival=r.arrival_s))
            nxt += 1
        if not eng.running and not eng.waiting:
            eng.now = requests[order[nxt]].arrival_s
            continue
        plan = eng.schedule()
        eng.now += plan.duration_s
        eng.finish(plan)
    out = []
    for i, r in enumerate(requests):
        seq = eng.done.get(i)
        spec = ((seq.spec_steps, seq.spec_draft_tokens, seq.spec_accepted, tuple(seq.spec_histogram))
                if seq is not None and seq.spec_steps else None)
        out.append(SimResult(eng.first[i] - r.arrival_s, eng.last[i] - r.arrival_s, eng.chunks[i], r.output_tokens,
                             tuple(t - r.arrival_s for t in eng.times[i]), tuple(eng.tokens[i]), spec))
    return out


def poisson_requests(rate: float, n: int, prompt_tokens: int, output_tokens: int, domain: str,
                     seed: int = 0, temperature: float = 0.0) -> list[SimRequest]:
    """`n` identical-shape requests arriving as a Poisson process of `rate` per second."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    return [SimRequest(float(a), prompt_tokens, output_tokens, domain, temperature) for a in arrivals]
