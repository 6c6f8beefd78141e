"""The simulator's GPU power model: what each simulated GPU draws, step by step, so a simulated
fleet has energy, power and utilisation figures on the same path a real one's come from
(dcgm-exporter's text: cluster/sim/gpu.py).

One GPU's energy over a step of `t` seconds is a static draw plus energy per byte read from HBM and
per FLOP, clipped at the board's power limit; between steps (a replica with nothing to run) it
draws the static power alone:

    E_step = P_ctx * t + e_B * bytes + e_F * FLOPs,      P_step = min(E_step / t, P_cap)

Bytes and FLOPs are the performance model's own accounting of the step (perf_model.step_work), so
prefill (FLOP-heavy) reaches the limit, small-batch decode (a weight read) sits near 450 W,
verification adds FLOPs, and a draft model's launch-bound passes draw little. Each constant says
where it comes from (docs/research/gpu-power-and-telemetry.md has the survey):

- P_cap: SOURCED, the board power limit on each GPU's datasheet.
- P_ctx: SOURCED, 110 W: an H100 with no CUDA context draws 75 W (splitwise-sim's
  configs/power_model/constant.yaml, by the Splitwise paper's first author), and a CUDA context with
  a model loaded adds 26-50 W on HBM GPUs (Vadari, "The Model Parking Tax", arXiv 2605.23918).
  The fit below cannot separate it from e_B, so it is not fitted.
- e_B and e_F: FITTED, by least squares, to the eleven per-GPU power figures of the ML.ENERGY
  Leaderboard v3.0 for Llama-3.3-70B-Instruct on 4 x H100 SXM at TP4 under vLLM 0.11.1 (LM Arena
  chat, batch 8 to 768; ml-energy/leaderboard @ 0cd52da, the model's lm-arena-chat JSON, its
  avg_power_watts over four GPUs), each batch's step simulated by the performance model at a mean
  context of ML_ENERGY_CONTEXT tokens. Figures never used in the fit are calibration.py's
  predicted rows: the same leaderboard's Llama-3.1-70B run, its J per output token column, and
  the prefill bound.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cluster.sim import perf_model
from cluster.sim.profiles import HARDWARE, MODELS

# Board power limits, W (each GPU's datasheet: H100 SXM5 "up to 700 W", H200 SXM 700 W,
# A100 80GB SXM 400 W). A calibrated profile of another GPU keeps the H100's.
POWER_LIMIT_W = {"h100-sxm": 700.0, "h200": 700.0, "a100-80gb": 400.0}
# Static draw of a GPU holding a loaded model, W (SOURCED above: 75 W bare + 26-50 W context).
CONTEXT_POWER_W = 110.0

# ML.ENERGY Leaderboard v3.0, Llama-3.3-70B-Instruct, 4 x H100 SXM, TP4, vLLM 0.11.1: (max_num_seqs,
# W per GPU = avg_power_watts / 4). The fit's data.
ML_ENERGY_70B_TP4 = ((8, 447.0), (16, 460.0), (32, 474.0), (64, 527.0), (96, 556.0), (128, 588.0),
                     (192, 615.0), (256, 630.0), (384, 628.0), (512, 623.0), (768, 637.0))
# Mean context per decoding sequence in those runs, tokens: an ASSUMPTION (LM Arena prompts are
# short; the outputs average 410 tokens); at 800 the fitted e_B and e_F move by under 2%.
ML_ENERGY_CONTEXT = 500
_FIT_MODEL = "meta-llama/Llama-3.3-70B-Instruct"


def _fit() -> tuple[float, float]:
    """(e_B in J per byte, e_F in J per FLOP): least squares of (P - P_ctx) * t = e_B * bytes +
    e_F * FLOPs over the ML.ENERGY points, each batch's step as the performance model has it."""
    dep = perf_model.Deployment(HARDWARE["h100-sxm"], MODELS[_FIT_MODEL], 4)
    rows, watts = [], []
    for batch, w in ML_ENERGY_70B_TP4:
        t = perf_model.step_s(dep, batch, batch * ML_ENERGY_CONTEXT)
        work = perf_model.step_work(dep, batch, batch * ML_ENERGY_CONTEXT)
        rows.append((work.hbm_bytes / t, work.flops / t))
        watts.append(w - CONTEXT_POWER_W)
    (per_byte, per_flop), *_ = np.linalg.lstsq(np.array(rows), np.array(watts), rcond=None)
    return float(per_byte), float(per_flop)


# FITTED (-> about 154 pJ per byte and 1.04 pJ per FLOP; the fit's rows are within 5.2%).
ENERGY_PER_BYTE_J, ENERGY_PER_FLOP_J = _fit()


@dataclass(frozen=True)
class PowerModel:
    """One GPU type's power: its limit, its static draw, and the energy of its work."""

    limit_w: float
    context_w: float = CONTEXT_POWER_W
    per_byte_j: float = ENERGY_PER_BYTE_J
    per_flop_j: float = ENERGY_PER_FLOP_J

    @classmethod
    def of(cls, hardware: perf_model.Hardware) -> PowerModel:
        return cls(POWER_LIMIT_W.get(hardware.name, POWER_LIMIT_W["h100-sxm"]))

    def step_joules(self, seconds: float, work: perf_model.Work) -> float:
        """One GPU's energy over a step of `seconds` doing `work`, at most the limit's."""
        if seconds <= 0:
            return 0.0
        joules = self.context_w * seconds + self.per_byte_j * work.hbm_bytes + self.per_flop_j * work.flops
        return min(joules, self.limit_w * seconds)

    def step_watts(self, seconds: float, work: perf_model.Work) -> float:
        return self.step_joules(seconds, work) / seconds if seconds > 0 else self.context_w


def decode_watts(dep: perf_model.Deployment, batch: int, context: int) -> float:
    """One GPU's power through a decode step of `batch` sequences of `context` tokens each."""
    t = perf_model.step_s(dep, batch, batch * context)
    return PowerModel.of(dep.hardware).step_watts(t, perf_model.step_work(dep, batch, batch * context))
