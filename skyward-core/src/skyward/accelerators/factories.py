"""``Accelerator.NVIDIA.H100(...)``, ``Accelerator.AWS.Trainium(2)`` and friends.

Each factory builds its request through the same validation as the string shorthand,
so ``Accelerator.NVIDIA.A100(count=4, memory="40GB") == parse_accelerator("A100-40GB:4")``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from skyward.accelerators.catalog import current_catalog
from skyward.accelerators.normalize import MigSpec, make_accelerator
from skyward.accelerators.parse import parse_accelerator
from skyward.accelerators.spec import Accelerator
from skyward.errors import ConfigurationError

_SLICE = re.compile(r"^\s*((?:tpu[\s_-]*)?v\w+)[\s_-]+\d+\s*$", re.IGNORECASE)


def _text(factory: str, parameter: str, value: object) -> str:
    """``value`` stripped, when it is a non-empty string; else an error naming the parameter."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{factory}({parameter}={value!r}) must be a non-empty string")
    return value.strip()


def _named(factory: str, parameter: str, value: object, name: str, count: int) -> Accelerator:
    """``make_accelerator(name, count)``, with an unknown model reported against the
    factory parameter that named it: ``Accelerator.AMD.MI(model='x')``."""
    try:
        return make_accelerator(name, count)
    except ConfigurationError as exc:
        if current_catalog().model_for(name) is None:
            raise ConfigurationError(f"{factory}({parameter}={value!r}): {exc}") from None
        raise


@dataclass(frozen=True, slots=True)
class NVIDIAModel:
    """A callable that builds requests for one NVIDIA model."""

    model: str

    def __call__(
        self,
        count: int = 1,
        memory: str | int | None = None,
        mig: MigSpec | None = None,
        form_factor: str | None = None,
    ) -> Accelerator:
        return make_accelerator(self.model, count, memory, form_factor, mig)


class NVIDIAFactories:
    """NVIDIA GPUs: ``Accelerator.NVIDIA.A100(count=1, memory=None, mig=None,
    form_factor=None)``. ``memory`` is per GPU (``"40GB"``); ``mig`` a MIG profile or
    a list of partitions for each GPU."""

    T4 = NVIDIAModel("T4")
    T4G = NVIDIAModel("T4G")
    L4 = NVIDIAModel("L4")
    L40 = NVIDIAModel("L40")
    L40S = NVIDIAModel("L40S")
    A10 = NVIDIAModel("A10")
    A10G = NVIDIAModel("A10G")
    A40 = NVIDIAModel("A40")
    A6000 = NVIDIAModel("A6000")
    A100 = NVIDIAModel("A100")
    H100 = NVIDIAModel("H100")
    H200 = NVIDIAModel("H200")
    GH200 = NVIDIAModel("GH200")
    B100 = NVIDIAModel("B100")
    B200 = NVIDIAModel("B200")
    B300 = NVIDIAModel("B300")
    GB200 = NVIDIAModel("GB200")
    V100 = NVIDIAModel("V100")
    A30 = NVIDIAModel("A30")
    A2000 = NVIDIAModel("A2000")
    A4000 = NVIDIAModel("A4000")
    A4500 = NVIDIAModel("A4500")
    A5000 = NVIDIAModel("A5000")
    RTX4000Ada = NVIDIAModel("RTX4000-Ada")
    RTX6000Ada = NVIDIAModel("RTX6000-Ada")
    RTXPRO6000 = NVIDIAModel("RTXPRO6000")
    RTX3060 = NVIDIAModel("RTX3060")
    RTX3070 = NVIDIAModel("RTX3070")
    RTX3080 = NVIDIAModel("RTX3080")
    RTX3080Ti = NVIDIAModel("RTX3080-Ti")
    RTX3090 = NVIDIAModel("RTX3090")
    RTX3090Ti = NVIDIAModel("RTX3090-Ti")
    RTX4060Ti = NVIDIAModel("RTX4060-Ti")
    RTX4070 = NVIDIAModel("RTX4070")
    RTX4070Ti = NVIDIAModel("RTX4070-Ti")
    RTX4080 = NVIDIAModel("RTX4080")
    RTX4080Super = NVIDIAModel("RTX4080-Super")
    RTX4090 = NVIDIAModel("RTX4090")
    RTX5070 = NVIDIAModel("RTX5070")
    RTX5080 = NVIDIAModel("RTX5080")
    RTX5090 = NVIDIAModel("RTX5090")


