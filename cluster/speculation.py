"""vLLM's `--speculative-config`: the keys it documents, and the checks it makes before serving.

Shared by the argv builder (what we pass to `vllm serve`) and the simulator (what it accepts), so
both reject the same configs with vLLM's own words (vllm/config/speculative.py).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import orjson

# vLLM's SpeculativeMethod literals that this project knows how to model and launch.
METHODS = ("draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "ngram", "mtp", "suffix")
# Methods whose proposer is a separate network with its own weights.
NEEDS_MODEL = frozenset({"draft_model", "eagle", "eagle3", "medusa", "mlp_speculator"})
# Keys of --speculative-config that we read; vLLM accepts more, which we pass through untouched.
KNOWN_KEYS = frozenset(
    {"method", "model", "num_speculative_tokens", "draft_tensor_parallel_size",
     "prompt_lookup_min", "prompt_lookup_max"}
)


class SpeculativeConfigError(ValueError):
    """Raised with the message vLLM gives for the same config."""


@dataclass(frozen=True)
class SpeculativeConfig:
    method: str
    num_speculative_tokens: int
    model: str | None = None
    draft_tensor_parallel_size: int | None = None
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None

    def to_json(self) -> str:
        """The JSON string for `--speculative-config`, without unset keys, keys sorted."""
        body = {k: v for k, v in asdict(self).items() if v is not None}
        return orjson.dumps(body, option=orjson.OPT_SORT_KEYS).decode()


def parse_speculative_config(raw: str | dict[str, Any], tensor_parallel_size: int = 1) -> SpeculativeConfig:
    """Parse and check a `--speculative-config` value as vLLM would."""
    if isinstance(raw, str):
        try:
            data = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise SpeculativeConfigError(f"--speculative-config is not valid JSON: {exc}") from None
    else:
        data = dict(raw)
    if not isinstance(data, dict):
        raise SpeculativeConfigError("--speculative-config must be a JSON object")
    method = data.get("method")
    model = data.get("model")
    if method is None:
        # vLLM infers the method from the model name when it is omitted.
        if model in ("ngram", "[ngram]"):
            method, model = "ngram", None
        elif model and "medusa" in model.lower():
            method = "medusa"
        elif model and "eagle3" in model.lower():
            method = "eagle3"
        elif model and "eagle" in model.lower():
            method = "eagle"
        elif model:
            method = "draft_model"
        else:
            raise SpeculativeConfigError(
                "You must provide either a draft model or a method (e.g. 'ngram') in --speculative-config"
            )
    if method not in METHODS:
        allowed = ", ".join(repr(m) for m in METHODS)
        raise SpeculativeConfigError(f"method: Input should be {allowed} (got {method!r})")
    k = data.get("num_speculative_tokens")
    if k is None:
        raise SpeculativeConfigError(
            "num_speculative_tokens must be provided with speculative model unless the draft model "
            "config contains an n_predict parameter."
        )
    if not isinstance(k, int) or k <= 0:
        raise SpeculativeConfigError(f"Expected num_speculative_tokens to be greater than zero ({k}).")
    if method in NEEDS_MODEL and not model:
        raise SpeculativeConfigError(f"method {method!r} needs a 'model' in --speculative-config (none given)")
    draft_tp = data.get("draft_tensor_parallel_size")
    if draft_tp is not None and draft_tp not in (1, tensor_parallel_size):
        raise SpeculativeConfigError(
            f"speculative_draft_tensor_parallel_size={draft_tp} cannot be other value than 1 or target "
            "model tensor_parallel_size"
        )
    lo, hi = data.get("prompt_lookup_min"), data.get("prompt_lookup_max")
    if method == "ngram":
        lo = lo if lo is not None else hi
        hi = hi if hi is not None else lo
        if lo is None:
            raise SpeculativeConfigError(
                "Either prompt_lookup_max or prompt_lookup_min must be provided when using the ngram method."
            )
        if lo < 1:
            raise SpeculativeConfigError(f"prompt_lookup_min={lo} must be > 0")
        if hi < lo:
            raise SpeculativeConfigError(f"prompt_lookup_min={lo} must be <= prompt_lookup_max={hi}")
    return SpeculativeConfig(
        method=method,
        num_speculative_tokens=k,
        model=model if method not in ("ngram", "suffix") else None,
        draft_tensor_parallel_size=draft_tp,
        prompt_lookup_min=lo,
        prompt_lookup_max=hi,
    )
