"""Scenarios: the built-in mix, deterministic traces, and one-line errors naming the key."""

from __future__ import annotations

import itertools
import json

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from scenarios import ScenarioError
from scenarios.spec import load_scenario
from scenarios.trace import META_HASH, TRACE_SCHEMA, build_trace, build_trace_file, scenario_hash, write_trace
from tests.conftest import ROOT, cli


def test_saas_mix_has_distinct_tenants_with_slos():
    s, _ = load_scenario("saas-mix")
    assert s.requests == 50000 and len(s.tenants) >= 4
    assert len({t.domain for t in s.tenants.values()}) >= 4
    assert len({(t.slo.ttft_p99_ms, t.slo.tpot_p99_ms, t.slo.e2e_p99_ms) for t in s.tenants.values()}) >= 4
    assert {"rust", "cpp"} <= {lang for t in s.tenants.values() for lang in (t.language_list or [])}
    assert s.tenants["code-agent"].corpora == ("humaneval-rust", "humaneval-cpp")   # real problems (issue 43)


def test_same_seed_same_trace_other_seed_other_trace():
    s, _ = load_scenario("saas-mix")
    a, b = build_trace(s, requests=300), build_trace(s, requests=300)
    assert a.equals(b)
    c = build_trace(s, requests=300, seed=s.seed + 1)
    assert not a.equals(c)
    assert a.num_rows == 300 and a.schema.equals(TRACE_SCHEMA)


def test_trace_rows_are_well_formed(tmp_path):
    s, raw = load_scenario("saas-mix")
    t = build_trace(s, requests=500)
    offsets = t["offset_s"].to_pylist()
    assert offsets[0] == 0 and all(b >= a for a, b in itertools.pairwise(offsets))
    assert len(set(t["request_id"].to_pylist())) == 500
    for row in t.to_pylist():
        assert (row["prompt"] is None) != (row["messages"] is None)
        assert row["prompt"] is None if row["api"] == "chat" else row["messages"] is None
    prompts = [r["prompt"] or json.loads(r["messages"])[-1]["content"] for r in t.to_pylist()]
    assert len({p[:32] for p in prompts}) == 500  # no shared prefixes by accident
    write_trace(t, tmp_path / "trace.parquet", s.name, scenario_hash(raw))
    assert pq.read_schema(tmp_path / "trace.parquet").metadata[META_HASH] == scenario_hash(raw).encode()


BASE = """
name = "x"
requests = 10
[arrival]
process = "poisson"
rate = 5
[tenants.a]
share = 1.0
domain = "chat"
prompt_tokens = { dist = "fixed", value = 10 }
output_tokens = { dist = "fixed", value = 10 }
"""


