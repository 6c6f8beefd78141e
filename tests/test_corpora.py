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

from cluster.sim.domains import classify_domain
from scenarios.corpus import CORPORA, DATABASES, code_text, items
from scenarios.prompts import languages
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


LICENCE_TEXT = {"Apache-2.0": "Apache License", "MIT": "MIT License",
                "PSF-2.0": "PYTHON SOFTWARE FOUNDATION LICENSE VERSION 2"}
SIZES = {"mt-bench": 80, "humaneval": 164, "humaneval-rust": 180, "humaneval-cpp": 164, "humaneval-go": 164,
         "humaneval-java": 164, "humaneval-js": 164, "defog-sql": 41, "pydoc-topics": 79}
CATEGORIES = {"mt-bench": set(MT_BENCH), "humaneval": {"python"},
              "humaneval-rust": {"rust-codegen", "rust-transform", "rust-fix", "rust-explain"},
              "humaneval-cpp": {"cpp"}, "humaneval-go": {"go"}, "humaneval-java": {"java"},
              "humaneval-js": {"javascript"}, "defog-sql": {f"sql-{db}" for db in DATABASES},
              "pydoc-topics": {"summarize"}}


@pytest.mark.parametrize("name", sorted(CORPORA))
def test_each_corpus_carries_its_licence_and_its_source_with_the_files_checksum(name):
    corpus = CORPORA[name]
    folder = FOLDER / name
    licence, readme = (folder / "LICENSE").read_text(), (folder / "README.md").read_text()
    assert LICENCE_TEXT[corpus.licence] in licence
    for file in corpus.files:
        digest = hashlib.sha256((folder / file).read_bytes()).hexdigest()
        assert digest in readme, (name, file)
    assert "Source:" in readme and "Licence:" in readme, name
    assert len(items(name)) == SIZES[name]
    assert {item.category for item in items(name)} == CATEGORIES[name]
    # what the folder holds is the corpus' files, their licence and README, and the project's own questions
    assert {p.name for p in folder.iterdir()} <= {*corpus.files, "LICENSE", "README.md", "questions.toml"}
    assert f"`{name}`" in (FOLDER / "README.md").read_text()
    if corpus.domain != "chat":   # the simulator reads every item as its tenant's domain (MT-Bench's are mixed)
        assert {classify_domain(item.text) for item in items(name)} == {corpus.domain}


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
    assert "# code-agent: prompts from humaneval-rust (180 Rust problems in HumanEval's form; MIT" in builtin.stdout
    assert "and humaneval-cpp (HumanEval-X's 164 C++ problems; Apache-2.0" in builtin.stdout
    assert "# batch-eval: prompts written from the project's own structured text" in builtin.stdout


def test_a_corpus_for_the_wrong_domain_or_unknown_is_one_line(tmp_path):
    out = cli("trace", "build", "--scenario", str(scenario(tmp_path, "chat")), "--out", str(tmp_path / "t.parquet"))
    assert out.returncode == 2 and "prompts 'humaneval' are code prompts: set domain = 'code'" in out.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text(scenario(tmp_path).read_text().replace('"mt-bench"', '"sharegpt"'))
    out = cli("trace", "build", "--scenario", str(bad), "--out", str(tmp_path / "t.parquet"))
    assert out.returncode == 2 and f"no corpus 'sharegpt' (the project ships: {', '.join(CORPORA)})" \
        in out.stderr and "humaneval-go, " in out.stderr and "Traceback" not in out.stderr


NEW_CORPORA = {"cpp": ("code", "humaneval-cpp"), "go": ("code", "humaneval-go"), "java": ("code", "humaneval-java"),
               "js": ("code", "humaneval-js"), "sql": ("sql", "defog-sql"), "docs": ("summarize", "pydoc-topics")}


def test_a_scenario_with_each_new_corpus_builds_a_trace_of_its_items_and_categories(tmp_path):
    text = 'name = "more-content"\nrequests = 600\nseed = 11\n[arrival]\nprocess = "poisson"\nrate = 8.0\n'
    for tenant, (domain, corpus) in NEW_CORPORA.items():
        text += (f'[tenants.{tenant}]\nshare = {1 / len(NEW_CORPORA)}\ndomain = "{domain}"\nprompts = "{corpus}"\n'
                 'output_tokens = { dist = "fixed", value = 64 }\n')
    (tmp_path / "more.toml").write_text(text)
    sc, _ = load_scenario(str(tmp_path / "more.toml"))
    trace = build_trace(sc)
    rows = trace.to_pylist()
    for tenant, (_, corpus) in NEW_CORPORA.items():
        mine = [r for r in rows if r["tenant"] == tenant]
        assert {r["prompt_source"] for r in mine} == {corpus}
        assert {r["category"] for r in mine} <= CATEGORIES[corpus] and mine, tenant
        texts = {item.text for item in items(corpus)}
        assert all(json.loads(r["messages"])[-1]["content"].partition("\n")[2] in texts for r in mine)
    sql = {r["category"] for r in rows if r["tenant"] == "sql"}
    assert sql == CATEGORIES["defog-sql"]   # 100 requests reach all seven databases
    assert {r["language"] for r in rows if r["tenant"] == "js"} == {"javascript"}
    assert trace.equals(build_trace(sc))   # deterministic
    shown = cli("scenario", "show", str(tmp_path / "more.toml"))
    assert shown.returncode == 0, shown.stderr
    for tenant, (_, corpus) in NEW_CORPORA.items():
        c = CORPORA[corpus]
        assert f"# {tenant}: prompts from {corpus} ({c.what}; {c.licence}; from {c.source};" in shown.stdout


