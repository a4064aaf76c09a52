"""MkDocs hooks: files the site shows that live outside docs/.

The benchmark plot is written by ``bench/run.py --full`` to bench/results/latest.png and
committed there; the site serves that same file as assets/bench.png rather than a copy
that would go stale. The example scripts are served the same way, at examples/NN_name.py,
so the Examples page links each one as it is in the repository.
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
FROM_REPOSITORY = {
    "assets/bench.png": ROOT / "bench" / "results" / "latest.png",
    **{f"examples/{script.name}": script for script in sorted((ROOT / "examples").glob("[0-9][0-9]_*.py"))},
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, source in FROM_REPOSITORY.items():
        files.append(File.generated(config, uri, abs_src_path=str(source)))
    return files


# Docstrings written for Sphinx say ":class:`Provider`"; mkdocstrings renders the name as
# code and leaves the role in front of it as text (":class: Provider" on the reference
# pages). The role carries nothing a reader needs here, so it is dropped from the HTML.
_SPHINX_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj):(?=<code)")


def on_page_content(html: str, **_: object) -> str:
    return _SPHINX_ROLE.sub("", html)
