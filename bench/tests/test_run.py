from __future__ import annotations

from pathlib import Path

import pytest

from bench import env, run


def test_unknown_measure_is_refused_with_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--only", "latency,speed"])
    assert "unknown measure(s) speed" in capsys.readouterr().err


def test_modes_are_exclusive_and_quick_is_the_default() -> None:
    args = run.parse_args([])
    assert not args.full and args.measures == list(run.MEASURES)
    with pytest.raises(SystemExit):
        run.parse_args(["--quick", "--full"])


def test_readme_block_is_replaced_and_the_rest_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{run.README_START}\nold table\n{run.README_END}\noutro\n")
    monkeypatch.setattr(env, "BENCH", tmp_path)
    run.update_readme("new table\n")
    assert readme.read_text() == f"intro\n{run.README_START}\nnew table\n{run.README_END}\noutro\n"


def test_the_committed_readme_has_the_markers() -> None:
    text = (Path(run.__file__).parent / "README.md").read_text()
    assert run.README_START in text and run.README_END in text
