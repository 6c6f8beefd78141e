"""Scenario files (TOML), validated by pydantic so every error names its key path."""

from __future__ import annotations

import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    ConfigDict,
    Field,
    PositiveFloat,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from common.strict import Strict
from common.validation import MAX_SEED, file_problem, file_state, not_utf8, problems, shown_name
from scenarios import ScenarioError
from scenarios.corpus import CORPORA, items_of
from scenarios.prompts import custom_prompts, language_problem, languages
from scenarios.textfile import read_lengths, read_utf8

SHARE_TOLERANCE = 1e-6


MAX_TOKENS = 2**31 - 1     # a token count as a trace stores it (int32)
MAX_SIGMA = 10.0           # a lognormal's spread: past it the mean sits e^50 above the median, no length at all
Tokens = Annotated[int, Field(ge=1, le=MAX_TOKENS)]


class _Bounded(Strict):
    min: Tokens = 1
    max: Tokens = 131072

    @model_validator(mode="after")
    def _bounds(self):
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


def _resolve(path: str, info: ValidationInfo) -> str:
    """A file named in a scenario, relative to the scenario file; it must exist."""
    base = Path((info.context or {}).get("base", "."))
    full = (base / path).resolve()
    if not full.is_file():
        raise ValueError(f"file {path!r} does not exist (looked for {full})")
    return str(full)


class Fixed(Strict):
    dist: Literal["fixed"]
    value: Tokens


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
    sigma: Annotated[float, Field(gt=0, le=MAX_SIGMA)]


