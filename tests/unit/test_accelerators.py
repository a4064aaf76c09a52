"""Accelerator catalog, factories and string shorthand."""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from skyward.accelerators import (
    NVIDIA_NAMES,
    Accelerator,
    CatalogEntry,
    current_catalog,
    entry_for,
    is_nvidia,
    is_trainium,
    make_accelerator,
    parse_accelerator,
    workers_per_node,
)
from skyward.accelerators.mig import check_layout
from skyward.errors import ConfigurationError
from skyward.instances import InstanceType, select_instance
from skyward.plugins.hookspecs import hookimpl
from skyward.plugins.registry import registry
from skyward.units import GIB

pytestmark = pytest.mark.usefixtures("core_catalog")  # tests/unit/conftest.py


# ---------------------------------------------------------------------------- seed


def test_seed_factories() -> None:
    assert Accelerator.NVIDIA.H100() == Accelerator("H100")
    assert Accelerator.NVIDIA.H100(count=4) == Accelerator("H100", count=4)
    assert Accelerator.NVIDIA.A100(memory="40GB") == Accelerator("A100", memory="40GB")
    assert Accelerator.NVIDIA.V100(memory="32GB") == Accelerator("V100", memory="32GB")
    assert Accelerator.NVIDIA.T4() == Accelerator("T4")
    assert Accelerator.NVIDIA.A100(count=8).count == 8
    for ff in ("SXM", "PCIe", "NVL"):
        assert Accelerator.NVIDIA.H100(form_factor=ff).form_factor == ff
    assert Accelerator.AWS.Trainium(version=2) == Accelerator("Trainium2")
    assert Accelerator.AWS.Inferentia(version=2) == Accelerator("Inferentia2")
    assert Accelerator.AWS.Trainium(1) == parse_accelerator("Trainium")
    assert Accelerator.Google.TPU(version="v5p") == Accelerator("TPU-v5p")
    assert Accelerator.Google.TPUSlice("v5p-8") == Accelerator("TPU-v5p", count=4)
    assert Accelerator.Google.TPUSlice("v6e-16") == Accelerator("TPU-v6e", count=16)
    assert Accelerator.AMD.MI("300X") == Accelerator("MI300X")
    assert Accelerator.AMD.MI("250X") == Accelerator("MI250X")
    assert Accelerator.AMD.RadeonPro("V710") == Accelerator("RadeonPro-V710")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("T4", Accelerator("T4")),
        ("A100", Accelerator("A100")),
        ("H100", Accelerator("H100")),
        ("A100-40GB", Accelerator("A100", memory="40GB")),
        ("a100 40gb", Accelerator("A100", memory="40GB")),
        ("A100_40G", Accelerator("A100", memory="40GB")),
        ("H100-SXM", Accelerator("H100", form_factor="SXM")),
        ("h100-pcie", Accelerator("H100", form_factor="PCIe")),
        ("H100-SXM5", Accelerator("H100", form_factor="SXM")),
        ("H100-80GB", Accelerator("H100", memory="80GB")),
        ("H100-80GB-SXM", Accelerator("H100", memory="80GB", form_factor="SXM")),
        ("Trainium2", Accelerator("Trainium2")),
        ("trn2", Accelerator("Trainium2")),
        ("Inf2", Accelerator("Inferentia2")),
        ("MI300X", Accelerator("MI300X")),
        ("AMD MI300X", Accelerator("MI300X")),
        ("NVIDIA-A100", Accelerator("A100")),
        ("A100:4", Accelerator("A100", count=4)),
        ("4xA100", Accelerator("A100", count=4)),
        ("8 x H100-SXM", Accelerator("H100", count=8, form_factor="SXM")),
        ("v5p-8", Accelerator("TPU-v5p", count=4)),
        ("TPU-v4-16", Accelerator("TPU-v4", count=8)),
        ("v5litepod-8", Accelerator("TPU-v5e", count=8)),
        ("TPU-v5p", Accelerator("TPU-v5p")),
        ("RTX 6000 Ada", Accelerator("RTX6000-Ada")),
        (" l40s ", Accelerator("L40S")),
    ],
)
def test_shorthand(text: str, expected: Accelerator) -> None:
    assert parse_accelerator(text) == expected


@pytest.mark.parametrize(
    ("acc", "text"),
    [
        (Accelerator("A100"), "A100"),
        (Accelerator("A100", count=4, memory="40GB"), "A100-40GB:4"),
        (Accelerator("H100", memory="80GB", form_factor="SXM"), "H100-80GB-SXM"),
        (Accelerator("H100", memory="80GB", mig=("3g.40gb", "3g.40gb")), "H100-80GB@2x3g.40gb"),
        (Accelerator("TPU-v5p", count=4), "TPU-v5p:4"),
    ],
)
def test_str(acc: Accelerator, text: str) -> None:
    assert str(acc) == text


def test_nvidia_literal_values_all_parse() -> None:
    assert {"T4", "A100-40GB", "H100-SXM", "H100-NVL", "GB200"} <= set(NVIDIA_NAMES)
    for name in NVIDIA_NAMES:
        assert is_nvidia(name), name
        assert parse_accelerator(parse_accelerator(name)) == parse_accelerator(name)


