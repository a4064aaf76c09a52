"""Every Python block of README.md and docs/ runs (on Local) or, if it needs a cloud or a
GPU, constructs its pool without provisioning. See snippets.py for the markers."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .snippets import ROOT, Snippet, documentation_pages, printed, shown_outputs, snippets_in

RUNNER = Path(__file__).with_name("run_snippet.py")
PLACEHOLDER_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "docs-snippet",
    "AWS_SECRET_ACCESS_KEY": "docs-snippet",
    "AWS_DEFAULT_REGION": "us-east-1",
    # were anything sent, it would go to a closed port on this machine
    "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
    "DIGITALOCEAN_TOKEN": "docs-snippet",
    "VERDA_CLIENT_ID": "docs-snippet",
    "VERDA_CLIENT_SECRET": "docs-snippet",
    "VAST_API_KEY": "docs-snippet",
    "RUNPOD_API_KEY": "docs-snippet",
    # user credentials google-auth loads without a network call (nothing refreshes them before a pool starts)
    "GOOGLE_APPLICATION_CREDENTIALS": str(Path(__file__).with_name("gcp-placeholder-credentials.json")),
}
SNIPPETS = [s for page in documentation_pages() for s in snippets_in(page)]


def _run(snippet: Snippet, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "snippet.py"
    script.write_text(snippet.code, encoding="utf-8")
    env = dict(os.environ)
    if snippet.mode != "run":
        env.update(PLACEHOLDER_CREDENTIALS)
    return subprocess.run(
        [sys.executable, str(RUNNER), snippet.mode, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[s.id for s in SNIPPETS])
def test_a_documented_snippet_runs_or_constructs(snippet: Snippet, tmp_path: Path) -> None:
    result = _run(snippet, tmp_path)
    assert result.returncode == 0, f"{snippet.id} ({snippet.mode}) failed:\n{result.stdout}\n{result.stderr}"
    if snippet.output is not None:
        assert printed(result.stdout) == printed(snippet.output), (
            f"{snippet.id} prints something other than the output its page shows:\n{result.stdout}"
        )


@pytest.mark.parametrize("page", documentation_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shown_output_follows_a_python_block(page: Path) -> None:
    # a marker the pattern does not attach to a block (a typo, a ```bash block) would
    # show an output that no test compares
    attached = sum(s.output is not None for s in snippets_in(page))
    assert attached == shown_outputs(page), f"{page}: an <!-- output --> marker not right after a ```python block"


def test_a_snippet_whose_shown_output_differs_is_caught(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(6 * 7)\n```\n\n<!-- output -->\n```text\n42\n```\n", encoding="utf-8")
    (snippet,) = snippets_in(page)
    assert snippet.output == "42\n"
    result = _run(snippet, tmp_path)
    assert printed(result.stdout) == printed(snippet.output)
    assert printed(result.stdout) != printed("41\n")


def test_the_pages_have_snippets_of_every_kind() -> None:
    modes = {s.mode for s in SNIPPETS}
    assert modes == {"run", "cloud", "gpu"}, modes
    assert len(SNIPPETS) >= 20


def test_a_snippet_that_fails_is_reported(tmp_path: Path) -> None:
    broken = Snippet(ROOT / "README.md", 1, "run", "import skyward as sky\nsky.ComputePool(nodes=0)\n")
    result = _run(broken, tmp_path)
    assert result.returncode != 0
    assert "ConfigurationError" in result.stderr


def test_a_cloud_snippet_stops_before_provisioning(tmp_path: Path) -> None:
    code = "import skyward as sky\nwith sky.ComputePool(provider=sky.AWS(), nodes=2):\n    raise SystemExit(3)\n"
    result = _run(Snippet(ROOT / "README.md", 1, "cloud", code), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "stopped where the pool would be provisioned" in result.stderr


def test_a_cloud_snippet_with_a_bad_option_fails(tmp_path: Path) -> None:
    code = "import skyward as sky\nsky.ComputePool(provider=sky.DigitalOcean(), spot='always')\n"
    result = _run(Snippet(ROOT / "README.md", 1, "cloud", code), tmp_path)
    assert result.returncode != 0
    assert "ConfigurationError" in result.stderr
