"""MIG profiles: the seed's tables, layouts, and the errors for what does not fit."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.accelerators import Accelerator, parse_accelerator, workers_per_node
from skyward.accelerators.mig import (
    COMPUTE_SLICES,
    MEMORY_SLICES,
    PROFILES_80GB,
    PROFILES_A100_40GB,
    MigProfile,
    expand_mig,
    format_mig,
    parse_mig_text,
)
from skyward.errors import ConfigurationError

pytestmark = pytest.mark.usefixtures("core_catalog")  # tests/unit/conftest.py


# The seed's tables: profile -> (workers, memory GB).
TABLE_80GB = {
    "1g.10gb": (7, 10),
    "1g.20gb": (4, 20),
    "2g.20gb": (3, 20),
    "3g.40gb": (2, 40),
    "4g.40gb": (1, 40),
    "7g.80gb": (1, 80),
}
TABLE_A100_40GB = {
    "1g.5gb": (7, 5),
    "2g.10gb": (3, 10),
    "3g.20gb": (2, 20),
    "4g.20gb": (1, 20),
}


def test_tables_match_the_seed() -> None:
    assert {p.name: (p.max_instances, p.memory_gb) for p in PROFILES_80GB} == TABLE_80GB
    assert {p.name: (p.max_instances, p.memory_gb) for p in PROFILES_A100_40GB} == TABLE_A100_40GB


@pytest.mark.parametrize(("profile", "workers"), [(p, w) for p, (w, _) in TABLE_80GB.items()])
def test_one_profile_fills_the_gpu_80gb(profile: str, workers: int) -> None:
    for acc in (
        Accelerator.NVIDIA.H100(mig=profile),
        Accelerator.NVIDIA.A100(mig=profile),
        Accelerator.NVIDIA.A100(memory="80GB", mig=profile),
        Accelerator.NVIDIA.H100(form_factor="SXM", mig=profile),
    ):
        assert acc.mig == (profile,) * workers
        assert workers_per_node(acc) == workers


@pytest.mark.parametrize(("profile", "workers"), [(p, w) for p, (w, _) in TABLE_A100_40GB.items()])
def test_one_profile_fills_the_gpu_a100_40gb(profile: str, workers: int) -> None:
    acc = Accelerator.NVIDIA.A100(memory="40GB", mig=profile)
    assert workers_per_node(acc) == workers
    # Without memory=, a 40GB-only profile picks the 40GB variant.
    assert Accelerator.NVIDIA.A100(mig=profile) == acc


def test_seed_examples() -> None:
    single = Accelerator.NVIDIA.H100(mig="3g.40gb")
    assert workers_per_node(single) == 2
    assert single.memory == "80GB"  # the profile pins the 80GB variant (not H100 NVL)
    listed = Accelerator.NVIDIA.A100(mig=["3g.40gb", "3g.40gb"])
    assert listed.mig == ("3g.40gb", "3g.40gb")
    assert workers_per_node(listed) == 2


def test_explicit_layouts() -> None:
    mixed = Accelerator.NVIDIA.A100(mig=["4g.40gb", "2g.20gb", "1g.10gb"])
    assert workers_per_node(mixed) == 3
    assert Accelerator.NVIDIA.H100(mig=["3g.40gb"]).mig == ("3g.40gb",)
    assert Accelerator.NVIDIA.H100(mig=["3G.40GB "]).mig == ("3g.40gb",)
    # count GPUs each split the same way
    assert workers_per_node(Accelerator.NVIDIA.H100(count=8, mig="1g.10gb")) == 56


def test_shorthand() -> None:
    assert parse_accelerator("H100@3g.40gb") == Accelerator.NVIDIA.H100(mig="3g.40gb")
    assert parse_accelerator("A100-80GB@1x3g.40gb") == Accelerator.NVIDIA.A100(mig=["3g.40gb"])
    assert parse_accelerator("A100@2x1g.10gb+4g.40gb") == Accelerator.NVIDIA.A100(mig=["1g.10gb", "1g.10gb", "4g.40gb"])
    assert parse_accelerator("H100:2@1g.10gb").count == 2


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (
            lambda: Accelerator.NVIDIA.T4(mig="1g.5gb"),
            "T4 .* does not support MIG.*MIG-capable accelerators: A100, H100",
        ),
        (lambda: Accelerator.NVIDIA.H200(mig="1g.10gb"), "does not support MIG"),
        (
            lambda: Accelerator.NVIDIA.A100(memory="40GB", mig="3g.40gb"),
            "'3g.40gb' is not valid for A100-40GB; valid profiles: 1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb",
        ),
        (
            lambda: Accelerator.NVIDIA.H100(mig="3g.20gb"),
            "valid profiles: 1g.10gb, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb",
        ),
        (lambda: Accelerator.NVIDIA.A100(mig=["4g.40gb", "4g.40gb"]), "fits at most 1 time"),
        (lambda: Accelerator.NVIDIA.H100(mig=["4g.40gb", "2g.20gb", "2g.20gb"]), "need 8 compute slices; .* has 7"),
        (lambda: Accelerator.NVIDIA.H100(mig=["3g.40gb", "3g.40gb", "1g.10gb"]), "9 of 8 memory slices"),
        (lambda: Accelerator.NVIDIA.H100(mig=[]), "asks for no partitions"),
        (lambda: Accelerator.NVIDIA.H100(mig="big"), "cannot read MIG partition 'big'"),
        (lambda: Accelerator.NVIDIA.H100(mig="0x1g.10gb"), "count of at least 1"),
    ],
)
def test_errors(make: Callable[[], Accelerator], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        make()


def test_h100_nvl_has_its_own_profiles() -> None:
    acc = Accelerator.NVIDIA.H100(form_factor="NVL", mig="3g.47gb")
    assert workers_per_node(acc) == 2
    assert Accelerator.NVIDIA.H100(mig="1g.12gb").form_factor is None
    assert Accelerator.NVIDIA.H100(mig="1g.12gb").memory == "94GB"


@given(st.lists(st.sampled_from(PROFILES_80GB), min_size=1, max_size=9))
def test_layout_accepted_iff_it_fits(chosen: list[MigProfile]) -> None:
    names = [p.name for p in chosen]
    fits = (
        sum(p.compute_slices for p in chosen) <= COMPUTE_SLICES
        and sum(p.memory_slices for p in chosen) <= MEMORY_SLICES
        and all(names.count(p.name) <= p.max_instances for p in chosen)
    )
    if fits:
        assert expand_mig(names, PROFILES_80GB, "H100-80GB") == tuple(names)
        assert workers_per_node(Accelerator.NVIDIA.H100(mig=names)) == len(names)
    else:
        with pytest.raises(ConfigurationError):
            expand_mig(names, PROFILES_80GB, "H100-80GB")


@given(st.lists(st.sampled_from([p.name for p in PROFILES_A100_40GB]), min_size=1, max_size=12))
def test_mig_text_round_trips(names: list[str]) -> None:
    assert parse_mig_text(format_mig(names)) == names
