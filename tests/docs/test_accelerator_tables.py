"""docs/accelerators.md's tables say what the code does: the NVIDIA factories, the
consumer and workstation GPUs with the spellings that read as each and each marketplace's
name for it, and the MIG profiles."""

from __future__ import annotations

import re
from pathlib import Path

from skyward.accelerators import parse_accelerator
from skyward.accelerators.catalog import current_catalog
from skyward.accelerators.factories import NVIDIAFactories, NVIDIAModel
from skyward.accelerators.mig import PROFILES_80GB, PROFILES_A100_40GB, PROFILES_H100_NVL, MigProfile
from skyward.accelerators.vendors import CONSUMER_ENTRIES, WORKSTATION_ENTRIES
from skyward.providers.cloud.marketplace import catalog_gpu

PAGE = Path(__file__).resolve().parents[2] / "docs" / "accelerators.md"
NONE = "\N{EN DASH}"  # the page's mark for an empty cell


def _section(heading: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _tables(text: str) -> list[list[list[str]]]:
    """Each markdown table in ``text``: its body rows, each a list of cells."""
    tables: list[list[list[str]]] = []
    rows: list[list[str]] = []
    for line in [*text.splitlines(), ""]:
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            tables.append([r for r in rows[2:]])  # without the header and its rule
            rows = []
    return tables


def _quoted(cell: str) -> list[str]:
    return re.findall(r'`"([^"`]+)"`', cell)


def _code(cell: str) -> str | None:
    match = re.fullmatch(r"`([^`]+)`", cell)
    return None if match is None else match[1]


def _memory(cell: str) -> list[int]:
    return [int(m) for m in re.findall(r"(\d+) GB", cell)]


def test_the_consumer_and_workstation_table_lists_each_card_as_the_code_reads_it() -> None:
    catalog = current_catalog()
    (table,) = _tables(_section("Consumer and workstation GPUs"))
    listed = set()
    for model_cell, memory, also, vastai, runpod in table:
        (model,) = _quoted(model_cell)
        listed.add(model)
        assert str(parse_accelerator(model)) == model
        assert _memory(memory) == catalog.memories(model), model
        for spelling in _quoted(also):
            assert parse_accelerator(spelling).name == model, spelling
        for name in (_code(vastai), _code(runpod)):
            if name is not None:
                for size in catalog.memories(model):
                    mapped = catalog_gpu(name, size)
                    assert mapped is not None and parse_accelerator(mapped).name == model, (name, mapped)
    assert {e.model for e in (*CONSUMER_ENTRIES, *WORKSTATION_ENTRIES)} <= listed


def test_the_factory_table_lists_every_nvidia_factory_with_its_model_memory_and_abilities() -> None:
    catalog = current_catalog()
    (table,) = _tables(_section("NVIDIA factories"))
    rows = {row[0]: row[1:] for row in table}
    factories = {name: value for name, value in vars(NVIDIAFactories).items() if isinstance(value, NVIDIAModel)}
    assert set(rows) == {f"`Accelerator.NVIDIA.{name}()`" for name in factories}
    for name, factory in factories.items():
        model, memory, form_factors, mig = rows[f"`Accelerator.NVIDIA.{name}()`"]
        assert _code(model) == factory.model
        assert _memory(memory) == catalog.memories(factory.model)
        assert form_factors == (", ".join(catalog.form_factors(factory.model)) or NONE)
        assert (mig == "yes") == any(e.mig_profiles for e in catalog.variants(factory.model))


def test_the_mig_tables_are_the_profiles_the_code_validates_against() -> None:
    def rows(profiles: tuple[MigProfile, ...]) -> list[list[str]]:
        return [[f"`{p.name}`", str(p.max_instances), f"{p.memory_gb} GB", f"{p.compute_slices}/7"] for p in profiles]

    tables = _tables(_section("MIG"))
    assert tables == [rows(PROFILES_80GB), rows(PROFILES_A100_40GB), rows(PROFILES_H100_NVL)]
