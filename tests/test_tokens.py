"""Token counts checked, not assumed (issue 43): prompts cut to a tokenizer's exact counts
(`--tokenizer`, scenarios/tokens.py), the trace saying how its lengths were counted, and every
report holding the plan against the server's `usage` (analysis/tokens.py). The tokenizers here
are trained in the test on the project's own text (no download)."""

from __future__ import annotations

import json
import math
from importlib import resources
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.long_summary import LONG_SCHEMA, SummaryView
from analysis.stats import supported_count
from analysis.tokens import (
    check_rows,
    content_notes,
    counted_by,
    error_stats,
    plan_of,
    relative_errors,
    token_rows,
)
from contract.records import REQUEST_SCHEMA
from loadtest.engine.inputs import prepare_trace
from loadtest.options.replaying import TraceOptions
from scenarios import ScenarioError
from scenarios.importers import import_trace
from scenarios.spec import eos_notes, load_scenario
from scenarios.tokens import ESTIMATE, TokenCounter, load_tokenizer
from scenarios.trace import META_TOKENIZER, build_trace, build_trace_file, write_trace
from tests.conftest import DATA

MIXED = """name = "mixed"
requests = {requests}
seed = 5

[arrival]
process = "poisson"
rate = 10.0

[tenants.chat]
share = 0.15
domain = "chat"
system = "You are a careful assistant. Answer briefly."
prompt_tokens = {{ dist = "uniform", min = 8, max = 900 }}
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.rust]
share = 0.15
domain = "code"
language = ["rust", "cpp"]
api = "completions"
prompt_tokens = {{ dist = "uniform", min = 20, max = 1500 }}
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.sql]
share = 0.1
domain = "sql"
api = "completions"
prompt_tokens = {{ dist = "uniform", min = 30, max = 600 }}
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.json]
share = 0.1
domain = "structured"
api = "completions"
prompt_tokens = {{ dist = "uniform", min = 10, max = 400 }}
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.docs]
share = 0.1
domain = "summarize"
prompt_tokens = {{ dist = "uniform", min = 200, max = 2500 }}
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.mt]
share = 0.15
domain = "chat"
prompts = "mt-bench"
conversation = true
think_s = 1.0
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.he]
share = 0.15
domain = "code"
prompts = "humaneval-rust"
api = "completions"
output_tokens = {{ dist = "fixed", value = 16 }}

[tenants.own]
share = 0.1
domain = "custom"
prompts_file = "own.txt"
api = "completions"
output_tokens = {{ dist = "fixed", value = 16 }}
"""


