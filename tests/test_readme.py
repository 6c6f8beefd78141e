"""The README says what the code does: the columns it lists are the columns written, the paths in
its examples are the paths its run writes, and it promises no figure nothing computes."""

from __future__ import annotations

import re

from cluster.scrape import METRICS_SCHEMA
from contract.records import REQUEST_SCHEMA
from tests.conftest import ROOT, cli

README = (ROOT / "README.md").read_text()


def _row(path: str) -> str:
    return next(line for line in README.splitlines() if line.startswith(f"| `{path}"))


def _backticked(text: str) -> set[str]:
    return {name.strip() for chunk in re.findall(r"`([^`]+)`", text) for name in chunk.split(",")}


def test_the_request_columns_listed_are_the_columns_written():
    listed = _backticked(_row("requests/").split("|")[2])
    assert listed == set(REQUEST_SCHEMA.names)


def test_the_server_metrics_columns_listed_are_the_columns_written():
    listed = _backticked(_row("server_metrics/").split("|")[2]) & set(METRICS_SCHEMA.names)
    assert listed == set(METRICS_SCHEMA.names) and "`time`" not in _row("server_metrics/")


def test_example_paths_are_the_demo_runs_folder():
    run_id = re.search(r'make run ARGS="--run-id (\w+)"', README).group(1)
    assert f"results: results/{run_id}/" in README
    for path in re.findall(r"results/(\w+)/requests", README):
        assert path == run_id, f"an example reads results/{path}, the demo writes results/{run_id}"


def test_help_promises_nothing_that_is_not_computed():
    top = cli("--help").stdout
    commands = top.split("positional arguments")[1]
    assert "report" in commands and "compare" in commands and "goodput" in top
    assert "sweep" in commands and "capacity" in commands and "plan" in commands and "calibrate" in commands
    assert "soak" in commands
    assert "--slo-gate" in cli("run", "--help").stdout


def test_every_test_the_reliability_matrix_cites_exists():
    text = (ROOT / "docs" / "reliability.md").read_text()
    cited = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(cited) > 20
    for path, name in cited:
        source = (ROOT / path).read_text()
        assert not name or f"def {name}(" in source, f"{path}::{name} is cited but does not exist"
    for name in re.findall(r"`::(\w+)`", text):   # a second test of the file named just before
        assert any(f"def {name}(" in (ROOT / p).read_text() for p, _ in cited), name
    assert "docs/reliability.md" in README
