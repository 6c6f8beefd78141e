"""Every constant of the performance model, in one place, each with its source.

Hardware figures are datasheet numbers. The efficiencies and overheads that turn them into step
times are *fitted*, in the open below, to one published fit of vLLM V1 forward passes (Llama-3.1-8B
on one H100); they are meant to hold across models, so every other model's step time is a
prediction. `bench/calibrate.py` prints the rows they were fitted to apart from the rows they
predict. A fleet's own measurements replace them (`loadtest calibrate`, cluster/sim/fitting.py).
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path

from common.validation import file_state

log = logging.getLogger(__name__)

GB = 1e9

# ---- The published V1 step-time fit the efficiencies come from --------------------------------
# SpecDecode-Bench ("Speculative Decoding: Performance or Illusion?", arXiv 2601.11580), simulator
# predictor for Llama-3.1-8B-Instruct on one H100 SXM, vLLM 0.10, fitted on InstructCoder at batch
# 1-64 (github.com/SpecDecode-Bench/simulator; numbers cited, no code copied). Seconds:
#   target forward = 3.926e-8 per KV token + 2.101e-5 per batched token + 5.886e-3
#   engine overhead = 1.207e-3 per step
#   EAGLE proposer (K=3 passes) = 2.378e-9 per KV token + 8.414e-7 per speculated token + 2.135e-3
SDB_8B_KV_S = 3.926e-8
SDB_8B_TOKEN_S = 2.101e-5
SDB_8B_FIXED_S = 5.886e-3
SDB_8B_OVERHEAD_S = 1.207e-3
SDB_8B_EAGLE_FIXED_S = 2.135e-3
SDB_EAGLE_K = 3

# NVIDIA H100 SXM5 datasheet: 80 GB HBM3, 3.35 TB/s, 989 TFLOP/s bf16 dense.
_H100_BW, _H100_FLOPS = 3.35e12, 989e12
# Llama-3.1-8B (config.json): 8.03e9 parameters, 32 layers, 8 KV heads of 128, hidden 4096,
# vocabulary 128,256; bf16.
_L8_PARAMS, _L8_KV_BYTES = 8.03e9, 2 * 32 * 8 * 128 * 2
_L8_EAGLE_PASS_BYTES = ((_L8_PARAMS - 2 * 128256 * 4096) / 32 + 2 * 4096 * 4096 + 128256 * 4096) * 2

# Each published coefficient fixes one constant:
# - Fraction of HBM bandwidth reached streaming the weights: the fit's forward constant is 8B's
#   weights read at this efficiency. FITTED (-> 0.81).
WEIGHT_READ_EFFICIENCY = 2 * _L8_PARAMS / (_H100_BW * SDB_8B_FIXED_S)
# - Fraction reached by attention reading the KV cache: the fit's cost per KV token is one token's
#   KV bytes at this efficiency. FITTED (-> 0.997).
KV_READ_EFFICIENCY = _L8_KV_BYTES / (_H100_BW * SDB_8B_KV_S)
# - Fraction of dense bf16 peak reached by the linear layers: the fit's cost per batched token is
#   2 x parameters FLOPs at this efficiency. FITTED (-> 0.773). The cost adds to the weight read
#   rather than hiding under it, as the published fit (linear in batched tokens from batch 1) has it.
COMPUTE_EFFICIENCY = 2 * _L8_PARAMS / (_H100_FLOPS * SDB_8B_TOKEN_S)
# - The engine's fixed cost per step (scheduling, input preparation, launches). SOURCED: the fit's
#   per-step overhead, 1.207 ms.
STEP_OVERHEAD_S = SDB_8B_OVERHEAD_S
# - Fixed cost of one proposer pass (an EAGLE head's, a draft model's step) besides its reads:
#   FITTED to the EAGLE proposer's constant at K=3 less three reads of the 8B head (one decoder
#   layer, the fc and the shared LM head) (-> 0.14 ms).
DRAFT_PASS_OVERHEAD_S = (SDB_8B_EAGLE_FIXED_S
                         - SDB_EAGLE_K * _L8_EAGLE_PASS_BYTES / (_H100_BW * WEIGHT_READ_EFFICIENCY)) / SDB_EAGLE_K
# The least time one decoder layer takes however few bytes it streams: a small model's layer is
# a dozen kernels each bound by launch and synchronisation latency, not bandwidth. FITTED to two
# statements in SpecDecode-Bench's blog ("Where does the time go?"): a draft model's forward pass
# costs about 12.5% of the target's for Llama-3.2-1B (16 layers, TP4) under Llama-3-70B (alone
# that gives 0.11 ms), and about 37.5% for Qwen3-0.6B (28 layers) under Qwen3-8B (alone: 0.08 ms);
# 0.09 ms puts both within 20%. Large layers (8B: 0.16 ms of weights; 70B at TP4: 0.16 ms) never
# reach it.
LAYER_FLOOR_S = 0.09e-3
# One all-reduce under tensor parallelism (two per layer per pass): a latency plus the ring's
# traffic, 2(n-1)/n of the message per GPU, over NVLink's effective bus bandwidth. SOURCED:
# latency 9 us, vLLM's custom all-reduce on H100 at TP4 for 0.5-32 KB messages (sgl-project/sglang
# PR #2904, table "vllm": 8.5-9.2 us); bus bandwidth 370 GB/s, NCCL's effective NVLink bandwidth on
# H100 after protocol overhead (NCCL maintainer, NVIDIA/nccl-tests issue #212).
ALLREDUCE_LATENCY_S = 9.0e-6
ALLREDUCE_BUS_BYTES_PER_S = 370e9
# The rejection sampler and the sampler read and write each scored position's logits (vocabulary
# x 4 bytes) this many times. ASSUMPTION, chosen to match SpecDecode-Bench's finding that
# rejection sampling is under 1.7% of a step (a prediction row in bench/calibrate.py).
SAMPLER_PASSES = 3
# n-gram and suffix proposals are a CPU lookup over each sequence's tokens (vLLM V1 runs a
# numba-compiled match). SOURCED: SpecDecode-Bench's simulator charges 0.5875% of the step's
# verification time for it.
NGRAM_PROPOSE_SHARE = 0.005875
# vLLM V1's default `max_num_batched_tokens` for the OpenAI server on Hopper-class GPUs
# (chunked prefill budget per step).
MAX_NUM_BATCHED_TOKENS = 8192
# vLLM's default KV block size, in tokens.
BLOCK_SIZE = 16


@dataclass(frozen=True)
class Hardware:
    """One GPU type: its datasheet figures and the efficiencies and overheads that turn them into
    step times (the fitted defaults above, or a fleet's own from `loadtest calibrate`)."""

    name: str
    hbm_bytes: float       # per GPU
    hbm_bandwidth: float   # bytes/s per GPU
    bf16_flops: float      # dense FLOP/s per GPU
    weight_read_efficiency: float = WEIGHT_READ_EFFICIENCY
    kv_read_efficiency: float = KV_READ_EFFICIENCY
    compute_efficiency: float = COMPUTE_EFFICIENCY
    step_overhead_s: float = STEP_OVERHEAD_S
    draft_pass_overhead_s: float = DRAFT_PASS_OVERHEAD_S
    layer_floor_s: float = LAYER_FLOOR_S
    allreduce_latency_s: float = ALLREDUCE_LATENCY_S
    allreduce_bus_bytes_per_s: float = ALLREDUCE_BUS_BYTES_PER_S

    def with_fit(self, **values: float) -> Hardware:
        return replace(self, **values)


# The fields a fit may change (loadtest calibrate), in the order it reports them.
FITTABLE = tuple(f.name for f in fields(Hardware))[4:]

HARDWARE: dict[str, Hardware] = {
    "h100-sxm": Hardware("h100-sxm", 80 * GB, _H100_BW, _H100_FLOPS),
    # NVIDIA H200 SXM datasheet: 141 GB HBM3e, 4.8 TB/s, same Hopper compute as H100 SXM.
    "h200": Hardware("h200", 141 * GB, 4.8e12, 989e12),
    # NVIDIA A100 80GB SXM datasheet: 2.039 TB/s, 312 TFLOP/s bf16 dense.
    "a100-80gb": Hardware("a100-80gb", 80 * GB, 2.039e12, 312e12),
}


@dataclass(frozen=True)
class ModelProfile:
    name: str
    params: float          # parameters
    layers: int
    hidden: int
    kv_heads: int
    head_dim: int
    vocab: int = 128_256
    tied_embeddings: bool = False  # the LM head is the input embedding (small Llama 3.2, Qwen3)
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
        """One decoder layer's weights (the embedding and LM head excluded)."""
        tables = 1 if self.tied_embeddings else 2
        return (self.params - tables * self.vocab * self.hidden) * self.bytes_per_param / self.layers

    @property
    def lm_head_bytes(self) -> float:
        return self.vocab * self.hidden * self.bytes_per_param


# Shapes from each model's config.json on the Hugging Face Hub.
MODELS: dict[str, ModelProfile] = {
    "meta-llama/Llama-3.3-70B-Instruct": ModelProfile("Llama-3.3-70B-Instruct", 70.6e9, 80, 8192, 8, 128),
    "meta-llama/Llama-3.1-70B-Instruct": ModelProfile("Llama-3.1-70B-Instruct", 70.6e9, 80, 8192, 8, 128),
    "meta-llama/Meta-Llama-3-70B-Instruct": ModelProfile("Meta-Llama-3-70B-Instruct", 70.6e9, 80, 8192, 8, 128),
    "meta-llama/Llama-3.1-8B-Instruct": ModelProfile("Llama-3.1-8B-Instruct", 8.03e9, 32, 4096, 8, 128),
    "meta-llama/Llama-3.2-1B-Instruct": ModelProfile("Llama-3.2-1B-Instruct", 1.24e9, 16, 2048, 8, 64,
                                                     tied_embeddings=True),
    "Qwen/Qwen3-8B": ModelProfile("Qwen3-8B", 8.19e9, 36, 4096, 8, 128, 151_936),
    "Qwen/Qwen3-0.6B": ModelProfile("Qwen3-0.6B", 0.60e9, 28, 1024, 8, 128, 151_936, tied_embeddings=True),
    "Qwen/Qwen2.5-72B-Instruct": ModelProfile("Qwen2.5-72B-Instruct", 72.7e9, 80, 8192, 8, 128, 152_064),
    "Qwen/Qwen2.5-1.5B-Instruct": ModelProfile("Qwen2.5-1.5B-Instruct", 1.54e9, 28, 1536, 2, 128, 151_936),
}

# Fallback shapes by size class, scaled from the Llama-3 family (layers, hidden, kv_heads, head_dim).
_SIZE_CLASSES = [
    (2e9, (16, 2048, 8, 64)),
    (10e9, (32, 4096, 8, 128)),
    (40e9, (48, 6144, 8, 128)),
    (float("inf"), (80, 8192, 8, 128)),
]
_SIZE_RE = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*[bB](?![a-zA-Z])")


def from_config(path: Path) -> ModelProfile:
    """A local checkpoint's shape from its config.json (a Llama-style decoder): parameters counted
    from the attention, MLP and embedding matrices."""
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        hidden, layers, heads = int(cfg["hidden_size"]), int(cfg["num_hidden_layers"]), int(cfg["num_attention_heads"])
        kv_heads = int(cfg.get("num_key_value_heads") or heads)
        head_dim = int(cfg.get("head_dim") or hidden // heads)
        inter, vocab = int(cfg["intermediate_size"]), int(cfg["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"model {str(path)!r}: its config.json does not give the model's shape ({exc})") from None
    tied = bool(cfg.get("tie_word_embeddings", False))
    attention = hidden * heads * head_dim * 2 + hidden * kv_heads * head_dim * 2
    params = layers * (attention + 3 * hidden * inter) + vocab * hidden * (1 if tied else 2)
    return ModelProfile(path.name, float(params), layers, hidden, kv_heads, head_dim, vocab, tied)


def model_profile(name: str) -> ModelProfile:
    """Look a model up by its Hugging Face name (or basename), or read a local checkpoint's
    config.json; else infer its size from the name."""
    if name in MODELS:
        return MODELS[name]
    if file_state(Path(name) / "config.json") == "file":   # a name too long for a path is no checkpoint
        return from_config(Path(name))
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
