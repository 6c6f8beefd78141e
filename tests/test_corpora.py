"""Prompts from real corpora (issue 43): the corpora the project ships, each with its licence and
source beside it, named by a tenant (`prompts = "mt-bench"`), every request carrying its source and
category in the trace, and `scenario show` saying where each tenant's prompts come from."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from scenarios.corpus import CORPORA, items
from scenarios.spec import load_scenario
from scenarios.trace import TRACE_SCHEMA, build_trace, load_trace_file
from tests.conftest import ROOT, cli

FOLDER = ROOT / "scenarios" / "corpora"
MT_BENCH = ("coding", "extraction", "humanities", "math", "reasoning", "roleplay", "stem", "writing")
SCENARIO = """name = "real-content"
requests = 400
seed = 7

[arrival]
process = "poisson"
rate = 8.0

[tenants.chat]
share = 0.5
domain = "chat"
prompts = "mt-bench"
output_tokens = {{ dist = "fixed", value = 64 }}

[tenants.rust]
share = 0.3
domain = "code"
prompts = "humaneval-rust"
output_tokens = {{ dist = "fixed", value = 64 }}

[tenants.python]
share = 0.2
domain = "{python_domain}"
prompts = "humaneval"
output_tokens = {{ dist = "fixed", value = 64 }}
"""


def scenario(tmp_path: Path, python_domain: str = "code") -> Path:
    path = tmp_path / "real.toml"
    path.write_text(SCENARIO.format(python_domain=python_domain))
    return path


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_each_corpus_carries_its_licence_and_its_source_with_the_files_checksum(name):
    corpus = CORPORA[name]
    folder = FOLDER / name
    licence, readme = (folder / "LICENSE").read_text(), (folder / "README.md").read_text()
    assert ("Apache License" if corpus.licence == "Apache-2.0" else "MIT License") in licence
    digest = hashlib.sha256((folder / corpus.file).read_bytes()).hexdigest()
    assert digest in readme and "Source:" in readme and "Licence:" in readme, name
    assert len(items(name)) == {"mt-bench": 80, "humaneval": 164, "humaneval-rust": 180}[name]


def test_each_request_is_a_corpus_item_with_its_source_and_category(tmp_path):
    sc, _ = load_scenario(str(scenario(tmp_path)))
    trace = build_trace(sc).to_pylist()
    by_tenant = {t: [r for r in trace if r["tenant"] == t] for t in ("chat", "rust", "python")}
    assert {r["prompt_source"] for r in by_tenant["chat"]} == {"mt-bench"}
    assert {r["category"] for r in by_tenant["chat"]} == set(MT_BENCH)   # 200 requests reach all 8
    assert {r["category"] for r in by_tenant["python"]} == {"python"}
    assert {r["category"] for r in by_tenant["rust"]} <= {"rust-codegen", "rust-transform", "rust-fix", "rust-explain"}
    assert {r["language"] for r in by_tenant["rust"]} == {"rust"}
    texts = {item.text for item in items("mt-bench")}
    for r in by_tenant["chat"]:
        first, _, rest = json.loads(r["messages"])[-1]["content"].partition("\n")
        assert re.fullmatch(r"Request [0-9a-f]{10}\.", first) and rest in texts
    openings = [(r["prompt"] or r["messages"]).split("\\n")[0] for r in trace]
    assert len(set(openings)) == len(trace), "no two requests share their first line"
    assert build_trace(sc).equals(build_trace(sc))   # deterministic


def test_scenario_show_names_each_tenants_corpus_and_licence(tmp_path):
    out = cli("scenario", "show", str(scenario(tmp_path)))
    assert out.returncode == 0, out.stderr
    assert "# chat: prompts from mt-bench (MT-Bench's 80 two-turn questions, 8 categories; Apache-2.0" in out.stdout
    assert "# rust: prompts from humaneval-rust (180 Rust problems in HumanEval's form; MIT" in out.stdout
    builtin = cli("scenario", "show", "saas-mix")
    assert "# code-agent: prompts written from the project's own code text (rust, cpp)" in builtin.stdout


def test_a_corpus_for_the_wrong_domain_or_unknown_is_one_line(tmp_path):
    out = cli("trace", "build", "--scenario", str(scenario(tmp_path, "chat")), "--out", str(tmp_path / "t.parquet"))
    assert out.returncode == 2 and "prompts 'humaneval' are code prompts: set domain = 'code'" in out.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(scenario(tmp_path).read_text().replace('"mt-bench"', '"sharegpt"'))
    out = cli("trace", "build", "--scenario", str(bad), "--out", str(tmp_path / "t.parquet"))
    assert out.returncode == 2 and "no corpus 'sharegpt' (the project ships: mt-bench, humaneval, humaneval-rust)" \
        in out.stderr and "Traceback" not in out.stderr


def test_a_trace_written_before_sources_and_categories_still_replays(tmp_path):
    sc, _ = load_scenario(str(scenario(tmp_path)))
    old = build_trace(sc, requests=20).drop_columns(["prompt_source", "category"])
    pq.write_table(old, tmp_path / "old.parquet")
    table, _ = load_trace_file(tmp_path / "old.parquet")
    assert table.schema.names == TRACE_SCHEMA.names and table["category"].null_count == 20


@pytest.mark.e2e
def test_acceptance_by_category_in_report_md_is_the_records_own_by_duckdb(world_fleet, tmp_path):
    """A run on the shared fleet with the three corpora: report.md's acceptance-by-category matrix,
    cell by cell, is 1 + accepted drafts over verified steps of the records joined to the trace's
    categories, with the requests it is of, as DuckDB counts them."""
    import duckdb
    import pyarrow.parquet as pq

    ran = cli("run", "--endpoints", str(world_fleet.state), "--modes", "baseline,eagle", "--scenario",
              str(scenario(tmp_path)), "--requests", "40", "--cooldown", "0", "--out", str(tmp_path / "out"),
              "--run-id", "c")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run_dir = tmp_path / "out" / "c"
    cells = duckdb.connect().execute(
        """select t.category, 1 + sum(r.spec_accepted_tokens) / sum(r.spec_steps), count(*)
           from read_parquet(?, hive_partitioning=1) r join read_parquet(?) t using (request_id)
           where r.mode = 'eagle' and r.status = 'ok' and r.spec_steps > 0 group by 1 order by 1""",
        [str(run_dir / "requests" / "*" / "*.parquet"), str(run_dir / "trace.parquet")]).fetchall()
    assert len(cells) >= 5, cells
    report = (run_dir / "report.md").read_text()
    matrix = report.split("## Acceptance by category")[1].split("###")[0]
    for category, length, n in cells:
        row = next(line for line in matrix.splitlines() if line.startswith(f"| {category} |"))
        assert row.split("|")[2].strip().startswith(f"{length:.2f}") and f"(n={n:,})" in row, (row, length, n)
    summary = pq.read_table(run_dir / "summary.parquet").to_pylist()
    found = {r["statistic"]: r["value"] for r in summary
             if r["mode"] == "eagle" and r["metric"] == "category_acceptance_length"}
    assert found == pytest.approx({c: length for c, length, _ in cells})
    assert "### E2E speedup over the baseline by category" in report
