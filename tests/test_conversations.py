"""Multi-turn conversations (issue 43): imported turn by turn, kept in one shard, and replayed so
that turn N+1 goes out its think time after turn N's answer, carrying the answer the server gave;
SLOs attached on import or on `run`, judged by --slo-gate; JSONL through the chat API."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from itertools import pairwise

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from analysis.reader import read_requests
from loadtest.replay import protocol
from loadtest.replay.conversations import Answer, Conversations, followed_turns, next_messages, with_answer
from loadtest.replay.options import ReplayConfig
from loadtest.replay.shards import iter_index, iter_shard, shard_keys, shard_size
from scenarios import ScenarioError
from scenarios.importers import ImportOptions, import_trace
from scenarios.trace import trace_problem, write_trace
from tests.conftest import DATA, ROOT, cli, free_port

IMPORTS = DATA / "import"


def sharegpt_file(path, conversations: int, turns: int, words: int = 12) -> None:
    """`conversations` ShareGPT conversations of `turns` questions, each answered in `words` words."""
    data = []
    for c in range(conversations):
        talk = [{"from": "system", "value": "You are brief."}] if c % 3 == 0 else []
        for t in range(turns):
            talk += [{"from": "human", "value": f"Question {t} of talk {c}: what comes next?"},
                     {"from": "gpt", "value": " ".join(["word"] * words)}]
        data.append({"id": f"talk{c}", "conversations": talk})
    path.write_text(json.dumps(data))


# ---- the pieces, without servers ---------------------------------------------------------------------
def test_a_later_turn_carries_the_answer_given_in_place_of_the_recorded_one():
    sent = [{"role": "system", "content": "s"}, {"role": "user", "content": "q1"}]
    recorded = [*sent, {"role": "assistant", "content": "the source's answer"}, {"role": "user", "content": "q2"}]
    assert next_messages(with_answer(sent, "ours"), recorded) == [
        *sent, {"role": "assistant", "content": "ours"}, {"role": "user", "content": "q2"}]


def test_a_turn_waits_for_the_answer_before_it_and_takes_it_once():
    conv = Conversations(threading.Event, followed_turns([("c", 0), ("c", 1), ("c", 2), (None, None)]))
    assert conv.followed("c", 0) and conv.followed("c", 1) and not conv.followed("c", 2)
    assert conv.wait("c", 1, timeout=0.01) is None          # not answered yet
    threading.Timer(0.05, conv.answered, ("c", 0, Answer("ok", 1.0, ({"role": "user", "content": "q"},)))).start()
    got = conv.wait("c", 1, timeout=5)
    assert got is not None and got.status == "ok" and got.ended == 1.0
    conv.answered("c", 2, Answer("ok", 2.0))                 # nothing follows turn 2: nothing kept
    assert conv._answers == {} and conv._events == {}


def test_every_turn_of_a_conversation_is_in_the_shard_of_its_first(tmp_path):
    path = tmp_path / "share.json"
    sharegpt_file(path, conversations=7, turns=3)
    trace = tmp_path / "t.parquet"
    write_trace(import_trace(path, "sharegpt", ImportOptions(rate=50, think_s=0.3)).table, trace, "x", "0" * 64)
    table = pq.read_table(trace)
    keys = shard_keys(trace)
    assert keys is not None and table.num_rows == 21
    conversation = table["conversation"].to_pylist()
    seen = []
    for index in range(3):
        rows = list(iter_shard(trace, index, 3, keys=keys))
        assert len(rows) == shard_size(table.num_rows, index, 3, keys=keys)
        assert [i for i, _ in iter_index(trace, index, 3, keys=keys)] == [i for i, _ in rows]
        for i, row in rows:
            assert row["conversation"] == conversation[i]
        seen += [i for i, _ in rows]
        # no conversation is split between two shards
        assert {r["conversation"] for _, r in rows}.isdisjoint(
            {r["conversation"] for k in range(3) if k != index for _, r in iter_shard(trace, k, 3, keys=keys)})
    assert sorted(seen) == list(range(21))
    single = tmp_path / "single.parquet"
    write_trace(import_trace(path, "sharegpt", ImportOptions(first_turn_only=True)).table, single, "x", "0" * 64)
    assert shard_keys(single) is None   # no conversations: the shards are the plain i % count


def test_a_trace_whose_turns_are_out_of_order_is_refused_naming_the_row(tmp_path):
    path = tmp_path / "share.json"
    sharegpt_file(path, conversations=2, turns=2)
    table = import_trace(path, "sharegpt", ImportOptions(rate=10, think_s=1.0)).table
    assert trace_problem(table) is None
    later = table["turn"].to_pylist().index(1)
    swapped = table.take([later, *[i for i in range(table.num_rows) if i != later]])
    i = swapped.schema.get_field_index("offset_s")
    swapped = swapped.set_column(i, swapped.schema.field(i), pa.array(sorted(table["offset_s"].to_pylist())))
    problem = trace_problem(swapped)
    assert problem is not None and "row 0" in problem and "turns are not 0, 1, 2, ... in send order" in problem


def test_the_model_sends_a_later_turn_its_think_time_after_the_answer_with_the_answer_in_its_prompt():
    from cluster.sim.calibration import deployment
    from cluster.sim.offline import SimRequest, simulate

    dep = deployment(None)
    first = SimRequest(0.0, 200, 50)
    follows = simulate(dep, [first, SimRequest(0.0, 300, 40, after=0, think_s=2.0)])
    assert follows[1].arrival_s == pytest.approx(follows[0].e2e_s + 2.0)   # after the answer ended, and the think
    # its prompt holds the 50 tokens of the answer before it: served as a 350-token prompt sent then
    same = simulate(dep, [first, SimRequest(follows[1].arrival_s, 350, 40)])[1]
    fewer = simulate(dep, [first, SimRequest(follows[1].arrival_s, 300, 40)])[1]
    assert follows[1].ttft_s == pytest.approx(same.ttft_s) and follows[1].ttft_s > fewer.ttft_s


# ---- import ------------------------------------------------------------------------------------------
def test_sharegpt_imports_every_turn_and_first_turn_only_keeps_the_old_reading(tmp_path):
    share = import_trace(IMPORTS / "sharegpt.json", "sharegpt", ImportOptions(think_s=2.0))
    t = share.table
    assert t.num_rows == 4 and share.notes == {}
    turns = [(c, n) for c, n in zip(t["conversation"].to_pylist(), t["turn"].to_pylist(), strict=True)]
    assert sorted(x for x in turns if x[0]) == [("c000001", 0), ("c000001", 1)]
    second = turns.index(("c000001", 1))
    first = turns.index(("c000001", 0))
    assert t["offset_s"][second].as_py() == pytest.approx(t["offset_s"][first].as_py() + 2.0)
    assert t["think_s"][second].as_py() == 2.0 and t["api"][second].as_py() == "chat"
    messages = json.loads(t["messages"][second].as_py())
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-1]["content"] == "Another one, about fog."
    once = import_trace(IMPORTS / "sharegpt.json", "sharegpt", ImportOptions(first_turn_only=True))
    assert once.table.num_rows == 3 and once.table["conversation"].null_count == 3
    assert once.notes == {"multi-turn: only the first user turn and its answer are replayed (--first-turn-only)": 1}


def test_slos_attach_on_import_per_tenant_or_for_all(tmp_path):
    out = tmp_path / "t.parquet"
    res = cli("trace", "import", str(IMPORTS / "requests.jsonl"), "--format", "jsonl", "--out", str(out),
              "--slo", "ttft_p99_ms=900", "--slo", "math:ttft_p99_ms=300,e2e_p99_ms=5000")
    assert res.returncode == 0, res.stderr
    t = pq.read_table(out)
    for tenant, ttft, e2e in zip(t["tenant"].to_pylist(), t["slo_ttft_p99_ms"].to_pylist(),
                                 t["slo_e2e_p99_ms"].to_pylist(), strict=True):
        assert (ttft, e2e) == ((300.0, 5000.0) if tenant == "math" else (900.0, None))
    bad = cli("trace", "import", str(IMPORTS / "requests.jsonl"), "--format", "jsonl", "--out", str(out),
              "--slo", "maths:ttft_p99_ms=300")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == [
        "loadtest trace import: error: --slo maths:...: the trace has no tenant 'maths' (it has: jsonl, math, sql, "
        "translate)"]
    typo = cli("trace", "import", str(IMPORTS / "requests.jsonl"), "--format", "jsonl", "--out", str(out),
               "--slo", "ttft=300")
    assert typo.returncode == 2 and "expected KEY=MS with KEY one of ttft_p99_ms" in typo.stderr


def test_jsonl_goes_to_the_chat_api_when_the_file_or_the_line_says(tmp_path):
    chat = import_trace(IMPORTS / "requests.jsonl", "jsonl", ImportOptions(api="chat")).table
    assert set(chat["api"].to_pylist()) == {"chat"} and chat["prompt"].null_count == chat.num_rows
    assert json.loads(chat["messages"][0].as_py()) == [
        {"role": "user", "content": json.loads((IMPORTS / "requests.jsonl").read_text().splitlines()[0])["prompt"]}]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        '{"prompt": "plain", "max_tokens": 4}\n'
        '{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], '
        '"max_tokens": 4}\n'
        '{"prompt": "as chat", "api": "chat", "max_tokens": 4}\n')
    t = import_trace(mixed, "jsonl").table
    assert t["api"].to_pylist() == ["completions", "chat", "chat"]
    assert json.loads(t["messages"][1].as_py())[0] == {"role": "system", "content": "be brief"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": [{"role": "user"}], "max_tokens": 4}\n{"prompt": "x", "api": "rpc", '
                   '"max_tokens": 4}\n')
    with pytest.raises(ScenarioError) as err:
        import_trace(bad, "jsonl")
    assert ":1: messages: expected a list of" in str(err.value) and ":2: api: expected one of completions, chat" \
        in str(err.value)
    wrong = cli("trace", "import", str(IMPORTS / "azure.csv"), "--format", "azure", "--api", "chat", "--out",
                str(tmp_path / "o.parquet"))
    assert wrong.returncode == 2 and "--api: only for a jsonl file" in wrong.stderr


# ---- replay ------------------------------------------------------------------------------------------
@pytest.mark.e2e
def test_turn_two_goes_out_its_think_time_after_turn_ones_answer_and_carries_it(tmp_path):
    path = tmp_path / "share.json"
    sharegpt_file(path, conversations=2, turns=3, words=40)   # 40 words: max_tokens 50 (10 chunks of 5)
    table = import_trace(path, "sharegpt", ImportOptions(rate=20, think_s=0.25)).table
    trace = tmp_path / "trace.parquet"
    write_trace(table, trace, "talks", "0" * 64)
    port, log = free_port(), tmp_path / "bodies.jsonl"
    server = subprocess.Popen([sys.executable, "-m", "tests.five_token_server", str(port), "--log", str(log)],
                              cwd=ROOT, start_new_session=True)
    try:
        for _ in range(100):
            try:
                requests.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.05)
        (tmp_path / "logs").mkdir()
        argv = ReplayConfig(trace, "five", (f"http://127.0.0.1:{port}",), "m", "run1", tmp_path).main_argv()
        res = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stdout + res.stderr
        assert protocol.encode_line(protocol.Finished("completed", 6)) in res.stdout.splitlines()
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(5)
    records = {r["request_id"]: r for r in read_requests(tmp_path).to_pylist()}
    rows = table.to_pylist()
    assert len(records) == 6 and {r["status"] for r in records.values()} == {"ok"}
    bodies = [json.loads(line) for line in log.read_text().splitlines()]
    by_question = {b["messages"][-1]["content"]: b for b in bodies}
    for row in rows:
        if not row["turn"]:
            continue
        before = next(r for r in rows if r["conversation"] == row["conversation"] and r["turn"] == row["turn"] - 1)
        prev, rec = records[before["request_id"]], records[row["request_id"]]
        # due its think time after the answer before it ended, and sent then (not at its trace offset)
        assert rec["scheduled_ns"] == pytest.approx(prev["last_token_ns"] + 0.25e9, abs=2e6)
        assert rec["sent_ns"] >= prev["last_token_ns"] + 0.25e9 - 1e6
        # it carried the answer the server gave the turn before, not the source's "word word ..."
        body = by_question[json.loads(row["messages"])[-1]["content"]]
        prev_body = by_question[json.loads(before["messages"])[-1]["content"]]
        answer = body["messages"][-2]
        assert answer["role"] == "assistant" and "word" not in answer["content"]
        assert answer["content"] == f" {prev_body['word']}" * 50
        assert body["messages"][:-2] == prev_body["messages"]


@pytest.mark.e2e
def test_an_imported_conversation_trace_replays_turn_by_turn_and_its_slos_gate_the_run(tmp_path, world_fleet):
    share, trace = tmp_path / "share.json", tmp_path / "trace.parquet"
    sharegpt_file(share, conversations=100, turns=4)
    imported = cli("trace", "import", str(share), "--format", "sharegpt", "--out", str(trace), "--rate", "25",
                   "--think-time", "0.1", "--slo", "ttft_p99_ms=5000,e2e_p99_ms=30000")
    assert imported.returncode == 0, imported.stderr
    assert "100 conversations of 4 turns (400 requests" in cli("trace", "show", str(trace)).stdout
    res = cli("run", "--trace", str(trace), "--endpoints", str(world_fleet.state), "--modes", "baseline",
              "--workers", "2", "--slo-gate", "--out", str(tmp_path / "results"), "--run-id", "talks")
    assert res.returncode == 0, res.stdout + res.stderr
    run = tmp_path / "results" / "talks"
    records = read_requests(run)
    assert records.num_rows == 400 and set(records["status"].to_pylist()) == {"ok"}
    t = pq.read_table(trace)
    by_id = {r["request_id"]: r for r in records.to_pylist()}
    for conv_turns in _turns(t).values():
        recs = [by_id[i] for i in conv_turns]
        assert len({r["worker"] for r in recs}) == 1                 # one process holds the conversation
        for a, b in pairwise(recs):
            assert b["sent_ns"] >= a["last_token_ns"] + 0.1e9 - 1e6   # each turn after the answer before it,
            assert b["prompt_tokens"] > a["prompt_tokens"] + a["completion_tokens"]   # and with it
    slos = json.loads((run / "manifest.json").read_text())["slos"]
    assert [(s["tenant"], s["verdict"]) for s in slos] == [("sharegpt", "met")]
    # the same trace held to a target nothing meets, given on `run`: judged, and the gate fails
    tight = cli("run", "--trace", str(trace), "--endpoints", str(world_fleet.state), "--modes", "baseline",
                "--requests", "40", "--slo", "sharegpt:ttft_p99_ms=1", "--slo-gate", "--out",
                str(tmp_path / "results"), "--run-id", "tight")
    assert tight.returncode == 1, tight.stdout + tight.stderr
    assert "baseline: sharegpt missed its SLO (--slo-gate)" in tight.stdout + tight.stderr


def _turns(table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for rid, conv in zip(table["request_id"].to_pylist(), table["conversation"].to_pylist(), strict=True):
        out.setdefault(conv, []).append(rid)
    return out


TALK = """name = "talk"
requests = 30
demo_requests = 30
seed = 3
[arrival]
process = "poisson"
rate = 8.0
[tenants.chat]
share = 0.6
domain = "chat"
prompts = "mt-bench"
conversation = true
think_s = 0.2
output_tokens = {{ dist = "fixed", value = 24 }}
{extra}
[tenants.sql]
share = 0.4
domain = "sql"
prompt_tokens = {{ dist = "fixed", value = 100 }}
output_tokens = {{ dist = "fixed", value = 16 }}
"""


@pytest.mark.e2e
def test_mt_bench_conversations_send_the_second_question_after_the_first_answer(tmp_path, world_fleet):
    scenario = tmp_path / "talk.toml"
    scenario.write_text(TALK.format(extra=""))
    res = cli("run", "--scenario", str(scenario), "--endpoints", str(world_fleet.state), "--modes", "eagle",
              "--out", str(tmp_path), "--run-id", "talk")
    assert res.returncode == 0, res.stdout + res.stderr
    trace = pq.read_table(tmp_path / "talk" / "trace.parquet").to_pylist()
    records = {r["request_id"]: r for r in read_requests(tmp_path / "talk").to_pylist()}
    assert len(records) == 30 and {r["status"] for r in records.values()} == {"ok"}
    first = {r["conversation"]: r for r in trace if r["turn"] == 0}
    seconds = [r for r in trace if r["turn"] == 1]
    assert seconds, "no conversation reached its second turn"
    for row in seconds:
        before = records[first[row["conversation"]]["request_id"]]
        rec = records[row["request_id"]]
        assert rec["sent_ns"] >= before["last_token_ns"] + 0.2e9 - 1e6
        assert rec["prompt_tokens"] > before["prompt_tokens"] + before["completion_tokens"]
        assert row["category"] == first[row["conversation"]]["category"]   # MT-Bench's own, both turns
    # the plan models the same: each second turn released 0.2 s after its first turn's answer
    plan = cli("plan", "--scenario", str(scenario), "--modes", "eagle", "--rate-scale", "1", "--out", str(tmp_path),
               "--run-id", "plan")
    assert plan.returncode == 0, plan.stdout + plan.stderr


@pytest.mark.parametrize("extra, says", [
    ('api = "completions"', 'conversation: a conversation\'s later turns need api = "chat"'),
])
def test_a_conversation_tenant_is_checked_when_read(tmp_path, extra, says):
    scenario = tmp_path / "talk.toml"
    scenario.write_text(TALK.format(extra=extra))
    res = cli("scenario", "validate", str(scenario))
    assert res.returncode == 2 and says in res.stderr and "Traceback" not in res.stderr
    one_turn = tmp_path / "code.toml"
    one_turn.write_text(TALK.format(extra="").replace('domain = "chat"\nprompts = "mt-bench"',
                                                      'domain = "code"\nprompts = "humaneval"'))
    res = cli("scenario", "validate", str(one_turn))
    assert res.returncode == 2 and "the items of 'humaneval' have one turn each" in res.stderr
    scenario.write_text(TALK.format(extra=""))
    soak = cli("soak", "--scenario", str(scenario), "--duration", "10m", "--out", str(tmp_path))
    assert soak.returncode == 2 and "tenant chat sends conversations, which a soak does not replay" in soak.stderr
