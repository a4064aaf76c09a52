"""The accelerator catalog: entries contributed by plugins, merged into one lookup.

Every plugin (the core included) contributes :class:`CatalogEntry` values through the
``skyward_accelerators`` hook. :func:`current_catalog` merges what the registered
plugins return. When two plugins describe the same variant (model, memory, form
factor), or the same spelling of a model name, the plugin registered last wins, so a
plugin can correct or extend the core's data without changing it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from skyward.accelerators.mig import MigProfile
from skyward.errors import ConfigurationError
from skyward.plugins.registry import registry

_SEPARATORS = re.compile(r"[\s_\-]+")
_GPU_MEMORY = re.compile(r"^\s*(\d+)\s*(gb|gib|g)?\s*$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One variant of an accelerator model.

    ``model`` is the canonical model name (``"A100"``, ``"Trainium2"``, ``"TPU-v5p"``);
    a model may have several entries, one per memory size and form factor. ``aliases``
    are other spellings of the model name. ``default`` marks the variant a bare model
    name stands for when one must be chosen (display, MIG profiles). ``memory_gb`` is
    the memory of one device. ``cores_per_chip`` is set for TPUs: slice names such as
    ``"v5p-8"`` count cores, and a slice has ``size / cores_per_chip`` chips.
    """

    model: str
    """The canonical model name (``"A100"``); every spelling of the model resolves to it."""
    vendor: str
    """Who makes it (``"NVIDIA"``, ``"AWS"``, ``"Google"``, ``"AMD"``)."""
    memory_gb: int
    """Memory of one device, GB."""
    form_factor: str | None = None
    """The form factor (``"SXM"``, ``"PCIe"``), where the model comes in several; else ``None``."""
    aliases: tuple[str, ...] = ()
    """Other spellings of the model name (``"Trn2"`` for ``"Trainium2"``)."""
    mig_profiles: tuple[MigProfile, ...] = ()
    """The MIG partitions this variant can be split into; empty where it has no MIG."""
    default: bool = False
    """Whether a bare model name stands for this variant when one must be chosen."""
    kind: str = "gpu"
    """The device family: ``"gpu"``, ``"tpu"``, ``"trainium"`` or ``"inferentia"``."""
    cores_per_chip: int | None = None
    """TPU cores per chip, to turn slice names (``"v5p-8"`` counts cores) into chips; ``None`` otherwise."""

    def __post_init__(self) -> None:
        if not self.model or not self.vendor:
            raise ConfigurationError(f"catalog entry needs a model and a vendor: {self!r}")
        if self.memory_gb <= 0:
            raise ConfigurationError(f"catalog entry {self.model!r} needs memory_gb > 0")

    @property
    def variant(self) -> str:
        """``"A100-80GB"``, ``"H100-80GB-SXM"``: model, memory and form factor."""
        parts = [self.model, f"{self.memory_gb}GB"]
        if self.form_factor is not None:
            parts.append(self.form_factor)
        return "-".join(parts)


def spelling_key(text: str) -> str:
    """The form names are compared in: case-insensitive, separators ignored."""
    return _SEPARATORS.sub("", text).casefold()


def parse_gpu_memory(value: str | int) -> int | None:
    """``"40GB"``, ``"40gb"``, ``"40 GiB"``, ``"40G"``, ``40`` -> 40 (GB); else ``None``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    match = _GPU_MEMORY.match(value)
    if match is None or int(match[1]) <= 0:
        return None
    return int(match[1])


class Catalog:
    """An immutable, indexed view of a sequence of catalog entries."""

    __slots__ = ("_by_model", "_spellings", "entries")

    def __init__(self, entries: Iterable[CatalogEntry]) -> None:
        seen: set[tuple[str, int, str | None]] = set()
        kept: list[CatalogEntry] = []
        spellings: dict[str, str] = {}
        by_model: dict[str, list[CatalogEntry]] = {}
        for entry in entries:
            if not isinstance(entry, CatalogEntry):
                raise ConfigurationError(
                    f"a plugin's skyward_accelerators() returned {entry!r}; "
                    "expected skyward.accelerators.CatalogEntry values"
                )
            model = spellings.setdefault(spelling_key(entry.model), entry.model)
            identity = (model, entry.memory_gb, entry.form_factor)
            if identity in seen:
                continue
            seen.add(identity)
            kept.append(entry)
            by_model.setdefault(model, []).append(entry)
            for alias in entry.aliases:
                spellings.setdefault(spelling_key(alias), model)
        self.entries: tuple[CatalogEntry, ...] = tuple(kept)
        """The entries, in the order given, without repeats of a model, memory and form factor."""
        self._spellings = spellings
        self._by_model = by_model

    def __repr__(self) -> str:
        return f"Catalog({len(self.entries)} entries, models={self.models()})"

    def models(self) -> list[str]:
        """Canonical model names, in catalog order."""
        return list(self._by_model)

    def model_for(self, spelling: str) -> str | None:
        """The canonical model a spelling stands for (``"a100"`` -> ``"A100"``)."""
        return self._spellings.get(spelling_key(spelling))

    def variants(self, model: str) -> list[CatalogEntry]:
        """Every variant of the canonical ``model``, in catalog order; empty for an unknown one."""
        return list(self._by_model.get(model, ()))

    def matching(self, model: str, memory_gb: int | None = None, form_factor: str | None = None) -> list[CatalogEntry]:
        """The variants of ``model`` with that memory and form factor (``None``: any)."""
        return [
            e
            for e in self._by_model.get(model, ())
            if (memory_gb is None or e.memory_gb == memory_gb) and (form_factor is None or e.form_factor == form_factor)
        ]

    def preferred(
        self, model: str, memory_gb: int | None = None, form_factor: str | None = None
    ) -> CatalogEntry | None:
        """The variant that stands for an unspecific name: the default one if it
        matches, else the first match."""
        found = self.matching(model, memory_gb, form_factor)
        return next((e for e in found if e.default), found[0] if found else None)

    def form_factor_for(self, model: str, spelling: str) -> str | None:
        """The canonical form factor of ``model`` for a spelling (``"sxm5"`` -> ``"SXM"``)."""
        key = spelling_key(spelling)
        for entry in self._by_model.get(model, ()):
            ff = entry.form_factor
            if ff is None:
                continue
            ff_key = spelling_key(ff)
            if key == ff_key or (key.startswith(ff_key) and key[len(ff_key) :].isdigit()):
                return ff
        return None

    def form_factors(self, model: str) -> list[str]:
        """The form factors ``model`` comes in, in catalog order, each once."""
        found: list[str] = []
        for entry in self._by_model.get(model, ()):
            if entry.form_factor is not None and entry.form_factor not in found:
                found.append(entry.form_factor)
        return found

    def memories(self, model: str) -> list[int]:
        """The memory sizes ``model`` comes in, GB, ascending."""
        return sorted({e.memory_gb for e in self._by_model.get(model, ())})


@lru_cache(maxsize=8)
def _build(entries: tuple[CatalogEntry, ...]) -> Catalog:
    return Catalog(entries)


def catalog_of(entries: Sequence[CatalogEntry]) -> Catalog:
    """A catalog of exactly these entries (cached), for tests and explicit use."""
    return _build(tuple(entries))


def current_catalog() -> Catalog:
    """The catalog merged from every registered plugin's ``skyward_accelerators()``."""
    return catalog_of(registry.accelerator_entries())