class Empirical(_Bounded):
    """Draws from a list of observed lengths, given inline (`values`) or as a file of one integer
    per line (`file`, relative to the scenario)."""

    dist: Literal["empirical"]
    values: list[Tokens] | None = None
    file: str | None = None

    @field_validator("file")
    @classmethod
    def _file(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return None
        path = _resolve(v, info)
        read_lengths(path)  # every line a positive integer
        return path

    @model_validator(mode="after")
    def _source(self):
        if (self.values is None) == (self.file is None):
            raise ValueError("empirical needs exactly one of values (a list) or file (one length per line)")
        if self.values is not None and not self.values:
            raise ValueError("empirical values is empty")
        return self

    def observed(self) -> list[int]:
        return self.values if self.values is not None else read_lengths(self.file)


Distribution = Annotated[Fixed | Uniform | Normal | LogNormal | Empirical, Field(discriminator="dist")]


class Slo(Strict):
    ttft_p99_ms: PositiveFloat | None = None
    tpot_p99_ms: PositiveFloat | None = None
    e2e_p99_ms: PositiveFloat | None = None


# ---- arrival processes ------------------------------------------------------------------------
class Poisson(Strict):
    """Independent arrivals at `rate` per second: exponential gaps, CV 1."""

    process: Literal["poisson"]
    rate: PositiveFloat


class Constant(Strict):
    """Evenly spaced arrivals at `rate` per second: CV 0."""

    process: Literal["constant"]
    rate: PositiveFloat


class Gamma(Strict):
    """Gamma-distributed gaps with mean 1/rate and coefficient of variation `cv` (>1: bursty)."""

    process: Literal["gamma"]
    rate: PositiveFloat
    cv: PositiveFloat


class Ramp(Strict):
    """Poisson arrivals whose rate moves linearly from `from` to `to` over `over` seconds, then
    stays at `to`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)
    process: Literal["ramp"]
    from_rate: Annotated[float, Field(alias="from", ge=0)]
    to_rate: Annotated[float, Field(alias="to", ge=0)]
    over: PositiveFloat

    @model_validator(mode="after")
    def _some_rate(self):
        if self.from_rate == 0 and self.to_rate == 0:
            raise ValueError("ramp needs from or to above 0")
        return self


class Step(Strict):
    rate: Annotated[float, Field(ge=0)]
    duration: PositiveFloat


class Steps(Strict):
    """Poisson arrivals at a piecewise-constant rate; the list of steps repeats."""

    process: Literal["steps"]
    steps: Annotated[list[Step], Field(min_length=1)]

    @model_validator(mode="after")
    def _some_rate(self):
        if not any(s.rate > 0 for s in self.steps):
            raise ValueError("steps needs at least one step with rate above 0")
        return self


class Diurnal(Strict):
    """Poisson arrivals at mean x (1 + amplitude x sin(2 pi t / period)): a day in `period` s."""

    process: Literal["diurnal"]
    mean: PositiveFloat
    amplitude: Annotated[float, Field(ge=0, le=1)]
    period: PositiveFloat


class OnOff(Strict):
    """Bursts: Poisson at `rate` for `on` seconds, then silence for `off` seconds, repeating."""

    process: Literal["onoff"]
    rate: PositiveFloat
    on: PositiveFloat
    off: PositiveFloat


class Closed(Strict):
    """Closed loop: `concurrency` requests always in flight, the next sent as one finishes."""

    process: Literal["closed"]
    concurrency: Annotated[int, Field(ge=1)]


OpenArrival = Annotated[Poisson | Constant | Gamma | Ramp | Steps | Diurnal | OnOff, Field(discriminator="process")]
Arrival = Annotated[Poisson | Constant | Gamma | Ramp | Steps | Diurnal | OnOff | Closed,
                    Field(discriminator="process")]


class Tenant(Strict):
    share: Annotated[float, Field(gt=0, le=1)] | None = None
    arrival: OpenArrival | None = None      # a tenant with its own arrival process takes no share
    domain: Literal["chat", "code", "sql", "summarize", "structured", "custom"]
    language: list[str] | None = None     # code: languages with text (prompts.languages: content/code/, code corpora)
    document: str | None = None             # summarize: the document to summarise (a text file)
    prompts_file: str | None = None         # custom: prompts, one per line (text) or JSONL {"prompt": ...}
    prompts: str | list[str] | None = None  # corpora the project ships (scenarios/corpus.py): their items as prompts
    api: Literal["completions", "chat"] = "chat"
    prompt_tokens: Distribution | None = None   # required, except for custom (the file's prompts)
    output_tokens: Distribution
    temperature: Annotated[float, Field(ge=0, le=2)] = 0.0
    ignore_eos: bool = False
    system: str | None = None
    slo: Slo = Slo()
    # a corpus of conversations (mt-bench): send each item's later turns too, each `think_s` seconds
    # after the answer to the turn before it, carrying that answer (loadtest/replay/conversations.py)
    conversation: bool = False
    think_s: Annotated[float, Field(ge=0, le=86400)] = 0.0

    @field_validator("document", "prompts_file")
    @classmethod
    def _file(cls, v: str | None, info: ValidationInfo) -> str | None:
        if v is None:
            return None
        path = _resolve(v, info)
        if info.field_name == "prompts_file":
            custom_prompts(path)  # UTF-8, and a prompt on every line
        elif not read_utf8(path).strip():
            raise ValueError(f"{path}: the document is empty")
        return path

    @field_validator("language")
    @classmethod
    def _languages(cls, v: list[str] | None) -> list[str] | None:
        for language in v or ():
            if (problem := language_problem(language)) is not None:
                raise ValueError(problem)
        return v

    @field_validator("prompts")
    @classmethod
    def _corpus(cls, v: str | list[str] | None) -> str | list[str] | None:
        for name in [v] if isinstance(v, str) else v or ():
            if name not in CORPORA:
                raise ValueError(f"no corpus {name!r} (the project ships: {', '.join(CORPORA)})")
        if v is not None and not v:
            raise ValueError("prompts: name at least one corpus")
        return v

    @property
    def corpora(self) -> tuple[str, ...]:
        """The corpora its prompts are drawn from (none: it writes its own)."""
        return (self.prompts,) if isinstance(self.prompts, str) else tuple(self.prompts or ())

    @model_validator(mode="after")
    def _shape(self):
        if self.corpora:
            shown = self.prompts if isinstance(self.prompts, str) else ", ".join(self.corpora)
            for name in self.corpora:
                corpus = CORPORA[name]
                if self.domain != corpus.domain:
                    raise ValueError(f"prompts {name!r} are {corpus.domain} prompts: set domain = "
                                     f"{corpus.domain!r} (domain is {self.domain!r})")
            if self.language is not None and self.language != self.language_list:
                raise ValueError(f"prompts {shown!r} are {', '.join(map(str, self.language_list or []))}: leave "
                                 f"language out or set language = {self.language_list!r}")
            if self.prompts_file or self.document:
                raise ValueError("prompts (a corpus) and prompts_file or document: give one source of prompts")
            if self.conversation and not any(item.turns for item in items_of(self.corpora)):
                raise ValueError(f"conversation: the items of {shown!r} have one turn each (mt-bench has two)")
            if self.conversation and self.api != "chat":
                raise ValueError("conversation: a conversation's later turns need api = \"chat\"")
            return self._arrival_shape()
        if self.conversation:
            raise ValueError("conversation: only for a corpus of conversations (prompts = \"mt-bench\")")
        if (self.share is None) == (self.arrival is None):
            raise ValueError("a tenant needs exactly one of share (of the scenario's arrivals) or arrival (its own)")
        if self.domain == "code" and not self.language:
            raise ValueError(f"domain 'code' needs a language list, e.g. language = [\"rust\", \"cpp\"] "
                             f"(known: {', '.join(languages())})")
        if self.domain != "code" and self.language:
            raise ValueError(f"language is only for domain 'code' (domain is {self.domain!r})")
        if self.domain == "custom" and not self.prompts_file:
            raise ValueError("domain 'custom' needs prompts_file")
        if self.domain != "custom" and self.prompt_tokens is None:
            raise ValueError("prompt_tokens is required (a length distribution)")
        if self.prompts_file and self.domain != "custom":
            raise ValueError(f"prompts_file is only for domain 'custom' (domain is {self.domain!r})")
        if self.document and self.domain != "summarize":
            raise ValueError(f"document is only for domain 'summarize' (domain is {self.domain!r})")
        return self

    def _arrival_shape(self):
        if (self.share is None) == (self.arrival is None):
            raise ValueError("a tenant needs exactly one of share (of the scenario's arrivals) or arrival (its own)")
        return self

    @property
    def language_list(self) -> list[str] | None:
        """The languages its code prompts are in: its corpora's, or its own list."""
        found = list(dict.fromkeys(CORPORA[c].language for c in self.corpora if CORPORA[c].language))
        return found or (None if self.corpora else self.language)


def shares_problem(shares: list) -> str | None:
    """Why the tenants' shares (the numbers among them) do not sum to 1; None when they do."""
    numbers = [x for x in shares if isinstance(x, int | float) and not isinstance(x, bool)]
    total = sum(numbers)
    if numbers and not math.isclose(total, 1.0, abs_tol=SHARE_TOLERANCE):
        return f"tenant shares must sum to 1, they sum to {total:g}"
    return None


class Scenario(Strict):
    name: str
    description: str = ""
    requests: Annotated[int, Field(ge=1)] | None = None
    duration: PositiveFloat | None = None       # seconds of traffic, instead of a request count
    demo_requests: Annotated[int, Field(ge=1)] = 100
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0
    rate_scale: PositiveFloat = 1.0
    arrival: Arrival | None = None
    tenants: Annotated[dict[str, Tenant], Field(min_length=1)]

    @model_validator(mode="after")
    def _consistent(self):
        if (self.requests is None) == (self.duration is None):
            raise ValueError("give exactly one of requests (a count) or duration (seconds)")
        shared = {n: t for n, t in self.tenants.items() if t.share is not None}
        if shared and self.arrival is None:
            raise ValueError(f"tenant {next(iter(shared))!r} takes a share, but the scenario has no arrival process")
        if self.arrival is not None and not shared:
            raise ValueError("the scenario's arrival process has no tenant taking a share of it")
        problem = shares_problem([t.share for t in shared.values()])
        if problem:
            raise ValueError(problem)
        if isinstance(self.arrival, Closed):
            if len(shared) != len(self.tenants):
                raise ValueError("a closed-loop scenario cannot mix in tenants with their own arrival process")
            if self.duration is not None:
                raise ValueError("a closed-loop scenario needs requests, not duration")
        return self

    def with_overrides(self, requests: int | None = None, duration: float | None = None,
                       seed: int | None = None, rate_scale: float | None = None) -> Scenario:
        """The same scenario with CLI overrides applied (a count replaces a duration and back)."""
        upd: dict = {}
        if requests is not None:
            upd |= {"requests": requests, "duration": None}
        if duration is not None:
            upd |= {"duration": duration, "requests": None}
        if seed is not None:
            upd["seed"] = seed
        if rate_scale is not None:
            upd["rate_scale"] = rate_scale
        return self.model_copy(update=upd)


BUILTIN = resources.files("scenarios") / "builtin"


def builtin_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in BUILTIN.iterdir() if p.name.endswith(".toml"))


