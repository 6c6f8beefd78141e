"""The bad-input matrix: files and command lines wrong in every way users manage, each one clear
line and exit 2 (never a traceback), and a target that is not an OpenAI-compatible server, whose
replies end as classified errors in the records. One row per case; README's "Bad input" table
lists them."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from analysis.reader import read_requests
from tests.conftest import DATA, ROOT, Ran, cli, free_port, sim_server

TINY = (DATA / "tiny-mix.toml").read_text()
FLEET = (ROOT / "cluster" / "fleets" / "local-sim.toml").read_text()


def _one_line(r: Ran, *words: str) -> None:
    err = r.stderr.strip()
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], err)
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)


def _file(tmp_path: Path, name: str, content: str | bytes | None) -> Path:
    path = tmp_path / name
    if content is None:          # a directory where a file belongs
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


SCENARIOS = [  # (case, the file's content, words the one line holds)
    ("syntax error", 'name = "tiny\n', "not valid TOML"),
    ("unknown key", TINY.replace("seed = 7", "seed = 7\nbogus = 1"), "bogus"),
    ("wrong type", TINY.replace("requests = 1000", 'requests = "many"'), "requests"),
    ("negative rate", TINY.replace("rate = 12.0", "rate = -3.0"), "rate"),
    ("absurd share", TINY.replace("share = 0.5", "share = 7", 1), "share"),
    ("empty mix", TINY.split("[tenants.chat]")[0] + "[tenants]\n", "tenants"),
    ("non-UTF-8", TINY.encode().replace(b"tiny-mix", b"tiny-\xff\xfe"), "line 2, column 14: byte 0xff"),
    ("a directory", None, "is a directory"),
]


@pytest.mark.parametrize("case,content,words", SCENARIOS, ids=[c[0] for c in SCENARIOS])
def test_a_bad_scenario_file_is_one_line(tmp_path, case, content, words):
    path = _file(tmp_path, "s.toml", content)
    _one_line(cli("trace", "build", "--scenario", str(path), "--out", str(tmp_path / "t.parquet")), words)


def test_a_missing_scenario_file_is_one_line(tmp_path):
    _one_line(cli("trace", "build", "--scenario", str(tmp_path / "none.toml"), "--out", str(tmp_path / "t")),
              "does not exist")


FLEETS = [
    ("syntax error", "name = [\n", "TOML"),
    ("unknown key", FLEET.replace("[modes.baseline]", "colour = 1\n[modes.baseline]", 1), "colour"),
    ("wrong type", FLEET + "\nreplicas = \"two\"\n", "replicas"),
    ("negative", FLEET + "\nreplicas = -1\n", "replicas"),
    ("a mode that leaves the folder", FLEET.replace("[modes.baseline]", '[modes."../x"]'), "not a plain name"),
    ("non-UTF-8", FLEET.encode() + b"\n# \xff\n", "is not UTF-8 text"),
]


@pytest.mark.parametrize("case,content,words", FLEETS, ids=[c[0] for c in FLEETS])
def test_a_bad_fleet_file_is_one_line(tmp_path, case, content, words):
    path = _file(tmp_path, "f.toml", content)
    _one_line(cli("plan", "--fleet", str(path), "--out", str(tmp_path)), words)


def test_a_missing_or_directory_fleet_file_is_one_line(tmp_path):
    cases = ((tmp_path / "none.toml", "does not exist"), (_file(tmp_path, "d.toml", None), "is a directory"))
    for path, words in cases:
        _one_line(cli("plan", "--fleet", str(path), "--out", str(tmp_path)), words)


def _trace(tmp_path: Path) -> tuple[pa.Table, Path]:
    path = tmp_path / "good.parquet"
    r = cli("trace", "build", "--scenario", str(DATA / "tiny-mix.toml"), "--requests", "20", "--out", str(path))
    assert r.returncode == 0, r.stderr
    return pq.read_table(path), path


def _with_offsets(table: pa.Table, change) -> pa.Table:
    offsets = table["offset_s"].to_pylist()
    change(offsets)
    return table.set_column(table.schema.get_field_index("offset_s"), "offset_s", pa.array(offsets, pa.float64()))


def test_bad_trace_files_are_one_line_naming_the_row(tmp_path):
    table, good = _trace(tmp_path)

    def swap(o):
        o[3], o[4] = o[4] + 1.0, o[3]

    def negative(o):
        o[0] = -1.0

    def nan(o):
        o[2] = float("nan")

    def several(o):   # three rows of two kinds: each kind said, with how many more rows have it
        o[0], o[2], o[3] = -1.0, float("nan"), float("inf")

    cases = [("several", _with_offsets(table, several), "row 0 (request", "negative (a trace starts at 0)",
              "row 2 (request", "not a finite number (and 1 more rows)"),
             ("too long", _with_offsets(table, lambda o: o.__setitem__(-1, 1e12)), "past the 30 days a trace may span"),
             ("unsorted", _with_offsets(table, swap), "row 4", "earlier than the row before"),
             ("negative", _with_offsets(table, negative), "row 0", "negative"),
             ("not a number", _with_offsets(table, nan), "row 2", "not a finite number"),
             ("missing column", table.drop_columns(["max_tokens"]), "max_tokens", "missing"),
             ("duplicate id", table.set_column(0, "request_id", pa.array(["r1"] * table.num_rows)), "r1",
              "more than once")]
    for case, bad, *words in cases:
        path = tmp_path / f"{case}.parquet"
        pq.write_table(bad.replace_schema_metadata(table.schema.metadata), path)
        _one_line(cli("trace", "show", str(path)), *words)
    (tmp_path / "text.parquet").write_text("not parquet")
    _one_line(cli("trace", "show", str(tmp_path / "text.parquet")), "not a Parquet trace")
    _one_line(cli("trace", "show", str(tmp_path / "none.parquet")), "does not exist")
    _one_line(cli("trace", "show", str(_file(tmp_path, "dir.parquet", None))), "is a directory")
    assert cli("trace", "show", str(good)).returncode == 0


FLAGS = [
    (["run", "--requests", "0"], "--requests"),
    (["run", "--requests", "-5"], "--requests"),
    (["run", "--rate-scale", "nan"], "--rate-scale"),
    (["run", "--timeout", "inf"], "--timeout"),
    (["run", "--max-inflight", "0"], "--max-inflight"),
    (["run", "--max-errors", "150"], "--max-errors"),
    (["run", "--run-id", "../x"], "not a plain name"),
    (["run", "--modes", "nosuch"], "nosuch"),
    (["run", "--bogus"], "--bogus"),
    (["ui", "--web-port", "70000"], "--web-port"),
    (["soak", "--window", "1s"], "--window"),
    (["sim", "m", "--max-concurrent-requests", "0"], "--max-concurrent-requests"),
]


@pytest.mark.parametrize("argv,words", FLAGS, ids=[" ".join(a) for a, _ in FLAGS])
def test_a_bad_flag_is_one_line(tmp_path, argv, words):
    _one_line(cli(*argv, "--out", str(tmp_path)) if argv[0] != "sim" else cli(*argv), words)


TOKENIZERS = [  # (case, the --tokenizer file's content, words the one line holds)
    ("missing", "", "does not exist"),
    ("a directory", None, "is a directory"),
    ("not JSON", "<html>a model card</html>", "not a tokenizer.json"),
    ("JSON, not a tokenizer", '{"model": {"type": "BPE"}}', "not a tokenizer.json"),
]


@pytest.mark.parametrize("command", [["trace", "build"], ["run"], ["plan"]], ids=" ".join)
@pytest.mark.parametrize("case,content,words", TOKENIZERS, ids=[c[0] for c in TOKENIZERS])
def test_a_bad_tokenizer_is_one_line(tmp_path, command, case, content, words):
    path = tmp_path / "tokenizer.json" if content == "" else _file(tmp_path, "tokenizer.json", content)
    out = ["--out", str(tmp_path / ("t.parquet" if command == ["trace", "build"] else "results"))]
    _one_line(cli(*command, "--scenario", str(DATA / "tiny-mix.toml"), "--tokenizer", str(path), *out),
              "--tokenizer", words)
    assert not (tmp_path / "t.parquet").exists() and not (tmp_path / "results").exists()


def test_a_tokenizer_for_a_trace_file_is_one_line(tmp_path):
    trace = tmp_path / "t.parquet"
    assert cli("trace", "build", "--scenario", str(DATA / "tiny-mix.toml"), "--out", str(trace)).returncode == 0
    _one_line(cli("run", "--trace", str(trace), "--tokenizer", str(trace), "--out", str(tmp_path)),
              "--tokenizer: a --trace file's prompts were cut when it was built")


@pytest.fixture
def not_openai():
    kinds = ["html", "empty", "json", "redirect", "models_html"]
    ports = {k: free_port() for k in kinds}
    proc = subprocess.Popen([sys.executable, "-m", "tests.not_openai_server", *(f"{k}={p}" for k, p in ports.items())],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        yield {k: f"http://127.0.0.1:{p}" for k, p in ports.items()}
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


@pytest.mark.e2e
def test_a_target_that_is_not_an_openai_server(tmp_path, not_openai):
    # a web server where the inference server should be: refused before anything is sent
    r = cli("run", "--endpoints", f"baseline={not_openai['models_html']}", "--out", str(tmp_path))
    _one_line(r, "/v1/models")
    # servers that list a model but do not stream: every request a classified error, none lost
    modes = ["html", "empty", "json", "redirect"]
    started = time.monotonic()
    r = cli("run", "--endpoints", ",".join(f"{m}={not_openai[m]}" for m in modes), "--scenario",
            str(DATA / "tiny-mix.toml"), "--requests", "8", "--out", str(tmp_path), "--run-id", "bad",
            "--timeout", "10")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout[-1500:] + r.stderr   # the gate: none succeeded
    assert time.monotonic() - started < 240
    records = read_requests(tmp_path / "bad")
    kinds = {}
    for mode in modes:
        mine = records.filter(pc.equal(records["mode"], mode))
        assert mine.num_rows == 8 and set(mine["status"].to_pylist()) == {"error"}, (mode, mine["status"])
        kinds[mode] = set(mine["error_kind"].to_pylist())
    assert kinds == {"html": {"not_sse"}, "empty": {"not_sse"}, "json": {"not_sse"}, "redirect": {"http"}}, kinds
    statuses = set(read_requests(tmp_path / "bad").filter(pc.equal(records["mode"], "redirect"))["http_status"]
                   .to_pylist())
    assert statuses == {302}


@pytest.mark.e2e
def test_prompts_longer_than_the_servers_context_are_classified_400s(tmp_path):
    with sim_server("--tensor-parallel-size", "4", "--served-model-name", "m", "--max-model-len", "300") as url:
        r = cli("run", "--endpoints", f"baseline={url}", "--scenario", str(DATA / "tiny-mix.toml"), "--requests",
                "16", "--out", str(tmp_path), "--run-id", "long", "--max-errors", "100")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stdout[-1500:] + r.stderr
    records = read_requests(tmp_path / "long")
    too_long = records.filter(pc.equal(records["status"], "error"))
    assert records.num_rows == 16 and 0 < too_long.num_rows < 16   # the rust tenant's prompts pass 300 tokens
    assert set(too_long["error_kind"].to_pylist()) == {"http"} and set(too_long["http_status"].to_pylist()) == {400}
    assert all("maximum context length is 300 tokens" in e for e in too_long["error"].to_pylist())
