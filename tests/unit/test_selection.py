"""select_instance(): the smallest offered instance type that satisfies a request."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.accelerators import Accelerator
from skyward.errors import ConfigurationError
from skyward.instances import InstanceType, NoMatchingInstanceError, select_instance
from skyward.units import GIB

pytestmark = pytest.mark.usefixtures("core_catalog")  # tests/unit/conftest.py


def offer(
    name: str,
    vcpus: int,
    memory_gib: int,
    price: float,
    accelerator: str | None = None,
    count: int = 0,
    *,
    available: bool = True,
    region: str = "us-east-1",
) -> InstanceType:
    return InstanceType(
        name=name,
        vcpus=vcpus,
        memory=memory_gib * GIB,
        on_demand_price=price,
        accelerator=accelerator,
        accelerator_count=count,
        region=region,
        available=available,
    )


OFFERS = [
    offer("t3.medium", 2, 4, 0.04),
    offer("m7i.xlarge", 4, 16, 0.2),
    offer("m7i.8xlarge", 32, 128, 1.6),
    offer("g4dn.xlarge", 4, 16, 0.53, "T4", 1),
    offer("g4dn.12xlarge", 48, 192, 3.9, "T4", 4),
    offer("g5.xlarge", 4, 16, 1.0, "A10G", 1),
    offer("p4d.24xlarge", 96, 1152, 32.8, "A100-40GB", 8),
    offer("p4de.24xlarge", 96, 1152, 40.9, "A100-80GB", 8),
    offer("a2-highgpu-1g", 12, 85, 3.7, "A100-40GB", 1),
    offer("a2-ultragpu-1g", 12, 170, 5.1, "A100-80GB", 1),
    offer("p5.48xlarge", 192, 2048, 98.3, "H100", 8),
    offer("h100-pcie-1x", 16, 128, 3.0, "H100-PCIe", 1),
    offer("trn1.2xlarge", 8, 32, 1.3, "Trainium1", 1),
    offer("trn2.48xlarge", 192, 2048, 45.0, "Trainium2", 16),
    offer("mystery.xlarge", 4, 16, 0.1, "Gaudi9", 1),
    offer("g6.xlarge", 4, 16, 0.8, "L4", 1, available=False),
]


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "t3.medium"),
        ({"cpu": 4}, "m7i.xlarge"),
        ({"cpu": 8, "memory": "64GB"}, "m7i.8xlarge"),
        ({"accelerator": "T4"}, "g4dn.xlarge"),
        ({"accelerator": "T4:2"}, "g4dn.12xlarge"),
        ({"accelerator": "A100"}, "a2-highgpu-1g"),  # any memory variant: the smaller
        ({"accelerator": "A100-80GB"}, "a2-ultragpu-1g"),
        ({"accelerator": "A100:8"}, "p4d.24xlarge"),  # equal size: cheaper wins
        ({"accelerator": Accelerator("A100", count=8, memory="80GB")}, "p4de.24xlarge"),
        ({"accelerator": "H100"}, "h100-pcie-1x"),
        ({"accelerator": "H100-SXM"}, "p5.48xlarge"),  # a bare "H100" offer is the default SXM
        ({"accelerator": "H100-PCIe"}, "h100-pcie-1x"),
        ({"accelerator": "H100@3g.40gb"}, "h100-pcie-1x"),
        ({"accelerator": "Trainium2"}, "trn2.48xlarge"),
        ({"accelerator": "T4", "cpu": 8}, "g4dn.12xlarge"),
        ({"accelerator": "A100", "memory": "100GB"}, "a2-ultragpu-1g"),
        ({"machine": "p5.48xlarge"}, "p5.48xlarge"),
        ({"machine": "p5.48xlarge", "accelerator": "H100:8"}, "p5.48xlarge"),
    ],
)
def test_selects_the_smallest_match(kwargs: dict[str, object], expected: str) -> None:
    assert select_instance(OFFERS, **kwargs).name == expected  # type: ignore[arg-type]


def test_unavailable_is_never_chosen() -> None:
    with pytest.raises(NoMatchingInstanceError, match=r"g6\.xlarge .*: not available"):
        select_instance(OFFERS, accelerator="L4")


def test_error_lists_nearest_candidates_and_why() -> None:
    with pytest.raises(NoMatchingInstanceError) as info:
        select_instance(OFFERS, accelerator="A100-80GB:4", cpu=200)
    error = info.value
    assert isinstance(error, ConfigurationError)
    message = str(error)
    assert "accelerator='A100-80GB:4', cpu=200" in message
    assert "p4de.24xlarge" in message
    assert "96 vCPUs < 200 requested" in message
    assert "has 1 A100, 4 requested" in message
    assert 1 <= len(error.candidates) <= 5
    nearest, reasons = error.candidates[0]
    assert nearest.name == "p4de.24xlarge"
    assert reasons == ("96 vCPUs < 200 requested",)


def test_error_reasons_for_other_accelerators() -> None:
    with pytest.raises(NoMatchingInstanceError) as info:
        select_instance(OFFERS[:6], accelerator="A100")
    message = str(info.value)
    assert "has T4, not A100" in message
    assert "has no accelerator, A100 requested" in message


def test_unknown_offer_accelerator_is_a_misfit_not_a_crash() -> None:
    with pytest.raises(NoMatchingInstanceError, match="'Gaudi9' is not in the catalog"):
        select_instance(OFFERS[-2:-1], accelerator="T4")
    assert select_instance(OFFERS[-2:-1]).name == "mystery.xlarge"


def test_machine_errors() -> None:
    with pytest.raises(NoMatchingInstanceError, match=r"machine='p5.48xlarg' is not among .*similar: p5.48xlarge"):
        select_instance(OFFERS, machine="p5.48xlarg")
    with pytest.raises(NoMatchingInstanceError, match="has 8 H100, 16 requested"):
        select_instance(OFFERS, machine="p5.48xlarge", accelerator="H100:16")


def test_bad_requests() -> None:
    with pytest.raises(NoMatchingInstanceError, match="offered none"):
        select_instance([], accelerator="T4")
    with pytest.raises(ConfigurationError, match="unknown accelerator"):
        select_instance(OFFERS, accelerator="A1000")
    with pytest.raises(ConfigurationError, match="cpu must be a positive int"):
        select_instance(OFFERS, cpu=0)
    with pytest.raises(ConfigurationError, match="cannot read memory"):
        select_instance(OFFERS, memory="lots")


def test_instance_type_checks_itself() -> None:
    with pytest.raises(ValueError, match="go together"):
        offer("x", 1, 1, 0.1, "T4", 0)
    with pytest.raises(ValueError, match="go together"):
        offer("x", 1, 1, 0.1, None, 2)
    with pytest.raises(ValueError, match="positive"):
        offer("x", 0, 1, 0.1)


# ---------------------------------------------------------------------- properties

ACCELERATORS = [None, "T4", "A10G", "A100-40GB", "A100-80GB", "H100", "H100-PCIe", "L4", "Trainium2"]


@st.composite
def instances(draw: st.DrawFn) -> InstanceType:
    accelerator = draw(st.sampled_from(ACCELERATORS))
    return InstanceType(
        name=draw(st.sampled_from(["a", "b", "c", "d"])),
        vcpus=draw(st.integers(1, 64)),
        memory=draw(st.integers(1, 512)) * GIB,
        on_demand_price=draw(st.floats(0, 100, allow_nan=False)),
        accelerator=accelerator,
        accelerator_count=0 if accelerator is None else draw(st.integers(1, 8)),
        available=draw(st.booleans()),
        region=draw(st.sampled_from(["r1", "r2"])),
    )


# request -> (offered accelerator names it accepts, minimum count): an oracle written out
# by hand, independent of the matcher.
ORACLE: dict[str | None, tuple[set[str | None], int]] = {
    None: (set(ACCELERATORS), 0),
    "T4": ({"T4"}, 1),
    "A100": ({"A100-40GB", "A100-80GB"}, 1),
    "A100-80GB:2": ({"A100-80GB"}, 2),
    "H100": ({"H100", "H100-PCIe"}, 1),
    "H100-SXM": ({"H100"}, 1),
    "L4:4": ({"L4"}, 4),
}


@given(
    st.lists(instances(), max_size=25),
    st.sampled_from(sorted(ORACLE, key=str)),
    st.none() | st.integers(1, 64),
    st.none() | st.integers(1, 512),
)
def test_never_returns_a_larger_match_than_needed(
    offered: list[InstanceType], accelerator: str | None, cpu: int | None, memory_gib: int | None
) -> None:
    accepted, minimum = ORACLE[accelerator]
    matches = [
        i
        for i in offered
        if i.available
        and i.accelerator in accepted
        and i.accelerator_count >= minimum
        and (cpu is None or i.vcpus >= cpu)
        and (memory_gib is None or i.memory >= memory_gib * GIB)
    ]
    memory = None if memory_gib is None else f"{memory_gib}GB"
    try:
        chosen = select_instance(offered, accelerator, cpu, memory)
    except NoMatchingInstanceError as error:
        assert not matches
        assert len(error.candidates) == min(5, len(offered))
        return
    assert chosen in matches
    for other in matches:
        assert not other.size_key[:4] < chosen.size_key[:4]
