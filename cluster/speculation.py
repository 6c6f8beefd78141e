"""vLLM's `--speculative-config`: the keys it documents, and the checks it makes before serving.

One pydantic model, used by fleet files (each mode of a fleet is one, or the baseline) and by the
simulator's CLI (what it accepts), so both reject the same configs with vLLM's own words
(vllm/config/speculative.py).
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError, ValidationInfo, model_validator

# vLLM's SpeculativeMethod literals that this project knows how to model and launch.
Method = Literal["draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "ngram", "mtp", "suffix"]
METHODS: tuple[str, ...] = get_args(Method)
# Methods whose proposer is a separate network with its own weights.
NEEDS_MODEL = frozenset({"draft_model", "eagle", "eagle3", "medusa", "mlp_speculator"})
# Methods that take no model (ngram, suffix: the prompt is the proposer; mtp: the target's own heads).
MODEL_FREE = frozenset({"ngram", "suffix"})


class SpeculativeConfigError(ValueError):
    """Raised with the message vLLM gives for the same config."""


def method_from_model(model: str) -> str:
    """The method vLLM infers from a speculative model's name when none is given."""
    low = model.lower()
    if model in ("ngram", "[ngram]"):
        return "ngram"
    for name in ("medusa", "eagle3", "eagle"):
        if name in low:
            return name
    return "draft_model"


class SpeculativeFields(BaseModel):
    """The keys of --speculative-config this project reads (vLLM accepts more)."""

    model_config = ConfigDict(frozen=True)
    model: str | None = None
    num_speculative_tokens: int | None = None
    draft_tensor_parallel_size: int | None = None
    prompt_lookup_min: int | None = None
    prompt_lookup_max: int | None = None


class SpeculativeConfig(SpeculativeFields):
    """A checked --speculative-config. Validate with `context={"tensor_parallel_size": N}` (the
    target's), or use `parse_speculative_config`. Keys it does not read are ignored, as vLLM
    passes them on."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    method: Method
    num_speculative_tokens: int

    @model_validator(mode="before")
    @classmethod
    def _vllm_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            raise ValueError("--speculative-config must be a JSON object")
        data = dict(data)
        if data.get("method") is None:  # vLLM infers the method from the model name
            if not data.get("model"):
                raise ValueError("You must provide either a draft model or a method (e.g. 'ngram') in "
                                 "--speculative-config")
            data["method"] = method_from_model(data["model"])
        if data["method"] not in METHODS:
            allowed = ", ".join(repr(m) for m in METHODS)
            raise ValueError(f"method: Input should be {allowed} (got {data['method']!r})")
        k = data.get("num_speculative_tokens")
        if k is None:
            raise ValueError("num_speculative_tokens must be provided with speculative model unless the draft model "
                             "config contains an n_predict parameter.")
        if type(k) is not int or k <= 0:
            raise ValueError(f"Expected num_speculative_tokens to be greater than zero ({k}).")
        if data["method"] in MODEL_FREE:
            data["model"] = None
        if data["method"] == "ngram":  # either bound gives the other
            lo, hi = data.get("prompt_lookup_min"), data.get("prompt_lookup_max")
            data["prompt_lookup_min"] = lo if lo is not None else hi
            data["prompt_lookup_max"] = hi if hi is not None else lo
        return data

    @model_validator(mode="after")
    def _vllm_checks(self, info: ValidationInfo) -> SpeculativeConfig:
        if self.method in NEEDS_MODEL and not self.model:
            raise ValueError(f"method {self.method!r} needs a 'model' in --speculative-config (none given)")
        tp = (info.context or {}).get("tensor_parallel_size", 1)
        draft_tp = self.draft_tensor_parallel_size
        if draft_tp is not None and draft_tp not in (1, tp):
            raise ValueError(f"speculative_draft_tensor_parallel_size={draft_tp} cannot be other value than 1 or "
                             "target model tensor_parallel_size")
        if self.method == "ngram":
            lo, hi = self.prompt_lookup_min, self.prompt_lookup_max
            if lo is None:
                raise ValueError("Either prompt_lookup_max or prompt_lookup_min must be provided when using the "
                                 "ngram method.")
            if lo < 1:
                raise ValueError(f"prompt_lookup_min={lo} must be > 0")
            if hi < lo:
                raise ValueError(f"prompt_lookup_min={lo} must be <= prompt_lookup_max={hi}")
        return self

    def to_json(self) -> str:
        """The JSON string for `--speculative-config`, without unset keys, keys sorted."""
        return orjson.dumps(self.model_dump(exclude_none=True), option=orjson.OPT_SORT_KEYS).decode()


def parse_speculative_config(raw: str | dict[str, Any], tensor_parallel_size: int = 1) -> SpeculativeConfig:
    """Parse and check a `--speculative-config` value as vLLM would; SpeculativeConfigError with
    vLLM's words otherwise."""
    if isinstance(raw, str):
        try:
            raw = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise SpeculativeConfigError(f"--speculative-config is not valid JSON: {exc}") from None
    try:
        return SpeculativeConfig.model_validate(raw, context={"tensor_parallel_size": tensor_parallel_size})
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise SpeculativeConfigError(f"{where}: {msg}" if where and err["type"] != "value_error" else msg) from None
