"""Facts the pages state that the code decides: how many examples there are, which values
``SKYWARD_PROVIDER`` takes, Local's defaults, the command that removes expired resources,
and the shape of the site (FAQ questions as headings, the nav naming each entry once, a
Guides section linked from the home page). Each is read from the code, so a page that
falls behind fails here rather than in a newcomer's first hour."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from collections.abc import Sequence
from pathlib import Path

import yaml  # type: ignore[import-untyped]  # PyYAML, which MkDocs brings

import skyward as sky

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
EXAMPLES = sorted((ROOT / "examples").glob("[0-9][0-9]_*.py"))
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
NUMBER_WORDS = {"twenty": 20, "thirty": 30}
UNITS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}


def _number(text: str) -> int:
    """``24``, ``Twenty-four`` or ``twenty`` as an int."""
    if text.isdigit():
        return int(text)
    tens, _, unit = text.lower().partition("-")
    return NUMBER_WORDS[tens] + (UNITS[unit] if unit else 0)


def example_counts(text: str) -> list[int]:
    """Every count of examples a page states: "24 scripts", "Twenty-four scripts in
    `examples/`", "(24 examples", "24 examples"."""
    words = r"\d+|(?:twenty|thirty)(?:-(?:one|two|three|four|five|six|seven|eight|nine))?"
    found = []
    for line in text.splitlines():  # "N scripts" counts where the line is about examples
        found += re.findall(rf"\b({words}) examples\b", line, re.IGNORECASE)
        if "xample" in line:
            found += re.findall(rf"\b({words}) scripts\b", line, re.IGNORECASE)
    return [_number(n) for n in found]


def _provider_switch() -> object:
    spec = importlib.util.spec_from_file_location("examples_provider", ROOT / "examples" / "_provider.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_stated_number_of_examples_is_the_number_of_scripts() -> None:
    stated = {str(page.relative_to(ROOT)): example_counts(page.read_text(encoding="utf-8")) for page in PAGES}
    wrong = {page: counts for page, counts in stated.items() if any(n != len(EXAMPLES) for n in counts)}
    assert not wrong, f"there are {len(EXAMPLES)} examples; these pages say otherwise: {wrong}"
    assert sum(map(len, stated.values())) >= 3  # the home page, Getting started, Examples


def test_a_wrong_count_of_examples_is_read() -> None:
    assert example_counts("Twenty-two scripts in `examples/`, and (22 scripts, each") == [22, 22]
    assert example_counts("learn from 24 examples") == [24]
    assert example_counts("100 scripts per project") == []


def test_the_examples_page_names_every_value_of_the_provider_switch() -> None:
    choices = _provider_switch().CHOICES  # type: ignore[attr-defined]
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    sentence = page[page.index("`SKYWARD_PROVIDER` environment variable") :].split("\n\n")[0]
    missing = [c for c in choices if f"`{c}`" not in sentence]
    assert not missing, f"docs/examples.md's SKYWARD_PROVIDER sentence leaves out {missing}"


def test_local_s_defaults_on_the_providers_page_are_the_code_s() -> None:
    page = (DOCS / "providers.md").read_text(encoding="utf-8")
    (signature,) = re.findall(r"`sky\.Local\((.*?)\)`:", page)
    written = dict(part.strip().split("=", 1) for part in signature.split(","))
    defaults = {f.name: f.default for f in dataclasses.fields(sky.Local)}
    for name, value in written.items():
        assert name in defaults, f"docs/providers.md shows Local({name}=...), which Local has not"
        assert eval(value) == defaults[name], (
            f"docs/providers.md: Local({name}={value}), the code has {defaults[name]!r}"
        )
    assert "bootstrap_timeout" in written


def test_no_page_sends_users_to_the_reaper_modules() -> None:
    # `skyward down --expired` replaced them; docs/cli.md says what became of them
    stale = [
        str(page.relative_to(ROOT))
        for page in PAGES
        if page.name != "cli.md" and re.search(r"python -m skyward_\w+\.reaper", page.read_text(encoding="utf-8"))
    ]
    assert not stale, f"these pages still point to python -m skyward_*.reaper: {stale}"


def test_no_page_speaks_of_the_project_s_internal_drafts() -> None:
    drafts = re.compile(r"\b(?:the|original) brief\b|\bthe seed's\b|\bas the seed\b|\baddition to the seed\b")
    found = [str(p.relative_to(ROOT)) for p in PAGES if drafts.search(p.read_text(encoding="utf-8"))]
    assert not found, f"'the seed' / 'the brief' mean nothing to a reader: {found}"


def test_every_faq_question_is_a_heading() -> None:
    page = (DOCS / "faq.md").read_text(encoding="utf-8")
    bold_lines = re.findall(r"^\*\*.+\*\*\s*$", page, re.MULTILINE)
    assert not bold_lines, f"FAQ questions as bold text have no anchor: {bold_lines}"
    assert len(re.findall(r"^## .+\?$", page, re.MULTILINE)) >= 10


def _repeated_labels(entries: Sequence[object], config_dir: Path, section: str = "") -> list[str]:
    """Labels a reader sees twice in one place: two entries of a section with the same
    label, or a section with a child of its own name (the reference's overview page once
    showed as "API reference" under "API reference")."""
    labels: list[str] = [section] if section else []
    repeated: list[str] = []
    for entry in entries:
        if isinstance(entry, str):  # a page without a title shows its first heading
            if section and entry.endswith("index.md") and entry is entries[0]:
                continue  # navigation.indexes: the section itself is that page
            labels.append((config_dir / entry).read_text(encoding="utf-8").splitlines()[0].lstrip("# ").strip())
            continue
        assert isinstance(entry, dict)
        ((label, value),) = entry.items()
        labels.append(label)
        if isinstance(value, list):
            repeated += _repeated_labels(value, config_dir, label)
    return repeated + sorted({label for label in labels if labels.count(label) > 1})


def test_the_nav_names_each_entry_once_and_has_the_guides() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    assert "navigation.indexes" in config["theme"]["features"]
    twice = _repeated_labels(config["nav"], DOCS)
    assert not twice, f"the nav shows these twice in one place: {twice}"
    titled_overview = [{"API reference": [{"API reference": "reference/index.md"}]}]
    assert _repeated_labels(titled_overview, DOCS) == ["API reference"]
    guides = next(e["Guides"] for e in config["nav"] if isinstance(e, dict) and "Guides" in e)
    pages = sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "guides").glob("*.md"))
    assert sorted(g if isinstance(g, str) else next(iter(g.values())) for g in guides) == pages
    assert len(pages) >= 13  # the index and at least twelve guides
    assert "guides/index.md" in (DOCS / "index.md").read_text(encoding="utf-8")


def test_every_example_is_explained_linked_and_shown_with_its_output() -> None:
    page = (DOCS / "examples.md").read_text(encoding="utf-8")
    for script in EXAMPLES:
        anchor = script.stem.replace("_", "-")
        assert f"](#{anchor})" in page, f"the examples table does not link {script.name}"
        section = page.split(f"{{#{anchor}}}", 1)[1].split("\n## ", 1)[0]
        assert f"](examples/{script.name})" in section, f"{script.name}'s section does not link the script"
        assert "```text" in section, f"{script.name}'s section shows no output"
