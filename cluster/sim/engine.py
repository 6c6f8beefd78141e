"""The simulator's engine: one asyncio loop doing continuous batching, step by step.

Each step admits waiting requests within `max_num_seqs` and the KV capacity, spends the step
time the performance model gives (scaled by `time_scale`), then emits to every running request
the tokens that step produced: one token for a request finishing prefill, 1 + accepted drafts for
a decoding one, in one chunk, as vLLM does.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from cluster.sim import perf_model
from cluster.sim.acceptance import draw_accepted, profile, request_alphas
from cluster.sim.gpu import HISTORY, GpuMeter
from cluster.sim.power import PowerModel
from cluster.sim.profiles import BLOCK_SIZE, MAX_NUM_BATCHED_TOKENS

CATCH_UP_LIMIT_S = 0.05


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    request_id: str
    prompt_tokens: int
    target_tokens: int            # tokens it will generate (max_tokens, or its natural end)
    domain: str                   # its subdomain (cluster/sim/domains.py), or a domain
    temperature: float
    arrival: float = field(default_factory=time.monotonic)
    # Mutable state.
    computed: int = 0             # tokens whose KV is computed (prompt, then recomputed output)
    generated: int = 0
    scheduled_at: float | None = None
    first_token_at: float | None = None
    finished: bool = False
    aborted: bool = False
    outbox: asyncio.Queue[int] = field(default_factory=asyncio.Queue)  # tokens per chunk; 0 = done
    alphas: np.ndarray | None = None  # its own per-position acceptance, drawn when the engine takes it
    match: float = 1.0                # the chance a step proposes for it (n-gram: a match is found)
    stop: tuple[int, int, str] | None = None  # a stop string ends it: (tokens, visible chars, string)
    # Its own speculation, as vLLM's --per-request-spec-decode-metrics reports it: steps that
    # verified drafts, drafted and accepted tokens, and how many steps accepted 0, 1, ... K.
    spec_steps: int = 0
    spec_draft_tokens: int = 0
    spec_accepted: int = 0
    spec_histogram: list[int] = field(default_factory=list)

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated

    @property
    def prefilling(self) -> bool:
        return self.computed < self.context


@dataclass
class EngineStats:
    """Counters the server exposes on /metrics, in vLLM's terms."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    preemptions: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    accepted_per_pos: list[int] = field(default_factory=list)
    steps: int = 0
    step_lateness_s: deque[float] = field(default_factory=lambda: deque(maxlen=10_000))


@dataclass(frozen=True)
class StepPlan:
    """One engine step, as scheduled: who decodes, which prefill chunks run, and its model time."""

    decoding: tuple[Sequence, ...]
    prefill: tuple[tuple[Sequence, int], ...]   # (sequence, tokens of its prompt computed this step)
    duration_s: float                            # the performance model's time for the step
    drafted: np.ndarray | None = None            # per decoding sequence: did the proposer propose
    joules: float = 0.0                          # what one of the replica's GPUs uses for it (power.py)


