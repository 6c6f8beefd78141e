"""The scheduling recipes in ops/schedule/ are what their tools accept, and the soak command lines
they hold are ones `loadtest soak` parses: the crontab line with croniter, the systemd service and
timer with `systemd-analyze verify` (no warning either), the Kubernetes CronJob against the
Kubernetes schema (kubernetes-validate's bundled schemas, offline, strict), and `ray job submit`
with Ray's own command-line parser."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import kubernetes_validate
import yaml
from croniter import croniter

from loadtest.commands.arguments import build_parser
from tests.conftest import ROOT

SCHEDULE = ROOT / "ops" / "schedule"


def _soak_parses(argv: list[str]) -> None:
    """`argv` (what follows `loadtest`) parses as a soak, every flag one the soak knows."""
    assert argv[0] == "soak", argv
    args = build_parser().parse_args(argv)   # a wrong flag exits 2 here and fails the test
    assert args.command == "soak" and args.duration == 8 * 3600


def _after_loadtest(words: list[str]) -> list[str]:
    i = next(i for i, w in enumerate(words) if w.endswith("loadtest") and i + 1 < len(words) and words[i + 1] == "soak")
    return words[i + 1:]


def test_the_crontab_line_is_a_valid_schedule_running_a_soak_that_parses():
    lines = [ln for ln in (SCHEDULE / "crontab").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(lines) == 1
    fields = lines[0].split(None, 5)
    assert croniter.is_valid(" ".join(fields[:5]))
    command = shlex.split(fields[5].split(">>")[0])
    _soak_parses(_after_loadtest(command))


def test_the_systemd_units_verify_without_a_warning(tmp_path):
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is missing: `make ops-tools` (part of `make test`) installs systemd"
    loadtest = ROOT / ".venv" / "bin" / "loadtest"
    service = (SCHEDULE / "loadtest-soak.service").read_text()
    (tmp_path / "loadtest-soak.service").write_text(service.replace("/opt/loadtest/.venv/bin/loadtest", str(loadtest)))
    shutil.copy(SCHEDULE / "loadtest-soak.timer", tmp_path)
    out = subprocess.run([analyze, "verify", str(tmp_path / "loadtest-soak.service"),
                          str(tmp_path / "loadtest-soak.timer")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and not out.stdout.strip() and not out.stderr.strip(), out.stdout + out.stderr
    exec_start = re.search(r"^ExecStart=(.+)$", service, re.M).group(1)
    _soak_parses(_after_loadtest(shlex.split(exec_start)))


def test_the_kubernetes_cronjob_is_valid_against_the_schema():
    docs = list(yaml.safe_load_all((SCHEDULE / "soak-cronjob.yaml").read_text()))
    assert len(docs) == 1 and docs[0]["kind"] == "CronJob"
    kubernetes_validate.validate(docs[0], kubernetes_validate.latest_version(), strict=True)   # raises if invalid
    assert croniter.is_valid(docs[0]["spec"]["schedule"])
    container = docs[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    _soak_parses(container["args"])   # the image's entrypoint is `loadtest`
    broken = yaml.safe_load((SCHEDULE / "soak-cronjob.yaml").read_text())
    broken["spec"]["jobTemplate"]["spec"]["backoffLimit"] = "none"
    try:
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)
    except kubernetes_validate.ValidationError:
        pass
    else:
        raise AssertionError("the validator accepted a string where Kubernetes wants an integer")


def test_ray_job_submit_parses_with_rays_own_cli():
    from ray.dashboard.modules.job.cli import submit

    text = (SCHEDULE / "ray-job-submit.sh").read_text()
    command = re.search(r"^exec (ray job submit .+?)$(?![^\n]*\\\n)", text.replace("\\\n", " "), re.M | re.S).group(1)
    words = shlex.split(command.replace('"$ADDRESS"', "http://127.0.0.1:8265").replace(
        '"loadtest-soak-$(date -u +%Y%m%dT%H%M%SZ)"', "loadtest-soak-1"))
    ctx = submit.make_context("submit", words[3:])
    entrypoint = list(ctx.params["entrypoint"])
    assert ctx.params["working_dir"] == "." and entrypoint[0] == "loadtest"
    _soak_parses(entrypoint[1:])
    assert subprocess.run(["bash", "-n", str(SCHEDULE / "ray-job-submit.sh")], timeout=30).returncode == 0
