"""The :class:`Accelerator` value: which devices, how many, and how they are split.

Build one with the factories (``Accelerator.NVIDIA.A100(count=4)``) or from text with
:func:`skyward.accelerators.parse_accelerator` (``"A100:4"``); both check the values
against the catalog and return the canonical form, so equal requests compare equal.
Constructing the dataclass directly skips those checks.

Text form, as ``str(acc)`` writes it and ``parse_accelerator`` reads it::

    MODEL[-MEMORY][-FORM_FACTOR][:COUNT][@MIG]

    "A100"  "A100-40GB"  "H100-SXM"  "H100-80GB:8"  "H100-80GB@2x3g.40gb"

``parse_accelerator`` also accepts ``"4xA100"`` for a count, ``"@3g.40gb"`` for "that
profile as many times as it fits", any case, spaces or underscores for hyphens, and
TPU slices such as ``"v5p-8"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from skyward.accelerators.mig import format_mig
from skyward.errors import ConfigurationError

if TYPE_CHECKING:
    from skyward.accelerators.factories import (
        AMDFactories,
        AWSFactories,
        GoogleFactories,
        NVIDIAFactories,
    )


@dataclass(frozen=True, slots=True)
class Accelerator:
    """A request for ``count`` devices of one accelerator model on each node.

    ``name`` is the canonical model (``"A100"``, ``"Trainium2"``, ``"TPU-v5p"``).
    ``memory`` (``"40GB"``) and ``form_factor`` (``"SXM"``) narrow the variant; ``None``
    accepts any variant of the model. ``mig`` lists the MIG partitions of each GPU
    (``("3g.40gb", "3g.40gb")``); empty means no MIG.
    """

    name: str
    """The canonical model (``"A100"``, ``"Trainium2"``, ``"TPU-v5p"``)."""
    count: int = 1
    """Devices per node."""
    memory: str | None = None
    """The memory variant (``"40GB"``); ``None`` accepts any."""
    form_factor: str | None = None
    """The form factor (``"SXM"``, ``"PCIe"``); ``None`` accepts any."""
    mig: tuple[str, ...] = ()
    """The MIG partitions of each GPU (``("3g.40gb", "3g.40gb")``), one worker each; empty: no MIG."""

    # Factory namespaces, attached by skyward.accelerators.factories.
    NVIDIA: ClassVar[type[NVIDIAFactories]]
    """NVIDIA GPUs by model: ``Accelerator.NVIDIA.H100(count=8)``."""
    AWS: ClassVar[type[AWSFactories]]
    """AWS chips: ``Accelerator.AWS.Trainium(2)``, ``Accelerator.AWS.Inferentia(2)``."""
    Google: ClassVar[type[GoogleFactories]]
    """Google TPUs: ``Accelerator.Google.TPU("v5p")``, ``Accelerator.Google.TPUSlice("v5p-8")``."""
    AMD: ClassVar[type[AMDFactories]]
    """AMD GPUs: ``Accelerator.AMD.MI("300X")``, ``Accelerator.AMD.RadeonPro("V710")``."""

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 1:
            raise ConfigurationError(f"Accelerator(count={self.count!r}) must be an integer >= 1")
        if isinstance(self.mig, str) or not isinstance(self.mig, tuple | list):
            raise ConfigurationError(f"Accelerator(mig={self.mig!r}) must be a tuple of MIG profiles")
        if not isinstance(self.mig, tuple):
            object.__setattr__(self, "mig", tuple(self.mig))

    @property
    def memory_gb(self) -> int | None:
        """``"40GB"`` -> 40; ``None`` when any memory variant is accepted."""
        return None if self.memory is None else int(self.memory.removesuffix("GB"))

    @property
    def variant(self) -> str:
        """The text form without count and MIG: ``"A100-40GB"``, ``"H100-SXM"``."""
        parts = [self.name]
        if self.memory is not None:
            parts.append(self.memory)
        if self.form_factor is not None:
            parts.append(self.form_factor)
        return "-".join(parts)

    def __str__(self) -> str:
        text = self.variant
        if self.count != 1:
            text += f":{self.count}"
        if self.mig:
            text += f"@{format_mig(self.mig)}"
        return text


def workers_per_node(acc: Accelerator | None) -> int:
    """Worker slots a node gets from its accelerators: one per MIG partition of each GPU
    (``count`` x partitions per GPU), else 1."""
    if acc is None or not acc.mig:
        return 1
    return acc.count * len(acc.mig)