def train(path: Path, bos: bool = False, lowercase: bool = False) -> Path:
    """A byte-level BPE of 600 tokens trained on the project's own text (as the vLLM test's tiny
    model's is): with `bos`, it adds <s> before every text, as Llama's does; with `lowercase`, a
    normalizer that changes the text."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    content = resources.files("scenarios") / "content"
    texts = [p.read_text() for p in content.iterdir() if p.is_file()]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "</s>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def tokenizer_file(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("tok") / "tokenizer.json")


def mixed(tmp_path: Path, requests: int = 240) -> Path:
    (tmp_path / "own.txt").write_text("Write a haiku about the sea.\nList three prime numbers above 100, then explain "
                                      "why each is prime.\nTranslate 'good morning' into French and German.\n")
    path = tmp_path / "mixed.toml"
    path.write_text(MIXED.format(requests=requests))
    return path


def server_view(tok, table: pa.Table) -> np.ndarray:
    """What each request's prompt is, counted whole by the tokenizer itself: a completion's text with
    the tokens it adds (a BOS), a chat request's message contents without them, and a later turn's
    planned answers (the trace plans them in its history)."""
    out = []
    answers: dict[str, int] = {}
    for row in table.select(["api", "prompt", "messages", "conversation", "max_tokens"]).to_pylist():
        if row["api"] == "completions":
            out.append(len(tok.encode(row["prompt"]).ids))
            continue
        n = sum(len(tok.encode(m["content"], add_special_tokens=False).ids) for m in orjson.loads(row["messages"]))
        conv = row["conversation"]
        out.append(n + answers.get(conv, 0))
        if conv is not None:
            answers[conv] = answers.get(conv, 0) + row["max_tokens"]
    return np.array(out)


# ---- the plan in a tokenizer's own counts --------------------------------------------------------
def test_prompts_cut_by_a_tokenizer_hold_exactly_the_count_the_trace_says(tmp_path, tokenizer_file):
    from tokenizers import Tokenizer

    scenario, _ = load_scenario(mixed(tmp_path))
    tokens = load_tokenizer(str(tokenizer_file))
    table = build_trace(scenario, tokens=tokens)
    assert not tokens.whole   # counted by pieces, checked on a sample, never once counted whole
    exact = server_view(Tokenizer.from_file(str(tokenizer_file)), table)
    assert np.array_equal(table["prompt_tokens_est"].to_numpy(), exact)
    # each generated prompt lands on its drawn length (the chat tenant's plus its system prompt), but
    # where its head and tail alone are longer
    again = build_trace(scenario)   # the same draws, estimated: its lengths are the targets
    generated = pc.is_in(table["tenant"], pa.array(["rust", "sql", "json", "docs"])).to_numpy(zero_copy_only=False)
    est = table["prompt_tokens_est"].to_numpy()
    target = again["prompt_tokens_est"].to_numpy()   # ceil(chars / 4) of a prompt of target * 4 characters
    hit = (est == target)[generated & (target > 120)]
    assert hit.mean() > 0.97, hit.mean()
    assert table.schema.metadata[META_TOKENIZER] == tokens.label.encode()
    assert tokens.label.startswith("tokenizer.json sha256 ") and len(tokens.label.split()[-1]) == 64
    assert again.schema.metadata[META_TOKENIZER] == ESTIMATE.encode() == b"estimate: 4 characters a token"


def test_a_tokenizer_that_adds_a_bos_counts_it_in_a_completion_and_not_in_a_chat_message(tmp_path):
    from tokenizers import Tokenizer

    path = train(tmp_path / "bos.json", bos=True)
    tokens = load_tokenizer(str(path))
    assert tokens.special == 1
    table = build_trace(load_scenario(mixed(tmp_path, 80))[0], tokens=tokens)
    assert np.array_equal(table["prompt_tokens_est"].to_numpy(), server_view(Tokenizer.from_file(str(path)), table))


def test_a_normalizer_that_changes_the_text_is_counted_whole_and_still_exact(tmp_path):
    from tokenizers import Tokenizer

    path = train(tmp_path / "lower.json", lowercase=True)
    tokens = load_tokenizer(str(path))
    table = build_trace(load_scenario(mixed(tmp_path, 40))[0], tokens=tokens)
    assert tokens.whole
    assert np.array_equal(table["prompt_tokens_est"].to_numpy(), server_view(Tokenizer.from_file(str(path)), table))


def test_the_check_on_a_sample_finds_a_wrong_count_and_counts_every_prompt_whole(tmp_path, tokenizer_file,
                                                                                 monkeypatch):
    """The pieces' counts are checked against the tokenizer's whole count: a piece counted one too
    many (as a tokenizer whose pieces are not tokenized alone would be) is found, and every prompt
    is counted whole from then on."""
    from tokenizers import Tokenizer

    tokens = load_tokenizer(str(tokenizer_file))
    monkeypatch.setattr(TokenCounter, "_piece", lambda self, piece: len(self._tok.model.tokenize(piece)) + 1)
    table = build_trace(load_scenario(mixed(tmp_path, 40))[0], tokens=tokens)
    assert tokens.whole
    exact = server_view(Tokenizer.from_file(str(tokenizer_file)), table)
    assert np.array_equal(table["prompt_tokens_est"].to_numpy(), exact)


def test_a_trace_file_and_a_run_folder_say_how_the_lengths_were_counted(tmp_path, tokenizer_file):
    scenario, _ = load_scenario(mixed(tmp_path, 30))
    tokens = load_tokenizer(str(tokenizer_file))
    build_trace_file(scenario, tmp_path / "t.parquet", "0" * 64, tokens=tokens)
    meta = pq.read_schema(tmp_path / "t.parquet").metadata
    assert meta[META_TOKENIZER] == tokens.label.encode()
    run = tmp_path / "run"
    write_trace(build_trace(scenario, tokens=tokens), run / "trace.parquet", "mixed", "0" * 64)
    digest = tokens.label.split()[-1]
    assert counted_by(run) == f"counted by the tokenizer tokenizer.json (sha256 {digest[:16]})"
    write_trace(build_trace(scenario), run / "trace.parquet", "mixed", "0" * 64)
    assert counted_by(run) == "estimate: 4 characters a token"


def test_a_soaks_parts_are_cut_by_the_tokenizer_as_they_are_written(tmp_path, tokenizer_file):
    from tokenizers import Tokenizer

    from scenarios.stream import TraceStream, part_name

    tokens = load_tokenizer(str(tokenizer_file))
    stream = TraceStream(load_scenario(DATA / "tiny-mix.toml")[0], "0" * 64, 20.0, 10.0, tokens=tokens)
    stream.start(tmp_path / "trace")
    assert stream.write(tmp_path / "trace", 1)
    part = pq.read_table(tmp_path / "trace" / part_name(1))
    assert part.schema.metadata[META_TOKENIZER] == tokens.label.encode() and part.num_rows > 50
    exact = server_view(Tokenizer.from_file(str(tokenizer_file)), part)
    assert np.array_equal(part["prompt_tokens_est"].to_numpy(), exact)


@pytest.mark.parametrize("content, words", [
    (None, "is a directory"), ("not json", "not a tokenizer.json"), ('{"version": "1.0"}', "not a tokenizer.json"),
    (b"\xff\xfe", "not a tokenizer.json")])
def test_a_file_that_is_not_a_tokenizer_is_one_line(tmp_path, content, words):
    path = tmp_path / "tokenizer.json"
    if content is None:
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(ScenarioError) as err:
        load_tokenizer(str(path))
    assert words in str(err.value) and "\n" not in str(err.value) and str(err.value).startswith("--tokenizer ")


# ---- the plan against the server's counts --------------------------------------------------------
def test_relative_errors_median_and_p99_of_their_size_against_numpy():
    rng = np.random.default_rng(3)
    planned = rng.integers(1, 2000, 1000).astype(float)
    counted = np.round(planned * rng.normal(1.05, 0.1, 1000))
    planned[:3] = [0, np.nan, 10]                 # a plan of 0 tokens, an unknown one: left out
    errors = relative_errors(planned, counted)
    assert len(errors) == 998
    keep = slice(2, None)
    want = counted[keep] / planned[keep] - 1
    np.testing.assert_allclose(errors, want)
    stats = error_stats(errors)
    assert stats["p50"][0] == pytest.approx(np.percentile(want, 50))
    assert stats["abs_p99"][0] == pytest.approx(np.percentile(np.abs(want), 99))
    assert stats["count"][0] == 998
    low, high = stats["abs_p99"][1:]
    assert low <= stats["abs_p99"][0] <= high and math.isfinite(high)


def _records(trace: pa.Table, mode: str, prompt: np.ndarray, completion: np.ndarray) -> list[dict]:
    return [{"run_id": "r", "mode": mode, "replica": f"{mode}-0", "worker": "w0", "tenant": t, "request_id": rid,
             "status": "ok", "scheduled_ns": 1, "offset_s": 0.0, "prompt_tokens": int(p),
             "completion_tokens": int(c)}
            for t, rid, p, c in zip(trace["tenant"].to_pylist(), trace["request_id"].to_pylist(), prompt, completion,
                                    strict=True)]


def test_token_rows_join_the_records_to_the_trace_by_request_id_and_mark_a_p99_of_too_few():
    n = supported_count(0.99) + 32     # the chat tenant has enough for a p99; the code tenant does not
    trace = pa.table({"request_id": [f"r{i:06d}" for i in range(n + 40)],
                      "tenant": ["chat"] * n + ["code"] * 40,
                      "prompt_tokens_est": np.full(n + 40, 100, dtype=np.int32),
                      "max_tokens": np.full(n + 40, 50, dtype=np.int32),
                      "ignore_eos": [False] * (n + 40), "prompt_source": ["builtin"] * (n + 40)})
    prompt = np.r_[np.full(n, 110), np.full(40, 100)]                 # chat: +10% (its template); code: exact
    completion = np.r_[np.full(n, 25), np.full(40, 50)]               # chat ended early: -50%
    rows = _records(trace, "baseline", prompt, completion)
    records = pa.Table.from_pylist(rows[::-1], schema=REQUEST_SCHEMA)   # in another order than the trace
    failed = pa.Table.from_pylist([{**rows[0], "request_id": "r999999", "prompt_tokens": 1}], schema=REQUEST_SCHEMA)
    records = pa.concat_tables([records, failed])    # a record the trace does not hold: left out
    found = token_rows(records, trace, ["baseline"])
    long = pa.Table.from_pylist([{"run_id": "r", "mode": m, "tenant": t, "metric": metric, "statistic": s,
                                  "value": v, "ci_low": lo, "ci_high": hi} for m, t, metric, s, v, lo, hi in found],
                                schema=LONG_SCHEMA)
    view = SummaryView(long)
    assert view.get("baseline", "prompt_tokens_error", "p50", "chat") == pytest.approx(0.10)
    assert view.get("baseline", "output_tokens_error", "p50", "chat") == pytest.approx(-0.5)
    assert view.get("baseline", "prompt_tokens_error", "abs_p99", "code") == 0.0
    assert view.get("baseline", "prompt_tokens_error", "count", "code") == 40
    assert view.get("baseline", "prompt_tokens_error", "count") == n + 40
    assert not view.too_few("baseline", "prompt_tokens_error", "abs_p99", "chat")
    assert view.too_few("baseline", "prompt_tokens_error", "abs_p99", "code")
    header, shown = check_rows(view)
    by = {(r[0], r[1]): r for r in shown}
    assert header[2:5] == ["prompt: median", "prompt: p99 of size", "n"]
    assert by["chat", "baseline"][2:] == ["+10.0%", "10.0%", f"{n:,}", "-50.0%", "50.0%", f"{n:,}"]
    assert by["code", "baseline"][2:5] == ["+0.0%", "0.0%† too few", "40"]
    assert by["all", "baseline"][4] == f"{n + 40:,}"
    # two modes with the same figures (one tokenizer behind both): one row says so; differing, a row each
    twice = pa.concat_tables([long, long.set_column(long.schema.get_field_index("mode"), "mode",
                                                    pa.array(["eagle"] * long.num_rows))])
    _, both = check_rows(SummaryView(twice))
    assert [(r[0], r[1]) for r in both] == [("chat", "every mode"), ("code", "every mode"), ("all", "every mode")]
    other = twice.filter(pc.invert(pc.and_(pc.equal(twice["mode"], "eagle"), pc.equal(twice["tenant"], "chat"))))
    _, split = check_rows(SummaryView(other))
    assert ("chat", "baseline") in {(r[0], r[1]) for r in split} and ("code", "every mode") not in \
        {(r[0], r[1]) for r in split if r[0] == "chat"}


def test_a_lengths_only_import_says_its_acceptance_is_not_content_valid(tmp_path):
    """An Azure trace holds lengths only: the importer writes prompts of the project's own text to
    them with ignore_eos, and the analysis (which imports no scenarios) names such a trace by its
    prompt_source, which this holds to the importer's."""
    csv = tmp_path / "azure.csv"
    csv.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"
                   "2023-11-16 18:15:50.9951690,396,109\n")
    imported = import_trace(csv, "azure").table
    assert set(imported["ignore_eos"].to_pylist()) == {True}
    notes = content_notes(imported)
    assert len(notes) == 1 and notes[0].startswith("azure: acceptance not content-valid: its trace (azure.csv, azure)")
    assert "filler text" in notes[0]