@pytest.mark.parametrize("edit, needle", [
    (lambda s: s.replace('name = "x"', 'name = "x"\nrequets = 5'), "requets: unknown key"),
    (lambda s: s.replace("rate = 5", "rate = -1"), "arrival.rate: must be greater than 0, got -1"),
    (lambda s: s.replace("rate = 5", 'rate = "fast"'), "arrival.rate: expected a number, got 'fast'"),
    (lambda s: s.replace("share = 1.0", "share = 0.7"), "tenant shares must sum to 1, they sum to 0.7"),
    (lambda s: s.replace('{ dist = "fixed", value = 10 }\noutput',
                         '{ dist = "uniform", min = 50, max = 10 }\noutput'), "min (50) is greater than max (10)"),
    (lambda s: s.split("[tenants.a]")[0], "tenants: required key is missing"),
    (lambda s: s.replace('domain = "chat"', 'domain = "code"'), "needs a language"),
    (lambda s: s + "\n[[oops", "not valid TOML"),
    (lambda s: s.replace('domain = "chat"', 'domain = "custom"\nprompts_file = "missing.txt"'),
     "tenants.a.prompts_file: file 'missing.txt' does not exist"),
    (lambda s: s.replace("share = 1.0", 'share = 1.0\narrival = { process = "poisson", rate = 1 }'),
     "exactly one of share"),
    (lambda s: s.replace("requests = 10", "requests = 10\nduration = 60"), "exactly one of requests"),
    (lambda s: s.replace('process = "poisson"\nrate = 5', 'process = "ramp"\nfrom = 0\nto = 0\nover = 10'),
     "ramp needs from or to above 0"),
    (lambda s: s.replace('process = "poisson"\nrate = 5', 'process = "closed"\nconcurrency = 0'),
     "arrival.concurrency: must be at least 1, got 0"),
    (lambda s: s.replace('{ dist = "fixed", value = 10 }\noutput', '{ dist = "empirical" }\noutput'),
     "empirical needs exactly one of values"),
    (lambda s: s.replace('share = 1.0', 'share = 1.0\ntemperature = "hot"'),
     "tenants.a.temperature: expected a number, got 'hot'"),
    (lambda s: s.replace('process = "poisson"\nrate = 5', 'process = "steps"\nsteps = [{ rate = 1, duration = 5 }, '
                         '{ rate = -2, duration = 5 }]'), "arrival.steps[1].rate: must be at least 0, got -2"),
    (lambda s: s.replace('process = "poisson"', 'process = "poison"'),
     "arrival.process: unknown process 'poison' (expected one of 'poisson', "),
    (lambda s: s.replace('{ dist = "fixed", value = 10 }\noutput', '{ dist = "lognormal", mean = 10 }\noutput'),
     "tenants.a.prompt_tokens.sigma: required key is missing"),
    (lambda s: s.split("[tenants.a]")[0] + "[tenants]\n", "tenants: needs at least 1 entry, the file gives 0"),
])
def test_bad_scenarios_get_one_line_naming_the_key(tmp_path, edit, needle):
    path = tmp_path / "bad.toml"
    path.write_text(edit(BASE))
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert needle in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)
    out = cli("run", "--scenario", str(path))
    assert out.returncode == 2 and needle in out.stderr and "Traceback" not in out.stderr


def test_scenario_and_trace_commands(tmp_path):
    listed = cli("scenario", "list")
    assert listed.returncode == 0
    for name in ("saas-mix", "chat", "code-heavy", "summarize", "soak", "burst"):
        assert name in listed.stdout
    shown = cli("scenario", "show", "saas-mix")
    assert shown.returncode == 0 and "[tenants.code-agent]" in shown.stdout
    ok = cli("scenario", "validate", str(ROOT / "tests" / "data" / "tiny-mix.toml"))
    assert ok.returncode == 0 and "valid" in ok.stdout
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    for out in (a, b):
        res = cli("trace", "build", "--scenario", "code-heavy", "--requests", "300", "--seed", "5",
                  "--out", str(out))
        assert res.returncode == 0 and "300 requests" in res.stdout
    assert pq.read_table(a).equals(pq.read_table(b))
    shown = cli("trace", "show", str(a))
    assert shown.returncode == 0 and "systems-agent" in shown.stdout and "inter-arrival CV" in shown.stdout


def test_streamed_trace_file_equals_the_in_memory_trace(tmp_path):
    s, raw = load_scenario("saas-mix")
    path = tmp_path / "t.parquet"
    assert build_trace_file(s, path, scenario_hash(raw), requests=1000, batch_rows=128) == 1000
    on_disk = pq.read_table(path)
    assert on_disk.replace_schema_metadata(None).equals(build_trace(s, requests=1000))
    assert pq.ParquetFile(path).metadata.num_row_groups == 8
    assert on_disk.schema.metadata[META_HASH] == scenario_hash(raw).encode()


def test_custom_prompts_and_supplied_document(tmp_path):
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "alpha question"}\n{"prompt": "beta question"}\n')
    (tmp_path / "doc.txt").write_text("The harbour board met on Monday.\nIt approved the new pier.\n" * 40)
    (tmp_path / "lengths.txt").write_text("7\n9\n11\n")
    (tmp_path / "s.toml").write_text("""
name = "own-content"
requests = 40
[arrival]
process = "constant"
rate = 4
[tenants.custom]
share = 0.5
domain = "custom"
prompts_file = "prompts.jsonl"
api = "completions"
output_tokens = { dist = "empirical", file = "lengths.txt" }
[tenants.docs]
share = 0.5
domain = "summarize"
document = "doc.txt"
prompt_tokens = { dist = "fixed", value = 300 }
output_tokens = { dist = "empirical", values = [50, 60] }
""")
    s, _ = load_scenario(tmp_path / "s.toml")
    t = build_trace(s)
    custom = t.filter(pc.equal(t["tenant"], "custom"))
    assert set(custom["prompt"].to_pylist()) <= {"alpha question", "beta question"}
    assert set(custom["max_tokens"].to_pylist()) <= {7, 9, 11}
    docs = t.filter(pc.equal(t["tenant"], "docs"))
    assert all("harbour board" in m for m in docs["messages"].to_pylist())
    assert t["offset_s"].to_pylist()[:3] == pytest.approx([0.0, 0.25, 0.5])


