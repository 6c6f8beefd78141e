"""Every constant of the performance model, in one place, each with its source.

Hardware and model shapes are published figures. Efficiencies and overheads are fitted so that
the model reproduces measured step times (see the comments); `bench/calibrate.py` prints the
published figures beside the simulated ones.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

log = logging.getLogger(__name__)

GB = 1e9


@dataclass(frozen=True)
class Hardware:
    name: str
    hbm_bytes: float       # per GPU
    hbm_bandwidth: float   # bytes/s per GPU
    bf16_flops: float      # dense FLOP/s per GPU


HARDWARE: dict[str, Hardware] = {
    # NVIDIA H100 SXM5 datasheet: 80 GB HBM3, 3.35 TB/s, 989 TFLOP/s bf16 dense.
    "h100-sxm": Hardware("h100-sxm", 80 * GB, 3.35e12, 989e12),
    # NVIDIA H200 SXM datasheet: 141 GB HBM3e, 4.8 TB/s, same Hopper compute as H100 SXM.
    "h200": Hardware("h200", 141 * GB, 4.8e12, 989e12),
    # NVIDIA A100 80GB SXM datasheet: 2.039 TB/s, 312 TFLOP/s bf16 dense.
    "a100-80gb": Hardware("a100-80gb", 80 * GB, 2.039e12, 312e12),
}

# Fraction of peak HBM bandwidth a decode step's weight and KV reads achieve. Fitted: with the
# overheads below it gives 19 ms per step for Llama-3-70B at TP4, batch 8 on H100 (vLLM CI).
MEM_EFFICIENCY = 0.80
# Fraction of dense bf16 peak reached by large GEMMs (prefill, wide verification batches); typical
# measured MFU of vLLM prefill on Hopper is 50-60%.
COMPUTE_EFFICIENCY = 0.55
# Fixed cost of one engine step on the target: scheduling, sampling, kernel launches.
STEP_OVERHEAD_S = 2.5e-3
# Cost of one all-reduce at decode sizes over NVLink (two per layer under tensor parallelism):
# ~18 us each, so 80 layers x 2 x 18 us ≈ 2.9 ms at TP4, the gap between the memory time and
# the 19 ms measured at TP4.
ALLREDUCE_S = 18e-6
# One step of a small draft model (kernel launches dominate: a 1B model's weights read in ~1 ms,
# yet a draft step costs ~1.7 ms end to end in vLLM traces at batch 1).
DRAFT_STEP_OVERHEAD_S = 0.8e-3
# n-gram proposals are a CPU lookup over the prompt: tens of microseconds per sequence.
NGRAM_LOOKUP_S_PER_SEQ = 20e-6
# vLLM V1's default `max_num_batched_tokens` for the OpenAI server on Hopper-class GPUs
# (chunked prefill budget per step).
MAX_NUM_BATCHED_TOKENS = 8192
# vLLM's default KV block size, in tokens.
BLOCK_SIZE = 16


@dataclass(frozen=True)
class ModelProfile:
    name: str
    params: float          # parameters
    layers: int
    hidden: int
    kv_heads: int
    head_dim: int
    bytes_per_param: float = 2.0  # bf16

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_param

    @property
    def kv_bytes_per_token(self) -> float:
        # K and V, per layer, per KV head, bf16.
        return 2 * self.layers * self.kv_heads * self.head_dim * 2

    @property
    def layer_weight_bytes(self) -> float:
        return self.weight_bytes / self.layers


# Shapes from each model's config.json on the Hugging Face Hub.
MODELS: dict[str, ModelProfile] = {
    "meta-llama/Llama-3.3-70B-Instruct": ModelProfile("Llama-3.3-70B-Instruct", 70.6e9, 80, 8192, 8, 128),
    "meta-llama/Llama-3.1-70B-Instruct": ModelProfile("Llama-3.1-70B-Instruct", 70.6e9, 80, 8192, 8, 128),
    "meta-llama/Llama-3.1-8B-Instruct": ModelProfile("Llama-3.1-8B-Instruct", 8.03e9, 32, 4096, 8, 128),
    "meta-llama/Llama-3.2-1B-Instruct": ModelProfile("Llama-3.2-1B-Instruct", 1.24e9, 16, 2048, 8, 64),
    "Qwen/Qwen2.5-72B-Instruct": ModelProfile("Qwen2.5-72B-Instruct", 72.7e9, 80, 8192, 8, 128),
    "Qwen/Qwen2.5-1.5B-Instruct": ModelProfile("Qwen2.5-1.5B-Instruct", 1.54e9, 28, 1536, 2, 128),
}

# Fallback shapes by size class, scaled from the Llama-3 family (layers, hidden, kv_heads, head_dim).
_SIZE_CLASSES = [
    (2e9, (16, 2048, 8, 64)),
    (10e9, (32, 4096, 8, 128)),
    (40e9, (48, 6144, 8, 128)),
    (float("inf"), (80, 8192, 8, 128)),
]
_SIZE_RE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def model_profile(name: str) -> ModelProfile:
    """Look a model up by its Hugging Face name (or basename); else infer its size from the name."""
    if name in MODELS:
        return MODELS[name]
    base = name.rstrip("/").split("/")[-1]
    for key, prof in MODELS.items():
        if key.split("/")[-1] == base:
            return prof
    match = _SIZE_RE.search(base)
    if not match:
        raise ValueError(
            f"unknown model {name!r}: not in the simulator's profiles and no size like '8B' in its name"
        )
    params = float(match.group(1)) * 1e9
    layers, hidden, kv_heads, head_dim = next(shape for limit, shape in _SIZE_CLASSES if params < limit)
    log.warning("model %r has no profile; assuming %.1fB parameters from its name", name, params / 1e9)
    return ModelProfile(base, params, layers, hidden, kv_heads, head_dim)
