"""The Dockerfile and the two-command quick start, read as a reviewer would."""

from __future__ import annotations

import re

from tests.conftest import ROOT


def test_dockerfile_is_pinned_installs_project_and_drops_root():
    text = (ROOT / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    base = next(ln for ln in lines if ln.startswith("FROM "))
    assert re.fullmatch(r"FROM vllm/vllm-openai:v\d+\.\d+\.\d+(@sha256:[0-9a-f]{64})?", base), base
    assert any(re.search(r"pip install .*\.\[vllm\]", ln) for ln in lines)
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    assert users and users[-1] not in ("root", "0")
    assert lines[next(i for i, ln in enumerate(lines) if ln.startswith("ENTRYPOINT"))] == 'ENTRYPOINT ["loadtest"]'


def test_readme_quick_start_is_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```\w*\n(.*?)```", readme, re.S).group(1)
    assert [ln for ln in block.splitlines() if ln.strip()] == ["make run", "make test"]


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_code_is_ruff_clean():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout
