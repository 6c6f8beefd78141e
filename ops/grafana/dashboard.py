"""Writes loadtest-dashboard.json beside this file: the client's view (loadtest_*) beside vLLM's
own metrics (vllm:*), one repeated row per mode, then one row of what each mode's GPUs cost
(dcgm-exporter's DCGM_FI_DEV_*, ops/prometheus.yml's dcgm jobs), the modes side by side. Edit the
panels here and run `python ops/grafana/dashboard.py`; tests/test_prometheus.py checks that the
JSON is this file's output, that promtool parses every query, and that a real Prometheus holds
every metric they name and answers every query."""

from __future__ import annotations

import json
from pathlib import Path

CLIENT = 'run=~"$run",mode="$mode"'   # the client's series carry run, level, mode and tenant
SERVER = 'run=~"$run",mode="$mode"'   # a replica's: the labels its targets file gives it
GPU = 'run=~"$run",mode=~"$mode"'     # a replica's GPUs (its labels too), every mode chosen side by side
DS = {"type": "prometheus", "uid": "${datasource}"}


def rate(name: str, sel: str, by: str = "") -> str:
    return f"sum{f' by ({by})' if by else ''} (rate({name}{{{sel}}}[$__rate_interval]))"


def quantile(q: float, name: str, sel: str, by: str = "le") -> str:
    return f"histogram_quantile({q}, {rate(name + '_bucket', sel, by)})"


def p50_p99(name: str, sel: str, who: str) -> list[tuple[str, str]]:
    return [(quantile(0.5, name, sel), f"{who} p50"), (quantile(0.99, name, sel), f"{who} p99")]


PANELS: list[tuple[str, str, list[tuple[str, str]]]] = [
    ("Requests by status (req/s)", "reqps", [
        (rate("loadtest_requests_total", CLIENT, "status"), "client {{status}}"),
        (rate("vllm:request_success_total", SERVER), "server finished")]),
    ("TTFT: client beside server", "s",
     [*p50_p99("loadtest_ttft_seconds", CLIENT, "client"),
      *p50_p99("vllm:time_to_first_token_seconds", SERVER, "server")]),
    ("ITL: client chunks beside server steps", "s",
     p50_p99("loadtest_itl_seconds", CLIENT, "client") + p50_p99("vllm:inter_token_latency_seconds", SERVER, "server")),
    ("TPOT (client)", "s", p50_p99("loadtest_tpot_seconds", CLIENT, "client")),
    ("E2E: client beside server", "s",
     p50_p99("loadtest_e2e_seconds", CLIENT, "client") + p50_p99("vllm:e2e_request_latency_seconds", SERVER, "server")),
    ("Tokens per step: client chunks, server acceptance", "none", [
        (f"{rate('loadtest_decode_tokens_total', CLIENT)} / {rate('loadtest_decode_chunks_total', CLIENT)}",
         "client tokens per decode chunk"),
        (f"1 + {rate('vllm:spec_decode_num_accepted_tokens_total', SERVER)} / "
         f"{rate('vllm:spec_decode_num_drafts_total', SERVER)}", "server tokens per draft step"),
        (f"{rate('vllm:spec_decode_num_accepted_tokens_total', SERVER)} / "
         f"{rate('vllm:spec_decode_num_draft_tokens_total', SERVER)}", "server acceptance rate")]),
    ("Output tokens/s: client beside server", "short", [
        (rate("loadtest_output_tokens_total", CLIENT), "client"),
        (rate("vllm:generation_tokens_total", SERVER), "server")]),
    ("In flight (client) beside running and waiting (server)", "short", [
        (f"sum(loadtest_requests_in_flight{{{CLIENT}}})", "client in flight"),
        (f"sum(vllm:num_requests_running{{{SERVER}}})", "server running"),
        (f"sum(vllm:num_requests_waiting{{{SERVER}}})", "server waiting")]),
    ("KV-cache use and preemptions (server)", "percentunit", [
        (f"max(vllm:kv_cache_usage_perc{{{SERVER}}})", "KV cache used (max over replicas)"),
        (rate("vllm:num_preemptions_total", SERVER), "preemptions/s")]),
    ("Send lateness p99 (client; above 10 ms the client was the limit)", "s", [
        (quantile(0.99, "loadtest_send_lateness_seconds", CLIENT), "p99")]),
    ("Errors and timeouts by kind (req/s)", "reqps", [
        (rate("loadtest_requests_total", CLIENT + ',status=~"error|timeout"', "status, error_kind"),
         "{{status}} {{error_kind}}")]),
    ("TTFT p99 by tenant (client)", "s", [
        (quantile(0.99, "loadtest_ttft_seconds", CLIENT, "le, tenant"), "{{tenant}}")]),
]


def by_mode(how: str, name: str, scale: str = "") -> str:
    return f"{how} by (mode) ({name}{{{GPU}}}){scale}"


# J per output token: the mode's GPUs' energy counter (mJ) over a minute, over the mode's output
# tokens in that minute (0 tokens: no point rather than +Inf), joined on mode alone.
ENERGY_PER_TOKEN = (f"sum by (mode) (rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{GPU}}}[1m])) / 1000"
                    f" / on(mode) (sum by (mode) (rate(vllm:generation_tokens_total{{{GPU}}}[1m])) > 0)")