def test_empty_tenants_is_an_error(tmp_path):
    path = tmp_path / "e.toml"
    path.write_text('name = "e"\nrequests = 5\n[arrival]\nprocess = "poisson"\nrate = 1\n[tenants]\n')
    with pytest.raises(ScenarioError, match="tenants: needs at least 1 entry, the file gives 0"):
        load_scenario(path)


def test_validate_prints_every_problem_in_the_files_own_words(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nrequests = 0\n[arrival]\nprocess = "poisson"\nrate = -1\n[tenants]\n')
    out = cli("scenario", "validate", str(path))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.splitlines() == [
        f"loadtest scenario validate: error: {path}: requests: must be at least 1, got 0",
        f"loadtest scenario validate: error: {path}: arrival.rate: must be greater than 0, got -1",
        f"loadtest scenario validate: error: {path}: tenants: needs at least 1 entry, the file gives 0",
    ]


def test_files_a_scenario_names_are_checked_when_it_loads(tmp_path):
    (tmp_path / "lengths.txt").write_text("12\nabc\n")
    (tmp_path / "prompts.jsonl").write_text('{"prompt": "a"}\n{"text": "b"}\n')
    (tmp_path / "doc.txt").write_bytes(b"caf\xe9 au lait\n")
    path = tmp_path / "files.toml"
    path.write_text(BASE.replace("[tenants.a]", "[tenants.b]\nshare = 0.5\ndomain = \"custom\"\n"
                                 "prompts_file = \"prompts.jsonl\"\noutput_tokens = { dist = \"empirical\", "
                                 "file = \"lengths.txt\" }\n[tenants.c]\nshare = 0.5\ndomain = \"summarize\"\n"
                                 "document = \"doc.txt\"\nprompt_tokens = { dist = \"fixed\", value = 10 }\n"
                                 "output_tokens = { dist = \"fixed\", value = 10 }\n[tenants.a]")
                    .replace("share = 1.0", "share = 0.0001"))
    out = cli("trace", "build", "--scenario", str(path), "--out", str(tmp_path / "t.parquet"))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert f"tenants.b.prompts_file: {tmp_path}/prompts.jsonl:2: prompt: required string is missing" in out.stderr
    assert f"tenants.b.output_tokens.file: {tmp_path}/lengths.txt: line 2: expected a positive integer" in out.stderr
    assert f"tenants.c.document: {tmp_path}/doc.txt: line 1, column 4: byte 0xe9 is not UTF-8 text" in out.stderr


def test_trace_show_uses_units_that_show_a_slow_rate(tmp_path):
    trace = tmp_path / "slow.jsonl"
    trace.write_text("".join(json.dumps({"prompt": "hi", "max_tokens": 5, "timestamp": i * 33.0}) + "\n"
                             for i in range(12)))
    assert cli("trace", "import", str(trace), "--format", "jsonl", "--out", str(tmp_path / "s.parquet")
               ).returncode == 0
    shown = cli("trace", "show", str(tmp_path / "s.parquet")).stdout
    assert "12 requests over 6.0 min (1.98/min)" in shown, shown
    assert "peak 1.98/min" in shown and "0.0/s" not in shown


def test_a_file_with_several_problems_says_them_all_in_one_pass_the_shares_with_the_fields(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text(BASE.replace("share = 1.0", "share = 0.7").replace("rate = 5", "rate = -1"))
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    assert str(e.value).splitlines() == [f"{path}: arrival.rate: must be greater than 0, got -1",
                                         f"{path}: (top level): tenant shares must sum to 1, they sum to 0.7"]
