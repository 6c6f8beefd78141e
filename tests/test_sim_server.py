"""The simulator on the wire: the official openai client, vLLM's SSE framing, errors and /metrics."""

from __future__ import annotations

import itertools
import json
import time

import openai
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from scenarios.prompts import make_prompt
from tests.conftest import MODEL, sim_server

DRAFT = '{"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}'
PROSE = "Tell me, in a few friendly paragraphs, how a city decides where to build a new park. " * 3


@pytest.fixture(scope="module")
def draft_sim():
    with sim_server("--speculative-config", DRAFT, "-tp", "4", "--time-scale", "0.2") as url:
        yield url


@pytest.mark.e2e
def test_openai_client_streams_chat_and_completions(draft_sim):
    client = openai.OpenAI(base_url=f"{draft_sim}/v1", api_key="unused")
    chunks = list(client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": PROSE}], max_tokens=40, stream=True,
        stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 40
    assert text.strip() and chunks[0].choices[0].delta.role == "assistant"

    chunks = list(client.completions.create(model=MODEL, prompt=PROSE, max_tokens=30, stream=True,
                                            stream_options={"include_usage": True}, extra_body={"ignore_eos": True}))
    assert chunks[-1].usage.completion_tokens == 30
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == "length"


@pytest.mark.e2e
def test_openai_client_non_streaming(draft_sim):
    client = openai.OpenAI(base_url=f"{draft_sim}/v1", api_key="unused")
    chat = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=12,
                                          extra_body={"ignore_eos": True})
    assert chat.usage.completion_tokens == 12 and chat.choices[0].message.content
    comp = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=9,
                                     extra_body={"ignore_eos": True})
    assert comp.usage.completion_tokens == 9 and len(comp.choices[0].text.split()) == 9
    assert [m.id for m in client.models.list().data] == [MODEL]


