"""The performance model: step times and memory of a vLLM V1 deployment, as pure functions.

A step is one target pass over the step's tokens (each decoding sequence's last token plus its
drafts, and any prefill chunk), preceded by the proposer's passes at the current batch and
followed by the (rejection) sampler. The target pass reads every weight once and each
sequence's KV cache, and multiplies the step's tokens through the weights; the memory time and
the compute time add, as the published V1 fit this is calibrated to shows (profiles.py has every
constant and its source). Speculation's extra tokens cost little while the weight read dominates
(small batches) and their full compute price once the batch is large, which is why speculation
pays at low load and pays less, or costs, at high load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from cluster.sim.acceptance import Table
from cluster.sim.profiles import (
    BLOCK_SIZE,
    NGRAM_PROPOSE_SHARE,
    SAMPLER_PASSES,
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
    acceptance: Table | None = field(default=None, compare=False)  # a fleet's fitted acceptance

    @property
    def k(self) -> int:
        return self.spec.num_speculative_tokens if self.spec else 0

    @property
    def method(self) -> str:
        return self.spec.method if self.spec else "none"

    @property
    def draft_tp(self) -> int:
        """The draft model's TP: as set, else vLLM's default, the target's (1 for mlp_speculator)."""
        if self.spec and self.spec.draft_tensor_parallel_size:
            return self.spec.draft_tensor_parallel_size
        return 1 if self.method == "mlp_speculator" else self.tp


def _mem_s(hw: Hardware, nbytes: float) -> float:
    """Streaming `nbytes` of weights (or logits) from HBM."""
    return nbytes / (hw.hbm_bandwidth * hw.weight_read_efficiency)


def _kv_s(hw: Hardware, nbytes: float) -> float:
    """Attention reading `nbytes` of KV cache."""
    return nbytes / (hw.hbm_bandwidth * hw.kv_read_efficiency)


def _flops_s(hw: Hardware, params: float, tokens: float) -> float:
    return 2.0 * params * tokens / (hw.bf16_flops * hw.compute_efficiency)


def allreduce_s(hw: Hardware, nbytes: float, tp: int) -> float:
    """One all-reduce of `nbytes` over `tp` GPUs (a ring: each GPU moves 2(tp-1)/tp of it)."""
    return hw.allreduce_latency_s + nbytes * 2 * (tp - 1) / tp / hw.allreduce_bus_bytes_per_s


def _layer_s(hw: Hardware, model: ModelProfile, tp: int, tokens: int) -> float:
    """One decoder layer's weight read and its two all-reduces, or the layer floor if longer."""
    t = _mem_s(hw, model.layer_weight_bytes / tp)
    if tp > 1:
        t += 2 * allreduce_s(hw, tokens * model.hidden * model.bytes_per_param, tp)
    return max(t, hw.layer_floor_s)


def forward_s(hw: Hardware, model: ModelProfile, tp: int, tokens: int, kv_tokens: int) -> float:
    """One forward pass of `model` on `tp` GPUs over `tokens` new tokens that attend to `kv_tokens`
    cached ones: its layers (weights, all-reduces), embedding and LM head, KV reads, and the
    linear layers' arithmetic."""
    rest = model.weight_bytes - model.layers * model.layer_weight_bytes   # embedding, LM head
    t = model.layers * _layer_s(hw, model, tp, tokens) + _mem_s(hw, rest / tp)
    return t + _kv_s(hw, kv_tokens * model.kv_bytes_per_token / tp) + _flops_s(hw, model.params / tp, tokens)


@dataclass(frozen=True)
class Work:
    """What one GPU of a replica does in a step, the power model's inputs (cluster/sim/power.py):
    the bytes it reads from HBM (weights, KV cache, logits) and the FLOPs of its linear layers,
    counted as the step-time functions above and below charge them (all-reduce traffic and the
    fixed costs are time, not work)."""

    hbm_bytes: float = 0.0
    flops: float = 0.0

    def __add__(self, other: Work) -> Work:
        return Work(self.hbm_bytes + other.hbm_bytes, self.flops + other.flops)

    def __mul__(self, times: float) -> Work:
        return Work(self.hbm_bytes * times, self.flops * times)