def test_a_real_content_tenant_with_ignore_eos_is_said_when_its_trace_is_built_and_in_its_report(tmp_path):
    text = mixed(tmp_path, 20).read_text().replace('prompts = "humaneval-rust"\n',
                                                   'prompts = "humaneval-rust"\nignore_eos = true\n')
    (tmp_path / "eos.toml").write_text(text)
    scenario, _ = load_scenario(tmp_path / "eos.toml")
    (note,) = eos_notes(scenario)
    assert note.startswith("tenant he: ignore_eos = true with real prompts (humaneval-rust)")
    plan = build_trace(scenario)
    assert content_notes(plan) == ["he: ignore_eos with real prompts (humaneval-rust): its answers run past where the "
                                   "model would stop, so its acceptance is partly measured on text after the answer's "
                                   "end"]
    assert not eos_notes(load_scenario(mixed(tmp_path, 20))[0])   # by default, real prompts stop at their end
    # a replay's trace carries it to the manifest, and the command says it as the run starts
    assert prepare_trace(TraceOptions(scenario=str(tmp_path / "eos.toml"))).info["notes"] == [note]
    assert "notes" not in prepare_trace(TraceOptions(scenario=str(mixed(tmp_path, 20)))).info


# ---- a run's reports (the session's run against the simulator, tiny-mix: chat and rust) ----------
@pytest.mark.e2e
def test_every_report_of_a_run_holds_the_plan_against_the_servers_counts(session_run):
    run_dir, ran = session_run
    view = SummaryView(pq.read_table(run_dir / "summary.parquet"))
    for mode in ("baseline", "eagle"):
        # the simulator counts a completion's prompt as the plan estimates it (4 characters a token),
        # and a chat request's with its chat template's tokens; ignore_eos: every answer is max_tokens
        assert view.get(mode, "prompt_tokens_error", "p50", "rust") == 0.0
        assert view.get(mode, "prompt_tokens_error", "p50", "chat") > 0.02
        assert view.get(mode, "output_tokens_error", "abs_p99", "chat") == 0.0
        assert view.too_few(mode, "prompt_tokens_error", "abs_p99", "chat")   # 24 requests: no p99
        ok = view.get(mode, "requests", "ok")
        assert view.get(mode, "prompt_tokens_error", "count") == view.get(mode, "output_tokens_error", "count") == ok
    report = (run_dir / "report.md").read_text()
    section = report.split("## Token counts: the plan against the server")[1].split("\n## ")[0]
    assert "estimate: 4 characters a token" in section and "chat template" in section
    _, rows = check_rows(view)
    for row in rows:
        assert "| " + " | ".join(row) + " |" in section
    assert "token counts: the server's usage against the plan" in ran.stdout
    assert "Token counts: the plan against the server</h2>" in (run_dir / "report.html").read_text()
    plan = plan_of(run_dir)
    assert plan is not None and json.loads((run_dir / "manifest.json").read_text())["scenario"]["tokens"] == \
        "estimate: 4 characters a token"