def test_catalog_memory() -> None:
    cat = current_catalog()
    memory = {e.variant: e.memory_gb for e in cat.entries}
    assert memory["A100-80GB"] == 80
    assert memory["A100-40GB"] == 40
    assert memory["H100-80GB-SXM"] == 80
    assert memory["H200-141GB"] == 141
    assert memory["B200-192GB"] == 192
    assert memory["GB200-384GB"] == 384
    assert memory["GH200-96GB"] == 96
    assert memory["T4-16GB"] == 16
    assert {memory["V100-16GB"], memory["V100-32GB"]} == {16, 32}
    # A bare model stands for its default variant: A100 80GB, H100 SXM.
    assert entry_for("A100") == cat.preferred("A100", 80)
    preferred_h100 = entry_for("H100")
    assert preferred_h100 is not None
    assert preferred_h100.form_factor == "SXM"


def test_helpers() -> None:
    assert is_nvidia("H100")
    assert not is_nvidia("MI300X")
    assert is_trainium("Trainium2")
    assert not is_trainium("H100")
    assert not is_nvidia("no-such-gpu")
    assert is_nvidia(Accelerator.NVIDIA.T4())
    assert workers_per_node(None) == 1
    assert workers_per_node(Accelerator.NVIDIA.A100(count=8)) == 1


def test_value_is_picklable_and_hashable() -> None:
    acc = Accelerator.NVIDIA.H100(count=2, mig="1g.10gb")
    assert pickle.loads(pickle.dumps(acc)) == acc
    assert len({acc, parse_accelerator(str(acc))}) == 1


# -------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("A1000", "did you mean 'A100'"),
        ("", "names no model"),
        ("H100-60GB", "80GB or 94GB"),
        ("A100-XYZ", "cannot read 'XYZ'"),
        ("T4-SXM", "cannot read 'SXM'"),
        ("A100:4:2", "unknown accelerator"),
        ("4xA100:2", "count twice"),
        ("A100:0", "count must be an integer >= 1"),
        ("v5p-7", "multiple of 2"),
        ("v5p-8:2", "both a slice size and a count"),
        ("A100@", "names no MIG profile"),
        ("H100-94GB-SXM", "there is no H100 with 94GB and form factor SXM"),
    ],
)
def test_parse_errors(value: str, needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle.replace("(", r"\(")):
        parse_accelerator(value)


def test_unknown_lists_known_models() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_accelerator("Gaudi3")
    message = str(info.value)
    assert "Known accelerators:" in message
    assert "A100" in message and "Trainium2" in message