def forward_work(model: ModelProfile, tp: int, tokens: int, kv_tokens: int) -> Work:
    """forward_s's pass as work on one of the `tp` GPUs: every weight and the KV read once, the
    linear layers' 2 x parameters FLOPs per token."""
    return Work((model.weight_bytes + kv_tokens * model.kv_bytes_per_token) / tp, 2.0 * model.params / tp * tokens)


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
    """Time for a model-based proposer (draft model, heads) to propose for `n_seqs` decoding
    sequences (0 without one): V1 runs it on the current batch after each verification. (An
    n-gram lookup's cost is a share of the verification: step_parts.)"""
    if dep.spec is None or n_seqs == 0 or dep.method in ("ngram", "suffix"):
        return 0.0
    hw, k, tp = dep.hardware, dep.k, dep.tp
    if dep.method == "draft_model" and dep.draft is not None:
        one = forward_s(hw, dep.draft, dep.draft_tp, n_seqs, kv_tokens)
        return k * (one + hw.draft_pass_overhead_s)
    model = dep.model
    if dep.method in ("medusa", "mlp_speculator"):
        # One pass: every head's block, then the shared LM head once per head.
        nbytes = proposer_weight_bytes(dep) + k * model.lm_head_bytes
        return (_mem_s(hw, nbytes / tp) + _flops_s(hw, nbytes / model.bytes_per_param / tp, n_seqs)
                + hw.draft_pass_overhead_s)
    # EAGLE-style heads (eagle, eagle3, mtp) are autoregressive: K passes, each one decoder layer
    # (reading that layer's KV), the fusion fc, and the shared LM head.
    nbytes = proposer_weight_bytes(dep) + model.lm_head_bytes
    one = _layer_s(hw, model, tp, n_seqs) + _mem_s(hw, (nbytes - model.layer_weight_bytes) / tp)
    one += _kv_s(hw, kv_tokens * model.kv_bytes_per_token / model.layers / tp)
    one += _flops_s(hw, nbytes / model.bytes_per_param / tp, n_seqs)
    return k * (one + hw.draft_pass_overhead_s)


def proposer_work(dep: Deployment, n_seqs: int, kv_tokens: int) -> Work:
    """proposer_s's passes as work on one GPU (none for an n-gram lookup, which runs on the CPU)."""
    if dep.spec is None or n_seqs == 0 or dep.method in ("ngram", "suffix"):
        return Work()
    k, tp, model = dep.k, dep.tp, dep.model
    if dep.method == "draft_model" and dep.draft is not None:
        return forward_work(dep.draft, dep.draft_tp, n_seqs, kv_tokens) * k
    if dep.method in ("medusa", "mlp_speculator"):
        nbytes = proposer_weight_bytes(dep) + k * model.lm_head_bytes
        return Work(nbytes / tp, 2.0 * nbytes / model.bytes_per_param / tp * n_seqs)
    nbytes = proposer_weight_bytes(dep) + model.lm_head_bytes
    one = Work((nbytes + kv_tokens * model.kv_bytes_per_token / model.layers) / tp,
               2.0 * nbytes / model.bytes_per_param / tp * n_seqs)
    return one * k


@dataclass(frozen=True)
class StepParts:
    """Where one engine step's time goes."""

    propose_s: float
    verify_s: float     # the target pass: weights, KV, linear layers, all-reduces
    sample_s: float     # the sampler and the rejection sampler
    overhead_s: float   # the engine's fixed cost per step

    @property
    def total_s(self) -> float:
        return self.propose_s + self.verify_s + self.sample_s + self.overhead_s


def step_parts(dep: Deployment, n_decode: int, decode_kv_tokens: int, prefill_tokens: int = 0,
               prefill_kv_tokens: int = 0, drafted: int | None = None, n_prefill: int = 0) -> StepParts:
    """One engine step: `n_decode` decoding sequences, of which `drafted` (default all) carry K
    drafts to verify (an n-gram proposer proposes nothing where it finds no match), plus this
    step's prefill chunks (`n_prefill` of them, `prefill_tokens` in all)."""
    drafted = n_decode if drafted is None else drafted
    tokens = n_decode + drafted * dep.k + prefill_tokens
    if tokens == 0:
        return StepParts(0.0, 0.0, 0.0, 0.0)
    hw, model = dep.hardware, dep.model
    verify = forward_s(hw, model, dep.tp, tokens, decode_kv_tokens + prefill_kv_tokens)
    scored = n_decode + drafted * dep.k + n_prefill   # positions whose logits are sampled
    sample = _mem_s(hw, scored * model.vocab * 4 * SAMPLER_PASSES)
    if dep.method in ("ngram", "suffix"):
        propose = NGRAM_PROPOSE_SHARE * verify
    else:
        propose = proposer_s(dep, n_decode, decode_kv_tokens)
    return StepParts(propose, verify, sample, hw.step_overhead_s)


def step_work(dep: Deployment, n_decode: int, decode_kv_tokens: int, prefill_tokens: int = 0,
              prefill_kv_tokens: int = 0, drafted: int | None = None, n_prefill: int = 0) -> Work:
    """step_parts' step as work on one GPU: the target pass, the sampler's logits, the proposer."""
    drafted = n_decode if drafted is None else drafted
    tokens = n_decode + drafted * dep.k + prefill_tokens
    if tokens == 0:
        return Work()
    model = dep.model
    verify = forward_work(model, dep.tp, tokens, decode_kv_tokens + prefill_kv_tokens)
    scored = n_decode + drafted * dep.k + n_prefill
    sample = Work(scored * model.vocab * 4 * SAMPLER_PASSES)
    return verify + sample + proposer_work(dep, n_decode, decode_kv_tokens)


def step_s(dep: Deployment, n_decode: int, decode_kv_tokens: int, prefill_tokens: int = 0,
           prefill_kv_tokens: int = 0, drafted: int | None = None, n_prefill: int = 0) -> float:
    """One engine step's time (step_parts, summed)."""
    return step_parts(dep, n_decode, decode_kv_tokens, prefill_tokens, prefill_kv_tokens, drafted,
                      n_prefill).total_s


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