def test_a_tenant_draws_from_several_corpora_each_request_naming_its_own(tmp_path):
    path = tmp_path / "systems.toml"
    path.write_text("""name = "systems"
requests = 400
[arrival]
process = "poisson"
rate = 5.0
[tenants.code-agent]
share = 1.0
domain = "code"
prompts = ["humaneval-rust", "humaneval-cpp"]
output_tokens = { dist = "fixed", value = 64 }
""")
    sc, _ = load_scenario(str(path))
    assert sc.tenants["code-agent"].language_list == ["rust", "cpp"]
    table = build_trace(sc)
    sources = table["prompt_source"].to_pylist()
    assert set(sources) == {"humaneval-rust", "humaneval-cpp"} and 120 < sources.count("humaneval-cpp") < 280
    for source, category in zip(sources, table["category"].to_pylist(), strict=True):
        assert category.startswith("rust-") if source == "humaneval-rust" else category == "cpp"
    shown = cli("scenario", "show", str(path))
    assert "prompts from humaneval-rust (" in shown.stdout and " and humaneval-cpp (HumanEval-X" in shown.stdout
    path.write_text(path.read_text().replace('"humaneval-cpp"', '"mt-bench"'))
    bad = cli("scenario", "validate", str(path))
    assert bad.returncode == 2 and "prompts 'mt-bench' are chat prompts: set domain = 'chat'" in bad.stderr


def test_the_languages_are_the_files_the_project_has_text_in():
    own = {p.name.split(".")[0] for p in (ROOT / "scenarios" / "content" / "code").iterdir()}
    assert own == {"rust", "cpp", "python"}
    assert languages() == tuple(sorted(own | {c.language for c in CORPORA.values() if c.language}))
    assert {"go", "java", "javascript"} <= set(languages())


GO = """name = "go"
requests = 60
seed = 5
[arrival]
process = "poisson"
rate = 4.0
[tenants.code]
share = 1.0
domain = "code"
language = [{languages}]
prompt_tokens = {{ dist = "uniform", min = 100, max = 900 }}
output_tokens = {{ dist = "fixed", value = 32 }}
"""


def test_go_code_prompts_are_cut_from_humaneval_gos_solved_problems(tmp_path):
    path = tmp_path / "go.toml"
    path.write_text(GO.format(languages='"go", "rust"'))
    sc, _ = load_scenario(str(path))
    rows = build_trace(sc).to_pylist()
    go = [r for r in rows if r["language"] == "go"]
    assert go and {r["category"] for r in go} == {"go"} and {r["prompt_source"] for r in go} == {"builtin"}
    source = "\n" + code_text("go") * 2
    for r in go:
        content = json.loads(r["messages"])[-1]["content"]
        head, _, body = content.partition("\n```go\n")
        assert re.fullmatch(r"Ticket [0-9a-f]{10}: in this Go file, .*\.", head), head
        # cut at a line's start (the corpus has characters past ASCII: offsets count characters)
        assert ("\n" + body.removesuffix("```\n")) in source
    assert build_trace(sc).equals(build_trace(sc))
    shown = cli("scenario", "show", str(path))
    assert "(go, rust)" in shown.stdout and "go code cut from humaneval-go's solved problems (Apache-2.0;" \
        in shown.stdout.replace("\n", "")


def test_a_language_without_text_is_one_line_naming_the_known_ones(tmp_path):
    path = tmp_path / "cobol.toml"
    path.write_text(GO.format(languages='"rust", "cobol"'))
    out = cli("trace", "build", "--scenario", str(path), "--out", str(tmp_path / "t.parquet"))
    line = f"tenants.code.language: no text in language 'cobol' (known: {', '.join(languages())}; the code " \
           "prompts in go, java, javascript are cut from the corpora humaneval-go, humaneval-java, humaneval-js)"
    assert out.returncode == 2 and line in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and not (tmp_path / "t.parquet").exists()


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
