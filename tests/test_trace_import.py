"""Real traces in the layouts users have: imported, shown, and replayed by `loadtest run --trace`."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from analysis.reader import read_requests
from scenarios import ScenarioError
from scenarios.importers import ImportOptions, import_trace
from tests.conftest import DATA, cli, sim_server

IMPORTS = DATA / "import"
CASES = {
    "sharegpt": ("sharegpt.json", 4),     # the unanswered conversation is skipped; a2's two turns are two
    "jsonl": ("requests.jsonl", 5),
    "azure": ("azure.csv", 5),            # a row with 0 generated tokens is skipped
    "burstgpt": ("burstgpt.csv", 5),      # a failed request (0 response tokens) is skipped
}


@pytest.mark.parametrize("fmt", list(CASES))
def test_each_format_imports_its_fixture(fmt, tmp_path):
    name, rows = CASES[fmt]
    out = tmp_path / "trace.parquet"
    res = cli("trace", "import", str(IMPORTS / name), "--format", fmt, "--out", str(out))
    assert res.returncode == 0, res.stderr
    t = pq.read_table(out)
    assert t.num_rows == rows
    assert t["offset_s"][0].as_py() == 0.0
    assert all(m >= 1 for m in t["max_tokens"].to_pylist())
    shown = cli("trace", "show", str(out))
    assert shown.returncode == 0 and f"{rows} requests" in shown.stdout


def test_timestamps_speedup_window_and_lengths():
    t = import_trace(IMPORTS / "requests.jsonl", "jsonl").table
    assert t["offset_s"].to_pylist() == pytest.approx([0.0, 0.5, 1.25, 2.0, 2.2])
    assert t["tenant"].to_pylist()[:3] == ["translate", "math", "jsonl"]
    fast = import_trace(IMPORTS / "requests.jsonl", "jsonl", ImportOptions(speedup=2.0)).table
    assert fast["offset_s"].to_pylist() == pytest.approx([0.0, 0.25, 0.625, 1.0, 1.1])
    win = import_trace(IMPORTS / "burstgpt.csv", "burstgpt", ImportOptions(window=(100, 200))).table
    assert win.num_rows == 3 and win["tenant"].to_pylist() == ["GPT-4", "GPT-4", "ChatGPT"]
    azure = import_trace(IMPORTS / "azure.csv", "azure").table
    assert azure["max_tokens"].to_pylist() == [44, 109, 15, 7, 32]
    est = azure["prompt_tokens_est"].to_pylist()
    assert est == pytest.approx([374, 396, 879, 91, 1210], rel=0.05)  # prompts generated to length
    assert azure["offset_s"].to_pylist()[1] == pytest.approx(4.3145790)
    share = import_trace(IMPORTS / "sharegpt.json", "sharegpt", ImportOptions(rate=2.0, sample=2, seed=1)).table
    assert share.num_rows == 2 and json.loads(share["messages"][0].as_py())[0]["role"] == "user"


@pytest.mark.parametrize("content, fmt, needle", [
    ('{"prompt": "x"}\n', "jsonl", ":1: max_tokens: expected an integer from 1 to 2,147,483,647"),
    # values past what a trace stores, or not finite (each once a traceback)
    ('{"prompt": "x", "max_tokens": 10000000000}\n', "jsonl", ":1: max_tokens: expected an integer from 1 to "
     "2,147,483,647"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,inf,4\n", "azure",
     "row 2: ContextTokens: expected a finite number, got 'inf'"),
    ("Timestamp,Request tokens,Response tokens\nnan,3,4\n", "burstgpt", "row 2: Timestamp: expected a finite number"),
    ("Timestamp,Request tokens,Response tokens\n5,3,1e12\n", "burstgpt", "row 2: Response tokens: expected a count "
     "from 0 to 2,147,483,647"),
    ('{"max_tokens": 3}\n', "jsonl", ":1: prompt: required string is missing"),
    ("TIMESTAMP,ContextTokens\n2023-11-16 18:15:46,3\n", "azure", "missing column 'GeneratedTokens'"),
    ("Timestamp,Request tokens,Response tokens\n5,ten,3\n", "burstgpt", "row 2: Request tokens: expected a number"),
    ("[1, 2", "sharegpt", "not valid JSON"),
])
def test_bad_trace_files_get_one_line(tmp_path, content, fmt, needle):
    path = tmp_path / "bad.txt"
    path.write_text(content)
    with pytest.raises(ScenarioError, match=needle):
        import_trace(path, fmt)
    res = cli("trace", "import", str(path), "--format", fmt, "--out", str(tmp_path / "o.parquet"))
    assert res.returncode == 2 and needle.split(": ")[-1] in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("fmt, text", [
    ("jsonl", b'{"prompt": "caf\xe9", "max_tokens": 3}\n'),
    ("azure", b"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46,3,4\n2023-11-16 18:15:47,caf\xe9,4\n"),
    ("burstgpt", b"Timestamp,Model,Request tokens,Response tokens\n5,caf\xe9,3,4\n"),
    ("sharegpt", b'[{"conversations": [{"from": "human", "value": "caf\xe9"}]}]'),
    # a BOM first (as spreadsheet exports write): the place is still counted from the file's start
    ("jsonl", b'\xef\xbb\xbf{"prompt": "a", "max_tokens": 3}\n{"prompt": "caf\xe9", "max_tokens": 3}\n'),
])
def test_a_byte_that_is_not_utf8_is_one_line_naming_its_place(tmp_path, fmt, text):
    path = tmp_path / "latin1.txt"
    path.write_bytes(text)
    res = cli("trace", "import", str(path), "--format", fmt, "--out", str(tmp_path / "o.parquet"))
    bad = text.index(b"\xe9")
    line, column = text[:bad].count(b"\n") + 1, bad - text.rfind(b"\n", 0, bad)
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines() == [f"loadtest trace import: error: {path}: line {line}, column {column}: "
                                               "byte 0xe9 is not UTF-8 text (save the file as UTF-8)"]


def test_dropped_rows_are_counted_and_said(tmp_path):
    share = import_trace(IMPORTS / "sharegpt.json", "sharegpt", ImportOptions(first_turn_only=True))
    assert share.read == 4 and share.table.num_rows == 3
    assert share.dropped == {"the first user turn has no answer after it": 1}
    assert share.notes == {"multi-turn: only the first user turn and its answer are replayed (--first-turn-only)": 1}
    # a system turn before the question is kept as the system message
    first = {json.loads(m)[0]["role"] for m in share.table["messages"].to_pylist()}
    assert first == {"user", "system"}
    res = cli("trace", "import", str(IMPORTS / "sharegpt.json"), "--format", "sharegpt", "--out",
              str(tmp_path / "s.parquet"), "--first-turn-only")
    assert "dropped 1 of 4: the first user turn has no answer after it" in res.stdout
    assert "1 of 4: multi-turn: only the first user turn and its answer are replayed" in res.stdout

    model_first = tmp_path / "model-first.json"
    model_first.write_text(json.dumps([
        {"conversations": [{"from": "gpt", "value": "Hello! How can I help?"}, {"from": "human", "value": "Hi"},
                           {"from": "gpt", "value": "Hi there"}]},
        {"conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]}]))
    assert import_trace(model_first, "sharegpt").dropped == {
        "the conversation starts with a 'gpt' turn, not a user turn": 1}

    burst = cli("trace", "import", str(IMPORTS / "burstgpt.csv"), "--format", "burstgpt", "--out",
                str(tmp_path / "b.parquet"), "--window", "0:150")
    assert "dropped 1 of 6: Response tokens is 0 (the request generated nothing in the source)" in burst.stdout
    assert "outside --window 0:150" in burst.stdout
    azure = import_trace(IMPORTS / "azure.csv", "azure")
    assert azure.dropped == {"GeneratedTokens is 0 (the request generated nothing in the source)": 1}


@pytest.mark.e2e
@pytest.mark.parametrize("fmt", list(CASES))
def test_imported_trace_replays_with_loadtest_run(fmt, tmp_path, world_fleet):
    name, rows = CASES[fmt]
    trace = tmp_path / "trace.parquet"
    assert cli("trace", "import", str(IMPORTS / name), "--format", fmt, "--out", str(trace),
               "--speedup", "20").returncode == 0
    res = cli("run", "--trace", str(trace), "--endpoints", str(world_fleet.state), "--modes", "baseline",
              "--out", str(tmp_path / "results"), "--run-id", "r")
    assert res.returncode == 0, res.stdout + res.stderr
    records = read_requests(tmp_path / "results" / "r")
    assert records.num_rows == rows and set(records["status"].to_pylist()) == {"ok"}
    manifest = json.loads((tmp_path / "results" / "r" / "manifest.json").read_text())
    assert manifest["scenario"]["name"] == f"import:{fmt}:{name}"


@pytest.mark.e2e
def test_run_applies_rate_scale_to_a_trace_file_and_refuses_seed(tmp_path):
    trace = tmp_path / "trace.parquet"
    assert cli("trace", "import", str(IMPORTS / "requests.jsonl"), "--format", "jsonl", "--out",
               str(trace)).returncode == 0
    seeded = cli("run", "--trace", str(trace), "--seed", "3", "--endpoints", "baseline=http://127.0.0.1:9")
    assert seeded.returncode == 2 and seeded.stderr.count("error:") == 1, seeded.stderr
    assert "--seed: a trace file is replayed exactly as it was built" in seeded.stderr
    for command in ("run", "ui"):
        res = cli(command, "--trace", str(trace), "--seed", "3", "--endpoints", "baseline=http://127.0.0.1:9")
        assert res.returncode == 2 and "--seed" in res.stderr, res.stderr
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m", "--time-scale", "0.2") as url:
        res = cli("run", "--trace", str(trace), "--rate-scale", "4", "--endpoints", f"baseline={url}",
                  "--out", str(tmp_path / "results"), "--run-id", "fast")
    assert res.returncode == 0, res.stdout + res.stderr
    replayed = pq.read_table(tmp_path / "results" / "fast" / "trace.parquet")["offset_s"].to_pylist()
    assert replayed == pytest.approx([t / 4 for t in pq.read_table(trace)["offset_s"].to_pylist()])
    manifest = json.loads((tmp_path / "results" / "fast" / "manifest.json").read_text())
    assert manifest["scenario"]["rate_scale"] == 4.0