def load_scenario(name_or_path: str | Path) -> tuple[Scenario, bytes]:
    """Load a built-in scenario by name or a TOML file by path; return it with its raw bytes
    (whose hash identifies it in results). Raise ScenarioError with one line per problem, each
    naming the key as the file spells it."""
    text = str(name_or_path)
    path = Path(text)
    state = file_state(path)
    if path.suffix == ".toml" or state != "missing" or "/" in text:
        if state != "file":
            raise ScenarioError(f"scenario file {shown_name(text)} {file_problem(state)}")
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
    except UnicodeDecodeError as exc:
        raise ScenarioError(not_utf8(raw, exc, where)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{where}: not valid TOML: {exc}") from None
    base = Path(where).parent if Path(where).is_file() else Path(str(BUILTIN))
    try:
        return Scenario.model_validate(data, context={"base": base}), raw
    except ValidationError as exc:
        lines = problems(exc, data, where)
        # the cross-field check, said with the field errors that stop the model from reaching it
        tenants = data.get("tenants") if isinstance(data.get("tenants"), dict) else {}
        given = [t["share"] for t in tenants.values() if isinstance(t, dict) and "share" in t]
        valid = all(isinstance(x, int | float) and not isinstance(x, bool) and 0 < x <= 1 for x in given)
        shares = shares_problem(given) if valid else None   # a share out of bounds is said by its own line
        if shares and not any(shares in line for line in lines):
            lines.append(f"{where}: (top level): {shares}")
        raise ScenarioError("\n".join(lines)) from None


def eos_notes(scenario: Scenario) -> list[str]:
    """A line for each tenant of real prompts (a corpus, a prompts file) that sets ignore_eos: its
    answers run past where the model would stop, so the acceptance measured on them is partly of
    text after the answer's end, not the content's own (the default, ignore_eos = false, measures
    the content)."""
    notes = []
    for name, t in scenario.tenants.items():
        real = t.prompts if isinstance(t.prompts, str) else ", ".join(t.prompts or ()) or t.prompts_file
        if t.ignore_eos and real:
            notes.append(f"tenant {name}: ignore_eos = true with real prompts ({Path(real).name}): each answer runs "
                         "past where the model would stop, so its acceptance is partly measured on text after the "
                         "answer's end; leave ignore_eos out (false) to measure the content's")
    return notes
