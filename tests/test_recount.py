"""The end's recount: a run whose records lack a scheduled request never ends `completed`, nor
`interrupted`, without saying how many have no record, in one line and in the manifest."""

from __future__ import annotations

from pathlib import Path

import pytest

from common import exits
from contract.manifest import Manifest
from loadtest.engine.guard import Interrupted, guarded, unrecorded_text


def _manifest() -> Manifest:
    return Manifest(run_id="r", scenario={}, fleet={}, modes=["baseline", "eagle"], seed=1, requests=10)


def _lose(manifest: Manifest, then: type[BaseException] | None):
    def replay(signals) -> None:
        manifest.unrecorded.update(baseline=3, eagle=1)
        if then is not None:
            raise then()
    return replay


def test_a_run_that_lost_rows_fails_and_says_how_many(tmp_path, capsys):
    m = _manifest()
    assert guarded(_lose(m, None), m, tmp_path, "loadtest run") == exits.INCOMPLETE
    line = "4 scheduled requests have no record (baseline: 3, eagle: 1): their outcome is unknown"
    assert capsys.readouterr().err.strip() == f"loadtest run: error: {line}"
    on_disk = Manifest.read(tmp_path)
    assert (on_disk.status, on_disk.reason, on_disk.unrecorded) == ("failed", line, {"baseline": 3, "eagle": 1})


@pytest.mark.parametrize("signal", [Interrupted, KeyboardInterrupt])
def test_an_interrupted_run_that_lost_rows_stays_interrupted_and_says_how_many(tmp_path, capsys, signal):
    m = _manifest()
    assert guarded(_lose(m, signal), m, tmp_path, "loadtest run") == exits.INTERRUPTED
    on_disk = Manifest.read(tmp_path)
    assert on_disk.status == "interrupted"
    assert on_disk.reason == f"stopped by signal; {unrecorded_text({'baseline': 3, 'eagle': 1})}"
    assert "4 scheduled requests have no record" in capsys.readouterr().err


def test_a_run_that_lost_nothing_says_nothing(tmp_path, capsys):
    m = _manifest()
    assert guarded(lambda signals: None, m, tmp_path, "loadtest run") == exits.OK
    assert Manifest.read(tmp_path).reason is None and capsys.readouterr().err == ""
    assert unrecorded_text({}) is None


def test_sigterm_before_the_replays_handlers_ends_the_run_interrupted(tmp_path, monkeypatch):
    """SIGTERM (made KeyboardInterrupt by the command line's handler) that lands after /metrics is up
    but before the replay's own handlers take the signals: the targets file goes, the manifest says
    interrupted, exit 130 (CI saw `loadtest sweep: interrupted` with no manifest status once)."""
    import os
    import signal as signals_module

    from loadtest.commands import cli
    from loadtest.engine import guard, pipeline
    from loadtest.live.metrics_server import MetricsServer
    from loadtest.options.replaying import MetricsOptions, SweepOptions

    targets: list[Path] = []

    def sigterm_now(run_dir) -> None:
        targets.extend((tmp_path.parent / "prometheus-targets").glob("*.json"))   # /metrics is up
        os.kill(os.getpid(), signals_module.SIGTERM)

    m = _manifest()
    old = signals_module.signal(signals_module.SIGTERM, cli._terminated)
    try:
        monkeypatch.setattr(guard, "hold_reserve", sigterm_now)
        run = pipeline.Run(SweepOptions(), None, None, tmp_path, m)
        replayed = pipeline.replay(run, None, MetricsServer.of(MetricsOptions()))
        code = replayed.code
    finally:
        signals_module.signal(signals_module.SIGTERM, old)
    assert code == exits.INTERRUPTED
    assert Manifest.read(tmp_path).status == "interrupted"
    assert len(targets) == 1 and not targets[0].exists(), targets
