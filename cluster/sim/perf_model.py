"""The performance model: step times and memory of a vLLM deployment, as pure functions.

A decode step reads every weight once and each running sequence's KV cache, and multiplies the
step's tokens through the weights; it takes the larger of its memory time and its compute time,
plus fixed overheads (profiles.py holds every constant and its source). Speculation adds the
proposer's cost and widens the target pass to verify K+1 tokens per sequence: nearly free while
the step is memory-bound (small batches), paid in full once it is compute-bound (large batches),
which is why speculation pays at low load and costs at high load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cluster.sim.profiles import (
    ALLREDUCE_S,
    BLOCK_SIZE,
    COMPUTE_EFFICIENCY,
    DRAFT_STEP_OVERHEAD_S,
    MEM_EFFICIENCY,
    NGRAM_LOOKUP_S_PER_SEQ,
    STEP_OVERHEAD_S,
    Hardware,
    ModelProfile,
)
from cluster.speculation import SpeculativeConfig

# Memory per GPU that vLLM keeps for activations, CUDA graphs and the sampler (measured
# "non-torch" plus activation peak in vLLM's startup log for 70B at TP4: 1.5-3 GB).
ACTIVATION_RESERVE_BYTES = 2.5e9
# Medusa: one residual block (hidden x hidden + bias) per head; the LM head is shared with the
# target (Medusa paper, "Medusa-1" heads).
# EAGLE: one decoder layer of the target plus an fc of 2*hidden x hidden (EAGLE paper, Sec. 3);
# EAGLE-3 adds the fusion of three hidden states (3*hidden x hidden).


@dataclass(frozen=True)
class Deployment:
    """What one server runs: the target on `tp` GPUs, and optionally a proposer."""

    hardware: Hardware
    model: ModelProfile
    tp: int = 1
    spec: SpeculativeConfig | None = None
    draft: ModelProfile | None = None  # the draft model, for method draft_model
    gpu_memory_utilization: float = 0.9

    @property
    def k(self) -> int:
        return self.spec.num_speculative_tokens if self.spec else 0

    @property
    def method(self) -> str:
        return self.spec.method if self.spec else "none"

    @property
    def draft_tp(self) -> int:
        if self.spec and self.spec.draft_tensor_parallel_size:
            return self.spec.draft_tensor_parallel_size
        return 1


def target_pass_s(hw: Hardware, model: ModelProfile, tp: int, tokens: int, kv_tokens: int) -> float:
    """One forward pass of `model` over `tokens` new tokens that attend to `kv_tokens` cached ones."""
    mem_bytes = (model.weight_bytes + kv_tokens * model.kv_bytes_per_token) / tp
    t_mem = mem_bytes / (hw.hbm_bandwidth * MEM_EFFICIENCY)
    t_compute = 2.0 * model.params * tokens / tp / (hw.bf16_flops * COMPUTE_EFFICIENCY)
    t_comm = 2 * model.layers * ALLREDUCE_S if tp > 1 else 0.0
    return max(t_mem, t_compute) + STEP_OVERHEAD_S + t_comm


def proposer_weight_bytes(dep: Deployment) -> float:
    """Bytes of proposer weights across the whole replica (all TP ranks together)."""
    h = dep.model.hidden
    if dep.method == "draft_model" and dep.draft is not None:
        # With draft TP 1 every target rank holds a full copy of the draft.
        return dep.draft.weight_bytes * (dep.tp // dep.draft_tp)
    if dep.method in ("medusa", "mlp_speculator"):
        return dep.k * (h * h + h) * 2
    if dep.method in ("eagle", "mtp"):
        return dep.model.layer_weight_bytes + 2 * h * h * 2
    if dep.method == "eagle3":
        return dep.model.layer_weight_bytes + 3 * h * h * 2
    return 0.0


def proposer_s(dep: Deployment, n_seqs: int, kv_tokens: int) -> float:
    """Time to propose K tokens for each of `n_seqs` sequences (0 without speculation)."""
    if dep.spec is None or n_seqs == 0:
        return 0.0
    hw, k = dep.hardware, dep.k
    if dep.method in ("ngram", "suffix"):
        return NGRAM_LOOKUP_S_PER_SEQ * n_seqs
    if dep.method == "draft_model" and dep.draft is not None:
        d = dep.draft
        t_mem = (d.weight_bytes + kv_tokens * d.kv_bytes_per_token) / dep.draft_tp / (hw.hbm_bandwidth * MEM_EFFICIENCY)
        t_compute = 2.0 * d.params * n_seqs / dep.draft_tp / (hw.bf16_flops * COMPUTE_EFFICIENCY)
        t_comm = 2 * d.layers * ALLREDUCE_S if dep.draft_tp > 1 else 0.0
        return k * (max(t_mem, t_compute) + DRAFT_STEP_OVERHEAD_S + t_comm)
    # Head-based proposers (medusa, eagle, eagle3, mtp, mlp_speculator) run on the target's ranks.
    head_bytes = proposer_weight_bytes(dep) / dep.tp
    t_mem = head_bytes / (hw.hbm_bandwidth * MEM_EFFICIENCY)
    head_params = proposer_weight_bytes(dep) / 2
    t_compute = 2.0 * head_params * n_seqs / dep.tp / (hw.bf16_flops * COMPUTE_EFFICIENCY)
    one = max(t_mem, t_compute) + DRAFT_STEP_OVERHEAD_S
    if dep.method in ("medusa", "mlp_speculator"):
        return one  # all heads in one pass
    return k * one  # eagle-style heads are autoregressive: K passes of one layer


def step_s(dep: Deployment, n_decode: int, decode_kv_tokens: int, prefill_tokens: int = 0,
           prefill_kv_tokens: int = 0) -> float:
    """One engine step: propose for the decoding sequences, then one target pass verifying K+1
    tokens for each of them and carrying this step's chunk of prefill."""
    tokens = n_decode * (dep.k + 1) + prefill_tokens
    if tokens == 0:
        return 0.0
    kv = decode_kv_tokens + prefill_kv_tokens
    return proposer_s(dep, n_decode, decode_kv_tokens) + target_pass_s(
        dep.hardware, dep.model, dep.tp, tokens, kv
    )


def kv_capacity_tokens(dep: Deployment) -> int:
    """KV cache capacity in tokens: GPU memory x utilization, minus weights (target and proposer),
    minus the activation reserve, over the KV bytes per token (the draft model keeps its own KV)."""
    budget = dep.hardware.hbm_bytes * dep.gpu_memory_utilization * dep.tp
    budget -= dep.model.weight_bytes + proposer_weight_bytes(dep) + ACTIVATION_RESERVE_BYTES * dep.tp
    per_token = dep.model.kv_bytes_per_token
    if dep.method == "draft_model" and dep.draft is not None:
        per_token += dep.draft.kv_bytes_per_token * (dep.tp // dep.draft_tp)
    tokens = budget / per_token
    return max(0, int(tokens // BLOCK_SIZE) * BLOCK_SIZE)


def blocks(tokens: int) -> int:
    return math.ceil(tokens / BLOCK_SIZE)
