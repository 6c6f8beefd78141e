"""The engine's scheduler run in virtual time: the same admission, chunked prefill, speculation
and preemption as the live server, with no sleeping, so capacity questions and the calibration
rows (bench/calibrate.py) are answered in milliseconds and deterministically."""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from cluster.sim import perf_model
from cluster.sim.engine import Engine, Sequence
from cluster.sim.gpu import GpuMeter


@dataclass(frozen=True)
class SimRequest:
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    domain: str = "chat"
    temperature: float = 0.0
    # a conversation's later turn: the request it follows (an index into the same list) and the
    # think time after that one's last token, when it arrives (open loop; `arrival_s` is then not
    # read); its prompt grows by the answers before it, which the trace's turn cannot hold
    after: int | None = None
    think_s: float = 0.0


@dataclass(frozen=True)
class SimResult:
    ttft_s: float
    e2e_s: float
    chunks: int
    tokens: int
    chunk_s: tuple[float, ...] = ()        # each chunk's time since the arrival
    chunk_tokens: tuple[int, ...] = ()     # the tokens each chunk carried
    spec: tuple[int, int, int, tuple[int, ...]] | None = None   # steps, drafts, accepted, histogram
    arrival_s: float = 0.0                 # when it arrived (closed loop: when its slot freed)


class _VirtualEngine(Engine):
    def __init__(self, *args, **kwargs) -> None:
        self.now = 0.0
        # the whole replay's energy kept, read once it has ended (simulate_metered)
        super().__init__(*args, clock=lambda: self.now, gpu_history=None, **kwargs)
        self.first: dict[int, float] = {}
        self.last: dict[int, float] = {}
        self.chunks: dict[int, int] = {}
        self.times: dict[int, list[float]] = {}
        self.tokens: dict[int, list[int]] = {}
        self.done: dict[int, Sequence] = {}
        self.ended: list[int] = []          # the done, in the order they ended

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
            self.ended.append(key)


class _Turns:
    """Conversations' later turns, each released when the turn before it has its last token."""

    def __init__(self, requests: list[SimRequest], later: dict[int, int]) -> None:
        self.requests = requests
        self.children: dict[int, list[int]] = {}
        for i, before in later.items():
            self.children.setdefault(before, []).append(i)
        self.heap: list[tuple[float, int]] = []
        self.grown: dict[int, int] = {}      # tokens a turn's prompt gained: the answers before it
        self._seen = 0

    def waiting(self) -> bool:
        return bool(self.heap)

    def next(self) -> tuple[float, int] | None:
        return self.heap[0] if self.heap else None

    def take(self) -> None:
        heapq.heappop(self.heap)

    def released(self, eng: _VirtualEngine) -> None:
        if not self.children:
            return
        new, self._seen = eng.ended[self._seen:], len(eng.ended)
        for key in [k for k in new if k in self.children]:
            answer = sum(eng.tokens.get(key, ()))
            for child in self.children.pop(key):
                self.grown[child] = self.grown.get(key, 0) + answer
                heapq.heappush(self.heap, (eng.last.get(key, eng.now) + self.requests[child].think_s, child))


def simulate(dep: perf_model.Deployment, requests: list[SimRequest], max_num_seqs: int = 256,
             seed: int = 0, concurrency: int | None = None, stop_s: float | None = None) -> list[SimResult | None]:
    """simulate_metered's timings alone."""
    return simulate_metered(dep, requests, max_num_seqs, seed, concurrency, stop_s)[0]


def simulate_metered(dep: perf_model.Deployment, requests: list[SimRequest], max_num_seqs: int = 256,
                     seed: int = 0, concurrency: int | None = None,
                     stop_s: float | None = None) -> tuple[list[SimResult | None], GpuMeter, float]:
    """Serve `requests` and return each one's timings, the GPUs' meter and when the last step
    ended (virtual seconds): open loop, each arriving at its
    `arrival_s`, or with `concurrency` closed loop, in order, each arriving the moment one of
    `concurrency` slots frees (its `arrival_s` ignored; `SimResult.arrival_s` says when). With
    `stop_s`, nothing arrives from then on (the rest are None: never sent), as a replay that
    stops sending at a deadline and lets its requests finish."""
    eng = _VirtualEngine(dep, max_num_seqs=max_num_seqs, seed=seed)
    later = {i: r.after for i, r in enumerate(requests) if r.after is not None and not concurrency}
    order = (list(range(len(requests))) if concurrency else
             sorted((i for i in range(len(requests)) if i not in later), key=lambda i: requests[i].arrival_s))
    turns = _Turns(requests, later)
    arrived: dict[int, float] = {}
    nxt = 0

    def upcoming() -> tuple[float, int] | None:
        """The next request to arrive (open loop): the trace's next, or a turn its answer released."""
        first = (requests[order[nxt]].arrival_s, order[nxt]) if nxt < len(order) else None
        turn = turns.next()
        return turn if first is None or (turn is not None and turn[0] < first[0]) else first

    def due() -> bool:
        if concurrency:
            return len(arrived) - len(eng.done) < concurrency
        return upcoming()[0] <= eng.now

    def stopped() -> bool:
        if stop_s is None:
            return False
        return (eng.now if concurrency else upcoming()[0]) >= stop_s

    def pending() -> bool:
        return nxt < len(order) or turns.waiting()

    while pending() or eng.running or eng.waiting:
        while pending() and not stopped() and due():
            at, i = (eng.now, order[nxt]) if concurrency else upcoming()
            if i in later:
                turns.take()
            else:
                nxt += 1
            r = requests[i]
            arrived[i] = at
            eng.add(Sequence(request_id=str(i), prompt_tokens=r.prompt_tokens + turns.grown.get(i, 0),
                             target_tokens=r.output_tokens, domain=r.domain, temperature=r.temperature,
                             arrival=arrived[i]))
        if pending() and stopped():
            nxt, turns.heap = len(order), []   # the deadline: what has not arrived is never sent
        if not eng.running and not eng.waiting:
            if not pending():
                break
            eng.now = requests[order[nxt]].arrival_s if concurrency else upcoming()[0]
            continue
        plan = eng.schedule()
        eng.now += plan.duration_s
        eng.finish(plan)
        turns.released(eng)
    out: list[SimResult | None] = []
    for i, r in enumerate(requests):
        if i not in arrived:
            out.append(None)
            continue
        seq, t0 = eng.done.get(i), arrived[i]
        spec = ((seq.spec_steps, seq.spec_draft_tokens, seq.spec_accepted, tuple(seq.spec_histogram))
                if seq is not None and seq.spec_steps else None)
        out.append(SimResult(eng.first[i] - t0, eng.last[i] - t0, eng.chunks[i], r.output_tokens,
                             tuple(t - t0 for t in eng.times[i]), tuple(eng.tokens[i]), spec, t0))
    return out, eng.gpu, eng.now


def poisson_requests(rate: float, n: int, prompt_tokens: int, output_tokens: int, domain: str,
                     seed: int = 0, temperature: float = 0.0) -> list[SimRequest]:
    """`n` identical-shape requests arriving as a Poisson process of `rate` per second."""
    rng = np.random.default_rng(seed)
    arrivals = np.cumsum(rng.exponential(1.0 / rate, size=n))
    return [SimRequest(float(a), prompt_tokens, output_tokens, domain, temperature) for a in arrivals]
