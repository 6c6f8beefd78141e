"""Writes loadtest-dashboard.json beside this file: the client's view (loadtest_*) beside vLLM's
own metrics (vllm:*), one repeated row per mode. Edit the panels here and run
`python ops/grafana/dashboard.py`; tests/test_prometheus.py checks that the JSON is this file's
output and that a real Prometheus holds every metric its queries name."""

from __future__ import annotations

import json
from pathlib import Path

CLIENT = 'run=~"$run",mode="$mode"'   # the client's series carry run, level, mode and tenant
SERVER = 'run=~"$run",mode="$mode"'   # a replica's: the labels its targets file gives it
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


def panel(i: int, title: str, unit: str, targets: list[tuple[str, str]]) -> dict:
    overrides = ([{"matcher": {"id": "byFrameRefID", "options": "B"}, "properties": [{"id": "unit", "value": "short"}]}]
                 if unit == "percentunit" else [])   # preemptions/s beside a share
    return {"type": "timeseries", "title": title, "id": i + 2, "datasource": DS,
            "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": 1 + (i // 3) * 8},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": overrides},
            "options": {"legend": {"displayMode": "list", "placement": "bottom"}, "tooltip": {"mode": "multi"}},
            "targets": [{"refId": chr(65 + k), "expr": e, "legendFormat": legend, "datasource": DS}
                        for k, (e, legend) in enumerate(targets)]}


def variable(name: str, query: str) -> dict:
    return {"name": name, "type": "query", "datasource": DS, "label": name, "definition": query,
            "query": {"query": query, "refId": name}, "refresh": 2, "multi": True, "includeAll": True,
            "current": {"text": "All", "value": "$__all"}}


def dashboard() -> dict:
    row = {"type": "row", "title": "Mode $mode", "id": 1, "collapsed": False, "repeat": "mode",
           "gridPos": {"h": 1, "w": 24, "x": 0, "y": 0}, "panels": []}
    return {
        "title": "loadtest: client beside vLLM, per mode", "uid": "loadtest-modes",
        "description": "The loadtest command's /metrics (loadtest_*) beside vLLM's own (vllm:*), one row per "
                       "speculation mode. Prometheus scrapes both from OUT/prometheus-targets/RUN_ID.json "
                       "(ops/prometheus.yml), which labels each replica with its mode and run.",
        "tags": ["loadtest", "vllm", "speculative-decoding"], "schemaVersion": 39, "version": 1,
        "editable": True, "refresh": "5s", "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
            variable("run", "label_values(loadtest_requests_total, run)"),
            variable("mode", 'label_values(loadtest_requests_total{run=~"$run"}, mode)')]},
        "panels": [row, *(panel(i, *p) for i, p in enumerate(PANELS))],
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


if __name__ == "__main__":
    out = Path(__file__).with_name("loadtest-dashboard.json")
    out.write_text(render())
    print(f"{out}: {len(PANELS)} panels per mode")