def _versioned(family: str, kind: str, version: int | str, count: int) -> Accelerator:
    if isinstance(version, bool) or not isinstance(version, int | str):
        raise ConfigurationError(f"Accelerator.AWS.{family}(version={version!r}) must be a version such as 2")
    name = f"{family}{version}"
    catalog = current_catalog()
    if catalog.model_for(name) is None:
        known = [
            m.removeprefix(family)
            for m in catalog.models()
            if catalog.variants(m)[0].kind == kind and m.startswith(family)
        ]
        raise ConfigurationError(
            f"Accelerator.AWS.{family}(version={version!r}): unknown {family} version; "
            f"known versions: {', '.join(known)}"
        )
    return make_accelerator(name, count, catalog=catalog)


class AWSFactories:
    """AWS silicon: ``Accelerator.AWS.Trainium(2)``, ``Accelerator.AWS.Inferentia(2)``."""

    @staticmethod
    def Trainium(version: int, count: int = 1) -> Accelerator:
        return _versioned("Trainium", "trainium", version, count)

    @staticmethod
    def Inferentia(version: int, count: int = 1) -> Accelerator:
        return _versioned("Inferentia", "inferentia", version, count)


class GoogleFactories:
    """Google TPUs: ``Accelerator.Google.TPU("v5p")``, ``Accelerator.Google.TPUSlice("v5p-8")``."""

    @staticmethod
    def TPU(version: str, count: int = 1) -> Accelerator:
        """``version`` such as ``"v5p"``; ``count`` chips per node."""
        given = version
        version = _text("Accelerator.Google.TPU", "version", version)
        if not version.casefold().startswith("v"):
            version = f"v{version}"
        return _named("Accelerator.Google.TPU", "version", given, f"TPU-{version}", count)

    @staticmethod
    def TPUSlice(name: str) -> Accelerator:
        """A slice such as ``"v5p-8"``: the TPU version and its size."""
        match = _SLICE.match(_text("Accelerator.Google.TPUSlice", "name", name))
        if match is None:
            raise ConfigurationError(
                f"Accelerator.Google.TPUSlice(name={name!r}): TPU slice names look like 'v5p-8' or 'v6e-16' "
                "(version-size)"
            )
        catalog = current_catalog()
        tpus = [m for m in catalog.models() if catalog.variants(m)[0].kind == "tpu"]
        if catalog.model_for(match[1]) not in tpus:
            raise ConfigurationError(
                f"Accelerator.Google.TPUSlice(name={name!r}) is not a TPU slice; TPU versions: {', '.join(tpus)}"
            )
        return parse_accelerator(name, catalog=catalog)


class AMDFactories:
    """AMD GPUs: ``Accelerator.AMD.MI("300X")``, ``Accelerator.AMD.RadeonPro("V710")``."""

    @staticmethod
    def MI(model: str, count: int = 1) -> Accelerator:
        text = _text("Accelerator.AMD.MI", "model", model)
        name = text if text.casefold().startswith("mi") else f"MI{text}"
        return _named("Accelerator.AMD.MI", "model", model, name, count)

    @staticmethod
    def RadeonPro(model: str, count: int = 1) -> Accelerator:
        text = _text("Accelerator.AMD.RadeonPro", "model", model)
        return _named("Accelerator.AMD.RadeonPro", "model", model, f"RadeonPro-{text}", count)


Accelerator.NVIDIA = NVIDIAFactories
Accelerator.AWS = AWSFactories
Accelerator.Google = GoogleFactories
Accelerator.AMD = AMDFactories
