"""What a replica's memory holds once it is up, read at start-up and kept in the manifest so a
finished run can be analysed offline: the weights (target and proposer), the KV cache, and the
KV capacity in tokens, per GPU.

- The simulator says it on `/sim/info` (`memory`, from its performance model).
- vLLM says it in its start-up log (rank 0's lines: `Model loading took 15.2 GiB ...`,
  `Available KV cache memory: 50.1 GiB`, `GPU KV cache size: 409,600 tokens`; the CPU build says
  `Explicitly set (1.0/23.59) GiB for KV cache` and `CPU KV cache size`, and nothing of its
  weights with dummy ones) and on `/metrics` (`vllm:cache_config_info`, whose labels carry
  `num_gpu_blocks` and `block_size`). What neither says stays None; nothing is guessed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from prometheus_client.parser import text_string_to_metric_families

GB = 1e9
GIB = 2**30
_LOADED = re.compile(r"(?:Model loading took|Loading model weights took)\s+([\d.]+)\s*(GiB|GB)")
# GPU: "Available KV cache memory: 31.87 GiB"; the CPU build: "Explicitly set (1.0/23.59) GiB for KV cache"
# with VLLM_CPU_KVCACHE_SPACE, "Auto set (1.48/18.0) GiB for KV cache" without
_KV_MEMORY = re.compile(r"(?:Available KV cache memory:\s*([\d.]+)\s*(GiB|GB))"
                        r"|(?:(?:Explicitly|Auto) set \(([\d.]+)/[\d.]+\)\s*(GiB|GB) for KV cache)")
_KV_TOKENS = re.compile(r"(?:GPU|CPU)? ?KV cache size:\s*([\d,]+)\s*tokens")


@dataclass(frozen=True)
class ReplicaMemory:
    source: str                                  # where the figures come from
    weights_gb_per_gpu: float | None             # target and proposer weights on one GPU
    proposer_weights_gb_per_gpu: float | None    # the proposer's share (the simulator knows it apart)
    kv_cache_gb_per_gpu: float | None
    kv_capacity_tokens: int | None               # tokens the replica's KV cache holds

    def as_dict(self) -> dict:
        return asdict(self)


def from_sim_info(info: dict) -> ReplicaMemory:
    """From the simulator's /sim/info."""
    mem, model, tp = info["memory"], info["model_profile"], info["tensor_parallel_size"]
    proposer = mem["proposer_weight_bytes"] / tp
    tokens = int(mem["kv_capacity_tokens"])
    per_token = model["kv_bytes_per_token"]
    draft = info.get("draft_profile")
    if draft:   # a draft model keeps its own KV beside the target's, on every rank that holds a copy
        # the draft's TP as the simulator ran it (vLLM's default: the target's)
        draft_tp = (mem.get("draft_tensor_parallel_size")
                    or (info.get("speculative_config") or {}).get("draft_tensor_parallel_size") or 1)
        per_token += (draft.get("kv_bytes_per_token", 0.0) or 0.0) * (tp // draft_tp)
    return ReplicaMemory("simulator /sim/info (its performance model)",
                         (mem["target_weight_bytes_per_gpu"] + proposer) / GB, proposer / GB,
                         tokens * per_token / tp / GB, tokens)


def _gb(match: re.Match | None) -> float | None:
    """A (value, unit) match in GB (the pattern's first pair of groups that matched)."""
    if match is None:
        return None
    value, unit = next((v, u) for v, u in zip(match.groups()[::2], match.groups()[1::2], strict=True) if v)
    return float(value) * GIB / GB if unit == "GiB" else float(value)


def from_vllm(log_text: str, metrics_text: str | None) -> ReplicaMemory:
    """From vLLM's start-up log and, for the capacity, its /metrics (`vllm:cache_config_info`)."""
    tokens = None
    match = _KV_TOKENS.search(log_text)
    if match:
        tokens = int(match.group(1).replace(",", ""))
    if metrics_text:
        try:
            for family in text_string_to_metric_families(metrics_text):
                if family.name == "vllm:cache_config_info":
                    labels = family.samples[0].labels if family.samples else {}
                    blocks, size = labels.get("num_gpu_blocks"), labels.get("block_size")
                    if blocks and size and blocks.isdigit() and size.isdigit():
                        tokens = int(blocks) * int(size)
        except ValueError:
            pass   # not Prometheus text: the log's figure stands
    return ReplicaMemory("vLLM start-up log and vllm:cache_config_info", _gb(_LOADED.search(log_text)), None,
                         _gb(_KV_MEMORY.search(log_text)), tokens)
