"""Fleet files (TOML): what to serve, on what, and one entry per speculation mode."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cluster import FleetError
from cluster.speculation import SpeculativeConfig, SpeculativeConfigError, parse_speculative_config


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModeSpec(_Strict):
    """One speculation mode: `method = "none"` is the baseline."""

    method: Literal["none", "draft_model", "eagle", "eagle3", "medusa", "mlp_speculator", "ngram", "mtp", "suffix"]
    model: str | None = None
    num_speculative_tokens: Annotated[int, Field(ge=1)] | None = None
    draft_tensor_parallel_size: Annotated[int, Field(ge=1)] | None = None
    prompt_lookup_min: Annotated[int, Field(ge=1)] | None = None
    prompt_lookup_max: Annotated[int, Field(ge=1)] | None = None

    @model_validator(mode="after")
    def _shape(self):
        if self.method == "none" and (self.model or self.num_speculative_tokens):
            raise ValueError("method 'none' (baseline) takes no model or num_speculative_tokens")
        if self.method != "none" and self.num_speculative_tokens is None:
            raise ValueError(f"method {self.method!r} needs num_speculative_tokens")
        return self


class SimOptions(_Strict):
    hardware: Literal["h100-sxm", "h200", "a100-80gb"] = "h100-sxm"
    time_scale: Annotated[float, Field(gt=0)] = 1.0
    seed: int = 0


class FleetSpec(_Strict):
    name: str
    description: str = ""
    engine: Literal["sim", "vllm"]
    model: str
    accelerator_type: str | None = "H100"   # Ray's accelerator_type resource, for engine = vllm
    tensor_parallel_size: Annotated[int, Field(ge=1)] = 1
    replicas: Annotated[int, Field(ge=1)] = 1
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.9
    max_num_seqs: Annotated[int, Field(ge=1)] = 256
    cpus_per_replica: Annotated[float, Field(gt=0)] = 1.0
    bind_host: str = "127.0.0.1"
    startup_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    extra_args: list[str] = []
    env: dict[str, str] = {}
    sim: SimOptions = SimOptions()
    modes: Annotated[dict[str, ModeSpec], Field(min_length=1)]

    @model_validator(mode="after")
    def _speculation(self):
        for name, _mode in self.modes.items():
            try:
                self.speculative_config(name)
            except SpeculativeConfigError as exc:
                raise ValueError(f"modes.{name}: {exc}") from None
        return self

    def speculative_config(self, mode: str) -> SpeculativeConfig | None:
        m = self.modes[mode]
        if m.method == "none":
            return None
        raw = m.model_dump(exclude_none=True)
        return parse_speculative_config(raw, self.tensor_parallel_size)

    def served_model_name(self, mode: str) -> str:
        """Unique per mode, so a request sent to the wrong fleet fails loudly."""
        return f"{self.model.rstrip('/').split('/')[-1]}-{mode}"


BUILTIN = resources.files("cluster") / "fleets"


def builtin_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in BUILTIN.iterdir() if p.name.endswith(".toml"))


def load_fleet(name_or_path: str | Path) -> tuple[FleetSpec, bytes]:
    text = str(name_or_path)
    path = Path(text)
    if path.suffix == ".toml" or path.exists() or "/" in text:
        if not path.is_file():
            raise FleetError(f"fleet file {text!r} does not exist")
        raw, where = path.read_bytes(), text
    else:
        res = BUILTIN / f"{text}.toml"
        if not res.is_file():
            raise FleetError(f"no built-in fleet {text!r} (built-in: {', '.join(builtin_names())}), and no such file")
        raw, where = res.read_bytes(), f"{text}.toml"
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FleetError(f"{where}: not valid TOML: {exc}") from None
    try:
        return FleetSpec.model_validate(data), raw
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key (a typo?)"
        elif err["type"] == "missing":
            msg = "required key is missing"
        raise FleetError(f"{where}: {loc}: {msg}") from None
