"""Fitting the simulator to a measured fleet (`loadtest calibrate RUN_OR_SWEEP --out PROFILE.toml`).

Reads every run folder under the argument (a run, a sweep's levels/, a capacity search's
probes/), fits the hardware efficiencies and the step overhead to the baseline's decode steps
against its batch and context, and the acceptance per speculative method and domain to each
request's acceptance histogram (cluster/sim/fitting.py), then writes a profile that
`loadtest sim --hardware`, a fleet's `[sim] hardware` and `loadtest plan --hardware` load, and
returns the fit and its residuals for the command to show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import ValidationError

from analysis.reader import read_requests
from analysis.server import load_server_metrics, spec_decode_stats
from cluster.fleet import FleetSpec
from cluster.sim.acceptance import SPREAD
from cluster.sim.acceptance import Table as AcceptanceTable
from cluster.sim.domains import classify_domain
from cluster.sim.fitting import (
    HardwareFit,
    Window,
    fit_acceptance,
    fit_acceptance_from_counters,
    fit_hardware,
    loads,
)
from cluster.sim.profiles import FITTABLE, HARDWARE, Hardware
from cluster.sim.sim_profile import render_profile, resolve
from loadtest.engine.plan import simulator_of
from loadtest.options.tools import CalibrateOptions

# Ray's accelerator_type of a vLLM fleet -> the datasheet a fit starts from.
ACCELERATORS = {"H100": "h100-sxm", "H200": "h200", "A100": "a100-80gb", "A100-80G": "a100-80gb"}


class CalibrateError(ValueError):
    pass


def run_folders(root: Path) -> list[Path]:
    """The run folders a result holds: itself, or its levels/ or probes/ (nested one deeper)."""
    if (root / "requests").is_dir():
        return [root]
    found = sorted(p.parent for p in root.glob("levels/*/requests"))
    found += sorted(p.parent for p in root.glob("probes/*/*/requests"))
    if not found:
        raise CalibrateError(f"{root}: no run here (no requests/ folder, nor levels/ or probes/ of runs)")
    return found


def _fleet(root: Path, folders: list[Path]) -> FleetSpec:
    for where in (root, *folders):
        path = where / "manifest.json"
        if path.is_file():
            fleet = json.loads(path.read_text()).get("fleet") or {}
            if "spec" in fleet:
                try:
                    return FleetSpec.model_validate(fleet["spec"])
                except ValidationError as exc:   # e.g. its [sim] hardware file is gone
                    problem = exc.errors()[0]
                    raise CalibrateError(f"{path}: the fleet it records no longer loads: "
                                         f"{'.'.join(str(p) for p in problem['loc'])}: {problem['msg']}") from None
    raise CalibrateError(f"{root}: no manifest.json with the fleet it ran on")


def request_domains(folder: Path) -> dict[str, str]:
    """Each request's domain as the simulator reads it: from its own text (the trace's label is
    the scenario's, which an imported trace does not have)."""
    path = folder / "trace.parquet"
    if not path.is_file():
        return {}
    t = pq.read_table(path, columns=["request_id", "prompt", "messages"])
    out = {}
    for rid, prompt, messages in zip(*(t[c].to_pylist() for c in ("request_id", "prompt", "messages")), strict=True):
        text = prompt or ""
        if not text and messages:
            try:
                text = "\n".join(str(m.get("content", "")) for m in json.loads(messages) if isinstance(m, dict))
            except (ValueError, AttributeError):
                text = ""
        out[rid] = classify_domain(text)
    return out


def _windows(rows: list[dict], scale: float) -> dict[str, list[Window]]:
    """Per replica, each ok request's chunks in the simulator's own seconds (`scale`: the sim's
    time_scale; 1 for a real fleet). Without running usage the tokens are spread evenly."""
    out: dict[str, list[Window]] = {}
    for r in rows:
        itl = r["itl_ms"]
        if r["sent_ns"] is None or not itl:
            continue
        times = (r["sent_ns"] / 1e9 + np.cumsum(np.asarray(itl, dtype=np.float64)) / 1e3) / scale
        tokens = np.asarray(r["chunk_tokens"] or [], dtype=np.float64)
        if len(tokens) != len(times):
            tokens = np.full(len(times), (r["completion_tokens"] or len(times)) / len(times))
        out.setdefault(r["replica"] or "", []).append(
            Window(times, tokens, int(r["prompt_tokens"] or 0), r["sent_ns"] / 1e9 / scale))
    return out


@dataclass
class Calibration:
    """What a calibration fitted and where it wrote the profile."""

    prior: Hardware                            # the hardware constants the fit started from
    hardware: HardwareFit
    acceptance: list[tuple[str, str, object]]  # (mode, domain, an AcceptanceFit or why there is none)
    out: Path