def test_factory_errors() -> None:
    with pytest.raises(ConfigurationError, match="known versions: 1, 2"):
        Accelerator.AWS.Trainium(version=3)
    with pytest.raises(ConfigurationError, match="choose one of SXM, PCIe or NVL"):
        Accelerator.NVIDIA.H100(form_factor="OAM")
    with pytest.raises(ConfigurationError, match="no form-factor variants"):
        Accelerator.NVIDIA.T4(form_factor="SXM")
    with pytest.raises(ConfigurationError, match="40GB or 80GB"):
        Accelerator.NVIDIA.A100(memory="big")
    with pytest.raises(ConfigurationError, match="count must be"):
        Accelerator.NVIDIA.A100(count=0)
    with pytest.raises(ConfigurationError, match="look like 'v5p-8'"):
        Accelerator.Google.TPUSlice("v5p")
    with pytest.raises(ConfigurationError, match="not a TPU slice"):
        Accelerator.Google.TPUSlice("V100-8")
    with pytest.raises(ConfigurationError, match="must be a string"):
        parse_accelerator(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------------- properties


@st.composite
def requests(draw: st.DrawFn) -> tuple[str, int, int | None, str | None, str | list[str] | None]:
    """(model, count, memory GB, form factor, mig) for a variant that exists."""
    cat = current_catalog()
    entry = draw(st.sampled_from(cat.entries))
    count = draw(st.integers(1, 16))
    memory = entry.memory_gb if draw(st.booleans()) else None
    form_factor = entry.form_factor if draw(st.booleans()) else None
    mig: str | list[str] | None = None
    wants_mig: bool = draw(st.booleans())
    if entry.mig_profiles and wants_mig:
        names = [p.name for p in entry.mig_profiles]
        if draw(st.booleans()):
            mig = draw(st.sampled_from(names))
        else:
            layout = draw(st.lists(st.sampled_from(names), min_size=1, max_size=7))
            try:
                check_layout(layout, entry.mig_profiles, entry.variant)
            except ConfigurationError:
                layout = layout[:1]
            mig = layout
        memory = entry.memory_gb  # profiles belong to one memory size
    return entry.model, count, memory, form_factor, mig


def _shorthand(
    data: st.DataObject, model: str, count: int, memory: int | None, ff: str | None, mig: str | list[str] | None
) -> str:
    sep = data.draw(st.sampled_from(["-", " ", "_"]))
    words = [model]
    if memory is not None:
        words.append(data.draw(st.sampled_from([f"{memory}GB", f"{memory}gb", f"{memory}G", f"{memory}GiB"])))
    if ff is not None:
        words.append(ff.lower() if data.draw(st.booleans()) else ff)
    text = sep.join(words)
    if count != 1 or data.draw(st.booleans()):
        text = f"{count}x{text}" if data.draw(st.booleans()) else f"{text}:{count}"
    if mig is not None:
        text += "@" + (mig if isinstance(mig, str) else "+".join(f"1x{p}" for p in mig))
    return text


@given(st.data(), requests())
def test_shorthand_and_factory_agree(
    data: st.DataObject, request: tuple[str, int, int | None, str | None, str | list[str] | None]
) -> None:
    model, count, memory, ff, mig = request
    built = make_accelerator(model, count, memory, ff, mig)
    shorthand = _shorthand(data, model, count, memory, ff, mig)
    assert parse_accelerator(shorthand) == built
    factory = getattr(Accelerator.NVIDIA, model, None)
    if factory is not None:
        assert factory(count=count, memory=memory, mig=mig, form_factor=ff) == built


@given(requests())
def test_str_round_trips(request: tuple[str, int, int | None, str | None, str | list[str] | None]) -> None:
    acc = make_accelerator(*request)
    assert parse_accelerator(str(acc)) == acc
    assert parse_accelerator(acc) == acc
    expected_workers = acc.count * len(acc.mig) if acc.mig else 1
    assert workers_per_node(acc) == expected_workers


# ------------------------------------------------------------------------- plugins


class _GaudiPlugin:
    """A third-party catalog: one new accelerator, no change to core."""

    @hookimpl
    def skyward_accelerators(self) -> Sequence[CatalogEntry]:
        return [CatalogEntry(model="Gaudi3", vendor="Intel", memory_gb=128, aliases=("HL-325L",))]


def test_plugin_adds_an_accelerator() -> None:
    with pytest.raises(ConfigurationError, match="unknown accelerator 'Gaudi3'"):
        parse_accelerator("Gaudi3")
    plugin = _GaudiPlugin()
    registry.register(plugin, name="test-gaudi")
    try:
        acc = parse_accelerator("Gaudi3:8")
        assert acc == Accelerator("Gaudi3", count=8)
        assert parse_accelerator("hl-325l") == Accelerator("Gaudi3")
        assert not is_nvidia("Gaudi3")
        offers = [
            InstanceType(name="m7i.8xlarge", vcpus=32, memory=128 * GIB, on_demand_price=1.6),
            InstanceType(
                name="gaudi3.48xlarge",
                vcpus=192,
                memory=2048 * GIB,
                on_demand_price=40.0,
                accelerator="Gaudi3",
                accelerator_count=8,
            ),
            InstanceType(
                name="p5.48xlarge",
                vcpus=192,
                memory=2048 * GIB,
                on_demand_price=55.0,
                accelerator="H100",
                accelerator_count=8,
            ),
        ]
        assert select_instance(offers, accelerator="Gaudi3:8").name == "gaudi3.48xlarge"
        assert select_instance(offers, accelerator="Gaudi3").name == "gaudi3.48xlarge"
    finally:
        registry.unregister(plugin)
    with pytest.raises(ConfigurationError, match="unknown accelerator"):
        parse_accelerator("Gaudi3")


class _BadPlugin:
    @hookimpl
    def skyward_accelerators(self) -> Sequence[object]:
        return ["not an entry"]


def test_plugin_with_bad_entries_is_named() -> None:
    plugin = _BadPlugin()
    registry.register(plugin, name="test-bad-accelerators")
    try:
        with pytest.raises(ConfigurationError, match=r"expected skyward\.accelerators\.CatalogEntry"):
            parse_accelerator("A100")
    finally:
        registry.unregister(plugin)
    assert parse_accelerator("A100") == Accelerator("A100")


class _OverridePlugin:
    """A plugin registered later wins for a variant it also describes."""

    @hookimpl
    def skyward_accelerators(self) -> Sequence[CatalogEntry]:
        return [CatalogEntry(model="L4", vendor="NVIDIA", memory_gb=24, aliases=("Ada-L4",))]


def test_later_plugin_extends_existing_model() -> None:
    plugin = _OverridePlugin()
    registry.register(plugin, name="test-override")
    try:
        assert parse_accelerator("Ada-L4") == Accelerator("L4")
        assert len(current_catalog().variants("L4")) == 1
    finally:
        registry.unregister(plugin)


def test_module_level_nvidia_factories_are_the_accelerator_ones() -> None:
    import skyward as sky

    assert sky.accelerators.A100() == Accelerator.NVIDIA.A100()
    assert sky.accelerators.H100(count=2, mig="3g.40gb") == Accelerator.NVIDIA.H100(count=2, mig="3g.40gb")
    for name in ("T4", "L4", "L40S", "A10G", "H200", "B200", "GB200", "GH200", "V100"):
        assert getattr(sky.accelerators, name)() == getattr(Accelerator.NVIDIA, name)(), name
