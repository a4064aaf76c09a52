"""MkDocs hooks: files the site shows that live outside docs/.

The benchmark plot is written by ``bench/run.py --full`` to bench/results/latest.png and
committed there; the site serves that same file as assets/bench.png rather than a copy
that would go stale. The example scripts are served the same way, at examples/NN_name.py,
so the Examples page links each one as it is in the repository.
"""

from __future__ import annotations

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