# (title, unit, targets, panel type): per GPU, each mode's figures as one series each.
GPU_PANELS: list[tuple[str, str, list[tuple[str, str]], str]] = [
    ("Power per GPU by mode (W)", "watt", [
        (by_mode("avg", "DCGM_FI_DEV_POWER_USAGE"), "{{mode}} mean"),
        (by_mode("max", "DCGM_FI_DEV_POWER_USAGE"), "{{mode}} max")], "timeseries"),
    ("Energy per output token by mode (J)", "joule", [(ENERGY_PER_TOKEN, "{{mode}}")], "timeseries"),
    ("Framebuffer memory per GPU (GiB)", "gbytes", [
        (by_mode("avg", "DCGM_FI_DEV_FB_USED", " / 1024"), "{{mode}} used, mean"),
        (by_mode("max", "DCGM_FI_DEV_FB_USED", " / 1024"), "{{mode}} used, max"),
        (by_mode("min", "DCGM_FI_DEV_FB_FREE", " / 1024"), "{{mode}} free, min")], "timeseries"),
    ("GPU utilisation by mode (%)", "percent", [
        (by_mode("avg", "DCGM_FI_DEV_GPU_UTIL"), "{{mode}} mean"),
        (by_mode("min", "DCGM_FI_DEV_GPU_UTIL"), "{{mode}} min")], "timeseries"),
    ("XID errors: GPUs that reported one in the time range", "none", [
        (f"sum by (mode) (max_over_time(DCGM_FI_DEV_XID_ERRORS{{{GPU}}}[$__range]) > bool 0)", "{{mode}}")],
     "stat"),
]


def panel(i: int, title: str, unit: str, targets: list[tuple[str, str]]) -> dict:
    overrides = ([{"matcher": {"id": "byFrameRefID", "options": "B"}, "properties": [{"id": "unit", "value": "short"}]}]
                 if unit == "percentunit" else [])   # preemptions/s beside a share
    return {"type": "timeseries", "title": title, "id": i + 2, "datasource": DS,
            "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": 1 + (i // 3) * 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": overrides},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
            "targets": [{"refId": chr(65 + k), "expr": e, "legendFormat": legend, "datasource": DS}
                        for k, (e, legend) in enumerate(targets)]}


def gpu_panel(i: int, y: int, title: str, unit: str, targets: list[tuple[str, str]], kind: str) -> dict:
    """The GPU row's `i`th panel, from line `y` of the board, its id after every mode row's."""
    p = panel(i, title, unit, targets) | {"type": kind, "id": len(PANELS) + 3 + i}
    p["gridPos"] = {**p["gridPos"], "y": y + (i // 3) * 8}
    if kind == "stat":   # a count: green at 0, red from the first GPU that reported an XID
        p["fieldConfig"]["defaults"] |= {"thresholds": {"mode": "absolute", "steps": [
            {"color": "green", "value": None}, {"color": "red", "value": 1}]}, "noValue": "no GPU read"}
        p["description"] = ("DCGM_FI_DEV_XID_ERRORS is the last XID a GPU raised (0: none); its code is in "
                            "NVIDIA's XID catalogue. Explore the series for the GPU's UUID and code.")
        p["options"] = {"colorMode": "background", "graphMode": "none", "textMode": "value_and_name",
                        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False}}
    return p


def variable(name: str, query: str) -> dict:
    return {"name": name, "type": "query", "datasource": DS, "label": name, "definition": query,
            "query": {"query": query, "refId": name}, "refresh": 2, "multi": True, "includeAll": True,
            "current": {"text": "All", "value": "$__all"}}


def dashboard() -> dict:
    row = {"type": "row", "title": "Mode $mode", "id": 1, "collapsed": False, "repeat": "mode",
           "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0}, "panels": []}
    gpu_y = 1 + -(-len(PANELS) // 3) * 8   # below the mode row (Grafana moves it below every repeat)
    gpus = {"type": "row", "title": "GPUs: what each mode costs", "id": len(PANELS) + 2, "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": gpu_y}, "panels": []}
    return {
        "title": "loadtest: client beside vLLM, per mode", "uid": "loadtest-modes",
        "description": "The loadtest command's /metrics (loadtest_*) beside vLLM's own (vllm:*), one row per "
                       "speculation mode, then what each mode's GPUs cost (dcgm-exporter's DCGM_FI_DEV_*), "
                       "the modes side by side. Prometheus scrapes them from OUT/prometheus-targets/RUN_ID.json "
                       "(ops/prometheus.yml), which labels each replica with its mode and run.",
        "tags": ["loadtest", "vllm", "speculative-decoding"], "schemaVersion": 39, "version": 1,
        "editable": True, "refresh": "5s", "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            variable("run", "label_values(loadtest_requests_total, run)"),
            variable("mode", 'label_values(loadtest_requests_total{run=~"$run"}, mode)')]},
        "panels": [row, *(panel(i, *p) for i, p in enumerate(PANELS)), gpus,
                   *(gpu_panel(i, gpu_y + 1, *p) for i, p in enumerate(GPU_PANELS))],
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    out = Path(__file__).with_name("loadtest-dashboard.json")
    out.write_text(render())
    print(f"{out}: {len(PANELS)} panels per mode, {len(GPU_PANELS)} comparing the modes' GPUs")
