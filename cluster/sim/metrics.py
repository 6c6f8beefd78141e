"""The simulator's /metrics: vLLM's metric names, labels and buckets, via prometheus_client."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from cluster.sim.engine import Engine, Sequence
from common.vllm_buckets import INTER_TOKEN_LATENCY_BUCKETS as ITL_BUCKETS
from common.vllm_buckets import REQUEST_LATENCY_BUCKETS
from common.vllm_buckets import TIME_TO_FIRST_TOKEN_BUCKETS as TTFT_BUCKETS


class ServerMetrics:
    def __init__(self, model_name: str, engine: Engine) -> None:
        self.engine = engine
        self.registry = reg = CollectorRegistry()
        labels = ["model_name", "engine"]
        lv = {"model_name": model_name, "engine": "0"}
        self._running = Gauge("vllm:num_requests_running", "Requests in the running batch.", labels,
                              registry=reg).labels(**lv)
        self._waiting = Gauge("vllm:num_requests_waiting", "Requests waiting to be scheduled.", labels,
                              registry=reg).labels(**lv)
        self._kv = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels,
                         registry=reg).labels(**lv)
        self._prompt = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels,
                               registry=reg).labels(**lv)
        self._generation = Counter("vllm:generation_tokens", "Number of generation tokens processed.",
                                   labels, registry=reg).labels(**lv)
        self._preemptions = Counter("vllm:num_preemptions", "Cumulative number of preemptions.", labels,
                                    registry=reg).labels(**lv)
        self._success = Counter("vllm:request_success", "Count of successfully processed requests.",
                                [*labels, "finished_reason"], registry=reg)
        self._lv = lv
        self.ttft = Histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token.",
                              labels, buckets=TTFT_BUCKETS, registry=reg).labels(**lv)
        self.itl = Histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency.",
                             labels, buckets=ITL_BUCKETS, registry=reg).labels(**lv)
        self.e2e = Histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency.",
                             labels, buckets=REQUEST_LATENCY_BUCKETS, registry=reg).labels(**lv)
        self.queue = Histogram("vllm:request_queue_time_seconds", "Time spent in the WAITING phase.",
                               labels, buckets=REQUEST_LATENCY_BUCKETS, registry=reg).labels(**lv)
        self._spec = engine.dep.spec is not None
        if self._spec:
            self._drafts = Counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.",
                                   labels, registry=reg).labels(**lv)
            self._draft_tokens = Counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.",
                                         labels, registry=reg).labels(**lv)
            self._accepted = Counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.",
                                     labels, registry=reg).labels(**lv)
            per_pos = Counter("vllm:spec_decode_num_accepted_tokens_per_pos",
                              "Accepted tokens per draft position.", [*labels, "position"], registry=reg)
            self._per_pos = [per_pos.labels(**lv, position=str(i)) for i in range(engine.dep.k)]
        self._synced: dict[str, int] = {}

    def finished(self, seq: Sequence, finish_reason: str, end: float) -> None:
        self._success.labels(**self._lv, finished_reason=finish_reason).inc()
        self.e2e.observe(end - seq.arrival)
        if seq.scheduled_at is not None:
            self.queue.observe(seq.scheduled_at - seq.arrival)

    def _sync(self, name: str, counter, value: int) -> None:
        delta = value - self._synced.get(name, 0)
        if delta:
            counter.inc(delta)
            self._synced[name] = value

    def render(self) -> bytes:
        e, st = self.engine, self.engine.stats
        self._running.set(len(e.running))
        self._waiting.set(len(e.waiting))
        self._kv.set(e.kv_usage)
        self._sync("prompt", self._prompt, st.prompt_tokens)
        self._sync("generation", self._generation, st.generation_tokens)
        self._sync("preemptions", self._preemptions, st.preemptions)
        if self._spec:
            self._sync("drafts", self._drafts, st.drafts)
            self._sync("draft_tokens", self._draft_tokens, st.draft_tokens)
            self._sync("accepted", self._accepted, st.accepted_tokens)
            for i, c in enumerate(self._per_pos):
                self._sync(f"pos{i}", c, st.accepted_per_pos[i])
        return generate_latest(self.registry)
