"""A fleet's own simulator profile: the hardware efficiencies and overheads, and the acceptance per
method and domain, that `loadtest calibrate` fitted to a measured run, as a TOML file.

Wherever a hardware profile is named (`loadtest sim --hardware`, a fleet's `[sim] hardware`,
`loadtest plan --hardware`), a path to such a file may stand instead of a built-in name:

    [hardware]
    base = "h100-sxm"               # the datasheet figures (memory, bandwidth, FLOP/s)
    compute_efficiency = 0.62       # any of cluster.sim.profiles.FITTABLE; the rest keep the defaults
    step_overhead_s = 0.0018

    [acceptance.eagle.summarize]    # per method and domain (or subdomain: a domain's stands for its
                                    # subdomains that have none); the rest keep the defaults
    positions = [0.61, 0.59, 0.57]
    spread = 0.34
    match = 1.0

A `[fit]` table records where the fit came from and its residuals; the simulator ignores it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from cluster.sim.acceptance import Acceptance, Table
from cluster.sim.domains import SUBDOMAINS
from cluster.sim.profiles import FITTABLE, HARDWARE, Hardware
from cluster.speculation import METHODS
from common.validation import file_state, shown_name


class ProfileError(ValueError):
    """A profile file that cannot be used: one line per problem, naming the key."""


class _ProfileModel(BaseModel):
    model_config = ConfigDict(extra="forbid")


_HardwareFields = create_model(
    "HardwareFields", __base__=_ProfileModel,
    base=(str, "h100-sxm"),
    **{name: (Annotated[float, Field(gt=0)] | None, None) for name in FITTABLE},
)


class _AcceptanceFields(_ProfileModel):
    positions: Annotated[list[Annotated[float, Field(ge=0, lt=1)]], Field(min_length=1)]
    spread: Annotated[float, Field(ge=0)] = 0.0
    match: Annotated[float, Field(ge=0, le=1)] = 1.0


class _ProfileFile(_ProfileModel):
    hardware: _HardwareFields = _HardwareFields()  # type: ignore[valid-type]
    acceptance: dict[str, dict[str, _AcceptanceFields]] = {}
    fit: dict[str, Any] = {}


@dataclass(frozen=True)
class SimProfile:
    hardware: Hardware
    acceptance: Table | None = None
    source: str = ""
    base: str = "h100-sxm"     # the built-in datasheet it starts from


def load_profile(path: str | Path) -> SimProfile:
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ProfileError(f"hardware profile {where!r} does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{where}: not a readable TOML profile: {exc}") from None
    try:
        parsed = _ProfileFile.model_validate(data)
    except ValidationError as exc:
        lines = [f"{where}: {'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ProfileError("\n".join(lines)) from None
    hw = parsed.hardware
    if hw.base not in HARDWARE:
        known = ", ".join(sorted(HARDWARE))
        raise ProfileError(f"{where}: hardware.base: {hw.base!r} is not a built-in profile ({known})")
    values = {name: getattr(hw, name) for name in FITTABLE if getattr(hw, name) is not None}
    hardware = HARDWARE[hw.base].with_fit(name=f"{hw.base} ({Path(path).name})", **values)
    table: Table = {}
    for method, domains in parsed.acceptance.items():
        if method not in METHODS:
            raise ProfileError(f"{where}: acceptance.{method}: not a speculative method ({', '.join(METHODS)})")
        for domain, acc in domains.items():
            if domain not in SUBDOMAINS:
                raise ProfileError(f"{where}: acceptance.{method}.{domain}: not a domain or subdomain "
                                   f"({', '.join(SUBDOMAINS)})")
            table.setdefault(method, {})[domain] = Acceptance(tuple(acc.positions), acc.spread, acc.match)
    return SimProfile(hardware, table or None, where, hw.base)


def resolve(name_or_path: str) -> SimProfile:
    """A built-in hardware name, or a profile file."""
    if name_or_path in HARDWARE:
        return SimProfile(HARDWARE[name_or_path], base=name_or_path)
    if not name_or_path.endswith(".toml") and file_state(Path(name_or_path)) != "file":
        raise ProfileError(f"{shown_name(name_or_path)}: not a simulator profile ({', '.join(sorted(HARDWARE))}) "
                           "nor a profile file (.toml, from `loadtest calibrate`)")
    return load_profile(name_or_path)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(float(value)) if isinstance(value, float) else str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_profile(base: str, hardware: dict[str, float], acceptance: Table, fit: dict[str, Any],
                   header: str = "") -> str:
    """The TOML text of a profile (what `loadtest calibrate --out` writes)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += ["[hardware]", f"base = {_toml_value(base)}"]
    lines += [f"{k} = {_toml_value(v)}" for k, v in hardware.items()]
    for method, domains in acceptance.items():
        for domain, acc in domains.items():
            lines += ["", f"[acceptance.{method}.{domain}]",
                      f"positions = {_toml_value([round(a, 4) for a in acc.positions])}",
                      f"spread = {_toml_value(round(acc.spread, 4))}", f"match = {_toml_value(round(acc.match, 4))}"]
    lines += ["", "[fit]"] + [f"{k} = {_toml_value(v)}" for k, v in fit.items()]
    return "\n".join(lines) + "\n"