def calibrate(args: CalibrateOptions) -> Calibration:
    """Fit the simulator to the run folders under --result and write the profile to --out;
    CalibrateError (or FleetError, ProfileError) on input that cannot be fitted."""
    root = Path(args.result or "")
    if not root.is_dir():
        raise CalibrateError(f"{root}: not a folder (give a run, sweep or capacity folder)")
    folders = run_folders(root)
    fleet = _fleet(root, folders)
    base = args.hardware or (fleet.sim.hardware if fleet.engine == "sim" and fleet.sim.hardware in HARDWARE
                             else ACCELERATORS.get(fleet.accelerator_type or "", "h100-sxm"))
    prior = resolve(base)
    scale = fleet.sim.time_scale if fleet.engine == "sim" else 1.0
    baseline = args.mode or next((m for m, spec in fleet.modes.items() if spec.method == "none"), None)
    if baseline is None or baseline not in fleet.modes:
        raise CalibrateError(f"no baseline mode to fit the hardware to (fleet modes: {', '.join(fleet.modes)}); "
                             "name one with --mode")
    dep = simulator_of(fleet, baseline, base).engine.dep
    observed = []
    spec_rows: dict[str, list[tuple[dict, str]]] = {}
    for folder in folders:
        records = read_requests(folder)
        ok = records.filter(pc.equal(records["status"], "ok"))
        domains = request_domains(folder)
        for mode in fleet.modes:
            rows = ok.filter(pc.equal(ok["mode"], mode)).to_pylist()
            if mode == baseline:
                for windows in _windows(rows, scale).values():
                    observed += loads(windows)
            elif fleet.modes[mode].method != "none":
                spec_rows.setdefault(mode, []).extend((r, domains.get(r["request_id"], "chat")) for r in rows)
    if len(observed) < 5:
        raise CalibrateError(f"{root}: {len(observed)} baseline requests with enough decode steps to fit (need 5)")
    hw_fit = fit_hardware(dep, observed)
    table, acc_report = _fit_acceptance(fleet, spec_rows, folders)
    header = (f"Fitted by `loadtest calibrate {root}` to {hw_fit.requests} baseline requests of fleet {fleet.name} "
              f"({fleet.model}, TP{fleet.tensor_parallel_size}).\nLoad it with `loadtest sim --hardware FILE`, "
              "a fleet's [sim] hardware = \"FILE\", or `loadtest plan --hardware FILE`.")
    fit_info = {"source": str(root), "fleet": fleet.name, "model": fleet.model, "baseline_requests": hw_fit.requests,
                "step_residual_rms_pct": round(hw_fit.residual_pct, 3), "held": list(hw_fit.held)}
    values = {k: v for k, v in hw_fit.values.items() if k not in hw_fit.held}
    # what the prior set and the fit did not touch goes on (a prior profile file's own values)
    datasheet = HARDWARE[prior.base]
    values |= {k: getattr(prior.hardware, k) for k in FITTABLE
               if k not in values and getattr(prior.hardware, k) != getattr(datasheet, k)}
    merged: AcceptanceTable = {m: dict(d) for m, d in (prior.acceptance or {}).items()}
    for method, domains in table.items():
        merged.setdefault(method, {}).update(domains)
    out = Path(args.out or "")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_profile(prior.base, values, merged, fit_info, header), encoding="utf-8")
    resolve(str(out))      # what was written loads
    return Calibration(prior.hardware, hw_fit, acc_report, out)


def _fit_acceptance(fleet: FleetSpec, spec_rows: dict[str, list[tuple[dict, str]]], folders: list[Path]
                    ) -> tuple[AcceptanceTable, list[tuple[str, str, object]]]:
    """Per speculative mode's method and domain: from each request's acceptance histogram, or,
    where the server sent none, from its /metrics per-position counters and the client's tokens
    per step."""
    table: AcceptanceTable = {}
    report = []
    for mode, rows in spec_rows.items():
        method = fleet.modes[mode].method
        if method in table:
            report.append((mode, "-", f"method {method} already fitted from another mode; skipped"))
            continue
        counters = None
        for domain in sorted({d for _, d in rows}):
            mine = [r for r, d in rows if d == domain]
            steps = np.array([max(int(r["n_chunks"] or 0) - 1, 0) for r in mine])
            tokens = np.array([max(int(r["completion_tokens"] or 0) - 1, 0) for r in mine])
            width = next((len(h) for r, _ in rows if (h := r.get("spec_acceptance_histogram"))), 0)
            if not steps.sum():
                report.append((mode, domain, "no decode steps (every reply was one token)"))
                continue
            if width:   # the server reports each request's; a request that drafted on no step gets none
                hist = np.array([r.get("spec_acceptance_histogram") or [0] * width for r in mine], dtype=np.float64)
                fit = fit_acceptance(hist, steps, tokens)
            else:
                counters = counters or _counters(mode, folders, spec_rows[mode])
                if counters is None:
                    report.append((mode, domain, "no per-request acceptance and no /metrics counters to fit"))
                    continue
                per_position, match = counters
                fit = fit_acceptance_from_counters(per_position, match, float(tokens.sum() / steps.sum()),
                                                   SPREAD.get(method, 0.0))
            table.setdefault(method, {})[domain] = fit.acceptance
            report.append((mode, domain, fit))
    return table, report


def _counters(mode: str, folders: list[Path], rows: list[tuple[dict, str]]) -> tuple[list[float], float] | None:
    """The mode's per-position acceptance over every folder's scraped /metrics, and the share of
    its decode steps that verified drafts."""
    drafts, per_pos = 0.0, None
    for folder in folders:
        metrics = load_server_metrics(folder)
        stats = spec_decode_stats(metrics, mode) if metrics is not None else None
        if stats is None:
            continue
        weighted = np.asarray(stats.per_position) * stats.drafts
        per_pos = weighted if per_pos is None else per_pos + weighted
        drafts += stats.drafts
    steps = sum(max(int(r["n_chunks"] or 0) - 1, 0) for r, _ in rows)
    if per_pos is None or not drafts or not steps:
        return None
    return (per_pos / drafts).tolist(), min(1.0, drafts / steps)


