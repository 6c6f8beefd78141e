"""Scenario files (TOML), validated by pydantic so every error names its key path."""

from __future__ import annotations

import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, model_validator

from scenarios import ScenarioError

SHARE_TOLERANCE = 1e-6


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Bounded(_Strict):
    min: Annotated[int, Field(ge=1)] = 1
    max: Annotated[int, Field(ge=1)] = 131072

    @model_validator(mode="after")
    def _bounds(self):
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


class Fixed(_Strict):
    dist: Literal["fixed"]
    value: Annotated[int, Field(ge=1)]


class Uniform(_Bounded):
    dist: Literal["uniform"]


class Normal(_Bounded):
    dist: Literal["normal"]
    mean: PositiveFloat
    std: Annotated[float, Field(ge=0)]


class LogNormal(_Bounded):
    """Parameterised by the distribution's mean (in tokens) and the std-dev of its logarithm."""

    dist: Literal["lognormal"]
    mean: PositiveFloat
    sigma: Annotated[float, Field(gt=0)]


class Empirical(_Bounded):
    dist: Literal["empirical"]
    values: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=1)]


Distribution = Annotated[Fixed | Uniform | Normal | LogNormal | Empirical, Field(discriminator="dist")]


class Slo(_Strict):
    ttft_p99_ms: PositiveFloat | None = None
    tpot_p99_ms: PositiveFloat | None = None
    e2e_p99_ms: PositiveFloat | None = None


class Tenant(_Strict):
    share: Annotated[float, Field(gt=0, le=1)]
    domain: Literal["chat", "code", "sql", "summarize", "structured"]
    language: list[Literal["rust", "cpp", "python"]] | None = None
    api: Literal["completions", "chat"] = "chat"
    prompt_tokens: Distribution
    output_tokens: Distribution
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    ignore_eos: bool = False
    system: str | None = None
    slo: Slo = Slo()

    @model_validator(mode="after")
    def _language(self):
        if self.domain == "code" and not self.language:
            raise ValueError("domain 'code' needs a language list, e.g. language = [\"rust\", \"cpp\"]")
        if self.domain != "code" and self.language:
            raise ValueError(f"language is only for domain 'code' (domain is {self.domain!r})")
        return self


class Poisson(_Strict):
    process: Literal["poisson"]
    rate: PositiveFloat


class Constant(_Strict):
    process: Literal["constant"]
    rate: PositiveFloat


class Gamma(_Strict):
    process: Literal["gamma"]
    rate: PositiveFloat
    cv: PositiveFloat


Arrival = Annotated[Poisson | Constant | Gamma, Field(discriminator="process")]


class Scenario(_Strict):
    name: str
    description: str = ""
    requests: Annotated[int, Field(ge=1)]
    demo_requests: Annotated[int, Field(ge=1)] = 100
    seed: int = 0
    rate_scale: PositiveFloat = 1.0
    arrival: Arrival
    tenants: Annotated[dict[str, Tenant], Field(min_length=1)]

    @model_validator(mode="after")
    def _shares(self):
        total = sum(t.share for t in self.tenants.values())
        if not math.isclose(total, 1.0, abs_tol=SHARE_TOLERANCE):
            raise ValueError(f"tenant shares must sum to 1, they sum to {total:g}")
        return self


BUILTIN = resources.files("scenarios") / "builtin"


def builtin_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in BUILTIN.iterdir() if p.name.endswith(".toml"))


def _format(err: dict, where: str) -> str:
    loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith(("function-after", "tagged-union")))
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key (a typo?)"
    elif err["type"] == "missing":
        msg = "required key is missing"
    return f"{where}: {loc or '(top level)'}: {msg}"


def load_scenario(name_or_path: str | Path) -> tuple[Scenario, bytes]:
    """Load a built-in scenario by name or a TOML file by path; return it with its raw bytes
    (whose hash identifies it in results). Raise ScenarioError with one line on any problem."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix == ".toml" or path.exists() or "/" in text:
        if not path.is_file():
            raise ScenarioError(f"scenario file {text!r} does not exist")
        raw, where = path.read_bytes(), text
    else:
        res = BUILTIN / f"{text}.toml"
        if not res.is_file():
            raise ScenarioError(
                f"no built-in scenario {text!r} (built-in: {', '.join(builtin_names())}), and no such file"
            )
        raw, where = res.read_bytes(), f"{text}.toml"
    try:
        data = tomllib.loads(raw.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(f"{where}: not valid TOML: {exc}") from None
    try:
        return Scenario.model_validate(data), raw
    except ValidationError as exc:
        raise ScenarioError(_format(exc.errors()[0], where)) from None
