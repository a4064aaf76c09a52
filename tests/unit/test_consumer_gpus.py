"""The consumer and workstation GPUs marketplaces rent (RTX 4090, RTX 3090, A5000, ...):
in the catalog with their memory, asked for like data-centre GPUs, and mapped from each
marketplace's own names."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for `fakes`

from fakes.runpod import GPU_TYPES, gpu
from fakes.vastai import OFFERS, offer

import skyward as sky
from skyward.accelerators import parse_accelerator
from skyward.accelerators.catalog import current_catalog
from skyward.accelerators.vendors import CONSUMER_ENTRIES, WORKSTATION_ENTRIES
from skyward.errors import ConfigurationError
from skyward.providers.cloud.marketplace import catalog_gpu
from skyward.providers.cloud.sizing import NodeSize
from skyward_runpod.offers import pod_types
from skyward_vastai import VastAI
from skyward_vastai.offers import fitting, parse_offers


@pytest.mark.parametrize(
    ("spelling", "canonical"),
    [
        ("RTX4090", "RTX4090"),
        ("RTX 4090", "RTX4090"),
        ("rtx-4090", "RTX4090"),
        ("4090", "RTX4090"),
        ("NVIDIA GeForce RTX 4090", "RTX4090"),
        ("RTX4090:2", "RTX4090:2"),
        ("2x RTX 4090", "RTX4090:2"),
        ("RTX 3090 Ti", "RTX3090-Ti"),
        ("3090Ti", "RTX3090-Ti"),
        ("RTX 4080 SUPER", "RTX4080-Super"),
        ("RTX 4080S", "RTX4080-Super"),
        ("RTX 4070S Ti", "RTX4070-Ti-Super"),
        ("RTX 5090", "RTX5090"),
        ("RTX 3060 8GB", "RTX3060-8GB"),
        ("RTX A5000", "A5000"),
        ("A5000", "A5000"),
        ("RTX-A4000", "A4000"),
        ("RTX 6000 Ada", "RTX6000-Ada"),
        ("RTX 5000 Ada", "RTX5000-Ada"),
        ("RTX PRO 6000", "RTXPRO6000"),
        ("L40S", "L40S"),
    ],
)
def test_a_consumer_or_workstation_gpu_reads_like_a_data_centre_one(spelling: str, canonical: str) -> None:
    acc = parse_accelerator(spelling)
    assert str(acc) == canonical
    assert parse_accelerator(str(acc)) == acc  # the canonical form reads back as itself


def test_every_new_entry_is_an_nvidia_gpu_with_its_memory_and_a_factory_where_it_has_a_name() -> None:
    catalog = current_catalog()
    for entry in (*CONSUMER_ENTRIES, *WORKSTATION_ENTRIES):
        assert entry.vendor == "NVIDIA" and entry.kind == "gpu" and entry.memory_gb >= 6
        assert catalog.model_for(entry.model) == entry.model
        assert entry.memory_gb in catalog.memories(entry.model)
    assert catalog.preferred("RTX4090") is not None and catalog.preferred("RTX4090").memory_gb == 24  # type: ignore[union-attr]
    assert catalog.memories("RTX3060") == [8, 12] and catalog.preferred("RTX3060").memory_gb == 12  # type: ignore[union-attr]
    assert sky.Accelerator.NVIDIA.RTX4090(count=2) == parse_accelerator("RTX 4090:2")
    assert sky.Accelerator.NVIDIA.A5000() == parse_accelerator("RTX A5000")


def test_a_memory_a_card_is_not_made_in_is_refused_naming_the_sizes() -> None:
    with pytest.raises(ConfigurationError, match="RTX4090 comes with 24GB"):
        parse_accelerator("RTX4090-48GB")
    with pytest.raises(ConfigurationError, match="did you mean 'RTX4090'"):
        parse_accelerator("RTX4099")


@pytest.mark.parametrize(
    ("name", "memory", "catalog"),
    [
        # VastAI's gpu_name values (its search names with spaces for underscores)
        ("RTX 4090", 24, "RTX4090"),
        ("RTX 3090", 24, "RTX3090"),
        ("RTX 3090 Ti", 24, "RTX3090-Ti"),
        ("RTX 3080", 10, "RTX3080-10GB"),
        ("RTX 3080", 12, "RTX3080-12GB"),
        ("RTX 3060", 12, "RTX3060-12GB"),
        ("RTX 4060 Ti", 16, "RTX4060-Ti-16GB"),
        ("RTX 4070S Ti", 16, "RTX4070-Ti-Super"),
        ("RTX 4080S", 16, "RTX4080-Super"),
        ("RTX 5090", 32, "RTX5090"),
        ("RTX A5000", 24, "A5000"),
        ("RTX A2000", 12, "A2000-12GB"),
        ("RTX 5000Ada", 32, "RTX5000-Ada"),
        ("RTX PRO 6000 WS", 96, "RTXPRO6000"),
        ("Q RTX 8000", 48, "Quadro-RTX8000"),
        ("RTX 3060 laptop", 6, None),  # a laptop part is not the desktop card
        # RunPod's gpuTypeIds and display names
        ("NVIDIA GeForce RTX 4090", 24, "RTX4090"),
        ("NVIDIA GeForce RTX 3080 Ti", 12, "RTX3080-Ti"),
        ("NVIDIA GeForce RTX 4080 SUPER", 16, "RTX4080-Super"),
        ("NVIDIA RTX A4500", 20, "A4500"),
        ("NVIDIA RTX A2000", 6, "A2000-6GB"),
        ("NVIDIA RTX 2000 Ada Generation", 16, "RTX2000-Ada"),
        ("NVIDIA RTX 6000 Ada Generation", 48, "RTX6000-Ada"),
        ("RTX 4000 Ada SFF", 20, "RTX4000-SFF-Ada"),
        ("NVIDIA A30", 24, "A30"),
        # data-centre names keep their form factor
        ("H100 SXM", 80, "H100-SXM"),
        ("A100 SXM4", 80, "A100-80GB"),
    ],
)
def test_marketplace_names_of_consumer_and_workstation_gpus_map_onto_the_catalog(
    name: str, memory: int, catalog: str | None
) -> None:
    mapped = catalog_gpu(name, memory)
    assert mapped == catalog
    if mapped is not None:
        assert parse_accelerator(mapped).memory_gb in (None, memory)


def test_a_vastai_pool_asking_for_an_rtx4090_constructs_and_fits_only_the_4090_offers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("VAST_API_KEY", "vast-test-key")
    for spelling in ("RTX4090", "RTX 4090", "4090"):
        pool = sky.ComputePool(provider=VastAI(), accelerator=spelling)
        assert str(pool.spec.accelerator) == "RTX4090"
    market = [*OFFERS, offer(501, "RTX 3090", 1, 0.15), offer(502, "RTX 5090", 1, 0.30, gpu_ram=32_768)]
    offers = parse_offers(market, bid_margin=0.2)
    rtx4090 = [o.id for o in fitting(offers, NodeSize(accelerator="RTX4090"), False)]
    assert rtx4090 == [401, 402, 101, 102, 103, 104]  # single cards cheapest first (the search filters quality)
    assert [o.id for o in fitting(offers, NodeSize(accelerator="RTX4090:2"), False)] == [104]
    assert [o.id for o in fitting(offers, NodeSize(accelerator="3090"), False)] == [501]


def test_a_runpod_rtx4090_node_gets_the_geforce_gpu_type() -> None:
    types = pod_types(
        [*GPU_TYPES, gpu("NVIDIA RTX A5000", "RTX A5000", 24, 0.36, 0.29, 0.17)], "secure", 8, 1 << 35, 0.2
    )
    chosen = NodeSize(accelerator="RTX 4090").select(t.instance for t in types)
    assert chosen.name == "1x RTX 4090" and chosen.on_demand_price == pytest.approx(0.69)
    assert NodeSize(accelerator="A5000").select(t.instance for t in types).name == "1x RTX A5000"