class Engine:
    def __init__(self, dep: perf_model.Deployment, max_num_seqs: int = 256, time_scale: float = 1.0,
                 seed: int = 0, clock: Callable[[], float] = time.monotonic,
                 gpu_history: int | None = HISTORY) -> None:
        self.dep = dep
        self.max_num_seqs = max_num_seqs
        self.time_scale = time_scale
        self.rng = np.random.default_rng(seed)
        self.kv_capacity = perf_model.kv_capacity_tokens(dep)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.stats = EngineStats(accepted_per_pos=[0] * dep.k)
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        # The clock stamps admissions and emissions: real time when serving, virtual time when the
        # same scheduler runs offline (cluster/sim/offline.py).
        self.clock = clock
        self.power = PowerModel.of(dep.hardware)
        self.gpu = GpuMeter(self.power, clock(), time_scale, history=gpu_history)   # each of its GPUs alike

    # ---- public API -------------------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def add(self, seq: Sequence) -> None:
        self.stats.prompt_tokens += seq.prompt_tokens
        if self.dep.spec is not None:
            acc = profile(self.dep.method, seq.domain, self.dep.acceptance)
            seq.alphas = request_alphas(self.rng, acc, self.dep.k, seq.temperature)
            seq.match = acc.match
            seq.spec_histogram = [0] * (self.dep.k + 1)
        self.waiting.append(seq)
        self._wake.set()

    def abort(self, seq: Sequence) -> None:
        seq.aborted = True  # removed at the next step boundary

    @property
    def kv_usage(self) -> float:
        """Fraction of KV blocks held by running sequences (vllm:kv_cache_usage_perc)."""
        cap = self.kv_capacity // BLOCK_SIZE
        used = sum(perf_model.blocks(s.computed) for s in self.running)
        return min(1.0, used / cap) if cap else 0.0

    # ---- the loop ---------------------------------------------------------------------------
    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        next_start = loop.time()
        while True:
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                next_start = loop.time()
            now = loop.time()
            self.stats.step_lateness_s.append(max(0.0, now - next_start))
            plan = self.schedule()
            dt = plan.duration_s
            if dt <= 0:
                await asyncio.sleep(0)
                next_start = loop.time()
                continue
            # Steps follow an absolute schedule, so the event loop's wake-up jitter (epoll rounds to
            # 1 ms) does not accumulate; after a stall longer than CATCH_UP_LIMIT_S (the process
            # was starved) the schedule restarts from now rather than bursting to catch up.
            start = next_start if now - next_start < CATCH_UP_LIMIT_S else now
            end = start + dt * self.time_scale
            await asyncio.sleep(max(0.0, end - loop.time()))
            self.finish(plan)
            next_start = end

    def _drop_aborted(self) -> None:
        if any(s.aborted for s in self.running):
            self.running = [s for s in self.running if not s.aborted]
        if any(s.aborted for s in self.waiting):
            self.waiting = deque(s for s in self.waiting if not s.aborted)

    def _admit(self) -> None:
        used = sum(perf_model.blocks(s.context + self.dep.k + 1) for s in self.running)
        cap_blocks = self.kv_capacity // BLOCK_SIZE
        growth = self.dep.k + 1  # room for the tokens one step may add, as _preempt_if_needed checks
        while self.waiting and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            need = perf_model.blocks(seq.context + growth)
            if used + need > cap_blocks and self.running:
                break
            self.waiting.popleft()
            used += need
            if seq.scheduled_at is None:
                seq.scheduled_at = self.clock()
            self.running.append(seq)

    def _preempt_if_needed(self) -> None:
        # Every running sequence grows by up to K+1 tokens this step; preempt (recompute) the
        # most recently admitted ones until the rest fit, as vLLM's scheduler does.
        cap_blocks = self.kv_capacity // BLOCK_SIZE
        growth = self.dep.k + 1
        while len(self.running) > 1:
            need = sum(perf_model.blocks(s.context + growth) for s in self.running)
            if need <= cap_blocks:
                break
            victim = self.running.pop()
            victim.computed = 0
            self.waiting.appendleft(victim)
            self.stats.preemptions += 1

    def schedule(self) -> StepPlan:
        """The next step: admit within max_num_seqs and the KV capacity, preempt what no longer
        fits, decode every running sequence past its prefill, and fill the rest of the token
        budget with prefill chunks; its time from the performance model."""
        self._drop_aborted()
        self._admit()
        self._preempt_if_needed()
        budget = MAX_NUM_BATCHED_TOKENS
        decoding = [s for s in self.running if not s.prefilling]
        decode_kv = sum(s.context for s in decoding)
        budget -= len(decoding) * (self.dep.k + 1)
        prefill: list[tuple[Sequence, int]] = []
        prefill_tokens = prefill_kv = 0
        for s in self.running:
            if s.prefilling and budget > 0:
                chunk = min(s.context - s.computed, budget)
                budget -= chunk
                prefill.append((s, chunk))
                prefill_tokens += chunk
                prefill_kv += s.computed + chunk
        drafted = None
        if self.dep.spec is not None and decoding:
            match = np.array([s.match for s in decoding])
            drafted = (np.ones(len(decoding), dtype=bool) if (match >= 1).all()
                       else self.rng.random(len(decoding)) < match)
        self.stats.steps += 1
        n_drafted = int(drafted.sum()) if drafted is not None else 0
        step = (self.dep, len(decoding), decode_kv, prefill_tokens, prefill_kv, n_drafted, len(prefill))
        seconds = perf_model.step_s(*step)
        return StepPlan(tuple(decoding), tuple(prefill), seconds, drafted,
                        self.power.step_joules(seconds, perf_model.step_work(*step)))

    def _emit(self, seq: Sequence, n: int, now: float) -> None:
        n = min(n, seq.target_tokens - seq.generated)
        if n <= 0:
            return
        if seq.first_token_at is None:
            seq.first_token_at = now
        seq.generated += n
        seq.computed = seq.context  # emitted tokens are in the KV cache from here on
        self.stats.generation_tokens += n
        self.deliver(seq, n, now)
        if seq.generated >= seq.target_tokens:
            seq.finished = True
            self.deliver(seq, 0, now)

    def deliver(self, seq: Sequence, n: int, now: float) -> None:
        """Hand `n` tokens (0: the end) to whoever streams `seq`."""
        seq.outbox.put_nowait(n)

    def finish(self, plan: StepPlan) -> None:
        """The step's end: prefill chunks computed (a finished prefill samples its first token),
        each decoding sequence's accepted tokens drawn and emitted as one chunk."""
        now = self.clock()
        self.gpu.stepped(now, plan.duration_s, plan.joules)
        for seq, chunk in plan.prefill:
            if seq.aborted:
                continue
            seq.computed += chunk
            if not seq.prefilling:
                # Prefill (or the recompute after a preemption) ends by sampling one token.
                self._emit(seq, 1, now)
        live = [i for i, s in enumerate(plan.decoding) if not s.aborted and not s.finished]
        decoding = [plan.decoding[i] for i in live]
        if decoding:
            k = self.dep.k
            if k and self.dep.spec is not None and plan.drafted is not None:
                drafted = plan.drafted[live]
                accepted = draw_accepted(self.rng, np.stack([s.alphas for s in decoding]), drafted)
                # Drafts past the request's last token are discarded, and not counted as accepted,
                # so /metrics and the client's tokens per chunk describe the same tokens.
                room = np.array([s.target_tokens - s.generated - 1 for s in decoding])
                accepted = np.minimum(accepted, np.maximum(room, 0))
                st = self.stats
                n_drafted = int(drafted.sum())
                st.drafts += n_drafted
                st.draft_tokens += k * n_drafted
                st.accepted_tokens += int(accepted.sum())
                for pos in range(k):
                    st.accepted_per_pos[pos] += int((accepted > pos).sum())
                for s, a, d in zip(decoding, accepted.tolist(), drafted.tolist(), strict=True):
                    if d:
                        s.spec_steps += 1
                        s.spec_draft_tokens += k
                        s.spec_accepted += a
                        s.spec_histogram[a] += 1
                    self._emit(s, 1 + a, now)
            else:
                for s in decoding:
                    self._emit(s, 1, now)
        if any(s.finished for s in self.running):
            self.running = [s for s in self.running if not s.finished]