def _stream(url: str, max_tokens: int, prompt: str = PROSE) -> list[dict]:
    body = {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    events = []
    with requests.post(f"{url}/v1/completions", json=body, stream=True, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line:
                assert line.startswith(b"data: ")
                events.append(line[6:])
    assert events[-1] == b"[DONE]"
    return [json.loads(e) for e in events[:-1]]


@pytest.mark.e2e
def test_speculation_sends_several_tokens_per_chunk_and_exact_usage(draft_sim):
    chunks = _stream(draft_sim, 200)
    text_chunks = [c for c in chunks if c["choices"]]
    running = [c["usage"]["completion_tokens"] for c in text_chunks]
    per_chunk = [b - a for a, b in zip([0, *running], running, strict=False)]
    assert sum(per_chunk) == 200 == chunks[-1]["usage"]["completion_tokens"]
    assert max(per_chunk) > 1 and 200 / len(text_chunks) > 1.5  # English prose: draft accepts often
    # each chunk's text has as many words as the tokens it carries
    assert [len(c["choices"][0]["text"].split()) for c in text_chunks] == per_chunk


@pytest.mark.e2e
def test_baseline_sends_one_token_per_chunk():
    with sim_server("-tp", "4", "--time-scale", "0.1") as url:
        chunks = [c for c in _stream(url, 50) if c["choices"]]
        assert len(chunks) == 50


SPECS = {
    "draft": DRAFT,
    "medusa": '{"method": "medusa", "model": "medusa-heads", "num_speculative_tokens": 5}',
    "eagle": '{"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-70B", "num_speculative_tokens": 5}',
    "ngram": '{"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4}',
}


@pytest.mark.e2e
@pytest.mark.parametrize("mode", list(SPECS))
def test_acceptance_from_metrics_matches_client_tokens_per_chunk(mode):
    with sim_server("--speculative-config", SPECS[mode], "-tp", "4", "--time-scale", "0.05") as url:
        before = _spec_counters(url)
        tokens = chunks = 0
        for i in range(6):
            text = [c for c in _stream(url, 120, prompt=make_prompt("summarize", None, 1200, i, i)) if c["choices"]]
            assert text[-1]["usage"]["completion_tokens"] == 120
            tokens += 120 - 1  # the first chunk comes from prefill, not a verification pass
            chunks += len(text) - 1
        after = _spec_counters(url)
    drafts = after["vllm:spec_decode_num_drafts"] - before["vllm:spec_decode_num_drafts"]
    accepted = after["vllm:spec_decode_num_accepted_tokens"] - before["vllm:spec_decode_num_accepted_tokens"]
    assert tokens / chunks > 1.2
    # every chunk is one verification step; vLLM V1's n-gram proposer drafts only for a sequence
    # whose recent tokens match its context, so it verifies drafts on some steps, not all
    assert drafts == chunks if mode != "ngram" else 0 < drafts < chunks
    assert 1 + accepted / chunks == pytest.approx(tokens / chunks, rel=0.05)


@pytest.mark.e2e
def test_per_request_acceptance_is_on_the_final_usage_chunk_and_adds_up_to_metrics():
    """--per-request-spec-decode-metrics summary, as vLLM 0.29+: the last chunk (with the usage)
    carries `metrics.speculative_decoding`, consistent with the usage, and the requests' counts
    sum to the increase of /metrics's counters."""
    with sim_server("--speculative-config", SPECS["eagle"], "-tp", "4", "--time-scale", "0.05",
                    "--per-request-spec-decode-metrics", "summary") as url:
        before = _spec_counters(url)
        steps = accepted = 0
        for i in range(4):
            chunks = _stream(url, 90, prompt=make_prompt("chat", None, 600, i, i))
            assert [c for c in chunks if "metrics" in c] == [chunks[-1]] and not chunks[-1]["choices"]
            spec = chunks[-1]["metrics"]["speculative_decoding"]
            hist = spec["acceptance_histogram"]
            assert len(hist) == 5 + 1 and sum(hist) == spec["num_spec_steps"]
            assert spec["num_accepted_draft_tokens"] == sum(k * n for k, n in enumerate(hist))
            assert spec["num_draft_tokens"] == 5 * spec["num_spec_steps"]
            assert spec["mean_acceptance_length"] == pytest.approx(1 + spec["num_accepted_draft_tokens"]
                                                                   / spec["num_spec_steps"])
            # one token from prefill, then 1 + accepted per verification step
            assert 1 + spec["num_spec_steps"] + spec["num_accepted_draft_tokens"] == 90
            steps += spec["num_spec_steps"]
            accepted += spec["num_accepted_draft_tokens"]
        after = _spec_counters(url)
        whole = requests.post(f"{url}/v1/completions", json={"model": MODEL, "prompt": PROSE, "max_tokens": 20,
                                                              "ignore_eos": True}, timeout=60).json()
        assert whole["metrics"]["speculative_decoding"]["num_spec_steps"] > 0
    assert steps == after["vllm:spec_decode_num_drafts"] - before["vllm:spec_decode_num_drafts"]
    assert accepted == after["vllm:spec_decode_num_accepted_tokens"] - before["vllm:spec_decode_num_accepted_tokens"]


@pytest.mark.e2e
def test_no_per_request_acceptance_unless_asked(draft_sim):
    assert all("metrics" not in c for c in _stream(draft_sim, 30))


@pytest.mark.e2e
@pytest.mark.serial   # the step time to 5%: nothing may share a core with it
def test_streamed_timing_follows_the_model():
    with sim_server("-tp", "4") as url:  # real time
        model_step = requests.get(f"{url}/sim/info", timeout=5).json()["performance_model"]["single_stream_step_s"]
        body = {"model": MODEL, "prompt": "x " * 2000, "max_tokens": 60, "ignore_eos": True, "stream": True}
        times = []
        with requests.post(f"{url}/v1/completions", json=body, stream=True, timeout=30) as r:
            for line in r.iter_lines():
                if line.startswith(b"data: {"):
                    times.append(time.perf_counter())
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 59
    assert sum(gaps) / len(gaps) == pytest.approx(model_step, rel=0.05)


def _spec_counters(url: str) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(requests.get(f"{url}/metrics", timeout=5).text):
        for s in fam.samples:
            if s.name.startswith("vllm:spec_decode") and s.name.endswith("_total") and "position" not in s.labels:
                out[s.name.removesuffix("_total")] = s.value
    return out


@pytest.mark.e2e
def test_metrics_have_vllm_names_and_labels(draft_sim):
    _stream(draft_sim, 10)
    text = requests.get(f"{draft_sim}/metrics", timeout=5).text
    names = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    for name in ["vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_preemptions_total",
                 "vllm:request_success_total", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:inter_token_latency_seconds_bucket", "vllm:e2e_request_latency_seconds_bucket",
                 "vllm:request_queue_time_seconds_bucket", "vllm:spec_decode_num_drafts_total",
                 "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total",
                 "vllm:spec_decode_num_accepted_tokens_per_pos_total"]:
        assert name in names, name
    assert f'model_name="{MODEL}"' in text and 'engine="0"' in text


@pytest.mark.e2e
@pytest.mark.parametrize("path, body, status, needle", [
    ("/v1/completions", b'{"model": "nope", "prompt": "x"}', 404, "does not exist"),
    ("/v1/completions", b'{"prompt": "x", "max_tokens": 40000}', 400, "maximum context length"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', 400, "n > 1"),
    ("/v1/completions", b'{"prompt": ', 400, "Invalid JSON"),
])
def test_bad_requests_get_vllm_error_json(draft_sim, path, body, status, needle):
    r = requests.post(f"{draft_sim}{path}", data=body, timeout=10)
    assert r.status_code == status
    err = r.json()
    assert err["object"] == "error" and err["code"] == status and needle in err["message"]
    assert err["type"] == ("NotFoundError" if status == 404 else "BadRequestError")


@pytest.mark.e2e
def test_api_key_guards_v1_routes():
    with sim_server("--api-key", "s3cret", "-tp", "4", "--time-scale", "0.1") as url:
        assert requests.get(f"{url}/v1/models", timeout=5).status_code == 401
        ok = requests.get(f"{url}/v1/models", headers={"Authorization": "Bearer s3cret"}, timeout=5)
        assert ok.status_code == 200
        assert requests.get(f"{url}/health", timeout=5).status_code == 200


@pytest.mark.e2e
def test_sim_info_reports_memory_profile(draft_sim):
    info = requests.get(f"{draft_sim}/sim/info", timeout=5).json()
    assert info["speculative_config"]["method"] == "draft_model"
    assert info["memory"]["kv_capacity_tokens"] > 100_000
    assert info["memory"]["proposer_weight_bytes"] > 2e9  # a 1B draft, one copy per TP rank


@pytest.mark.e2e
def test_stop_string_ends_the_completion_as_vllm_does(draft_sim):
    client = openai.OpenAI(base_url=f"{draft_sim}/v1", api_key="unused")
    comp = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=50, stop=[" for", " is"],
                                     extra_body={"ignore_eos": True})
    # the simulator's words run " the of and to in is that for ..."; " is" comes first
    assert comp.choices[0].text == " the of and to in" and comp.choices[0].finish_reason == "stop"
    assert comp.usage.completion_tokens == 6
    chunks = list(client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=50, stop=" that",
                                            stream=True, stream_options={"include_usage": True},
                                            extra_body={"ignore_eos": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == " the of and to in is" and chunks[-1].usage.completion_tokens == 7
    assert [c for c in chunks if c.choices][-1].choices[0].finish_reason == "stop"


@pytest.mark.e2e
def test_a_stray_client_cannot_exhaust_the_simulator():
    """Requests past --max-concurrent-requests get a 503 at once; a body over 64 MiB a 413; the
    streams already in flight finish."""
    import concurrent.futures

    with sim_server("--tensor-parallel-size", "4", "--max-concurrent-requests", "2") as url:
        body = {"model": MODEL, "prompt": PROSE, "max_tokens": 300, "stream": True, "ignore_eos": True}

        def stream() -> int:
            with requests.post(f"{url}/v1/completions", json=body, stream=True, timeout=60) as r:
                for _ in r.iter_lines():
                    pass
                return r.status_code

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            running = [pool.submit(stream) for _ in range(2)]
            time.sleep(1.5)   # both streams admitted, each some seconds from its end
            third = requests.post(f"{url}/v1/completions", json={**body, "stream": False, "max_tokens": 5}, timeout=30)
            assert third.status_code == 503 and "too many concurrent requests" in third.json()["message"]
            assert requests.get(f"{url}/health", timeout=5).status_code == 200   # probes are never refused
            assert requests.get(f"{url}/metrics", timeout=5).status_code == 200
            assert [f.result() for f in running] == [200, 200]
        assert requests.post(f"{url}/v1/completions", json={**body, "stream": False}, timeout=30).status_code == 200
        huge = b'{"prompt": "' + b"x" * (65 * 1024**2) + b'"}'
        r = requests.post(f"{url}/v1/completions", data=huge, headers={"Content-Type": "application/json"}, timeout=60)
        assert r.status_code == 413
