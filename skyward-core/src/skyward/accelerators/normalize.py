"""Checks an accelerator request against the catalog and returns its canonical form."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from skyward.accelerators.catalog import Catalog, CatalogEntry, current_catalog, parse_gpu_memory
from skyward.accelerators.mig import MigProfile, expand_mig
from skyward.accelerators.spec import Accelerator
from skyward.errors import ConfigurationError

MigSpec = str | Sequence[str]

MAX_COUNT = 16384
"""The most devices one request may name: a whole TPU pod slice (v5p: 8,960 chips) fits,
``10**30`` does not."""


def _one_of(items: Sequence[str]) -> str:
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} or {items[-1]}"


def unknown_model_error(name: str, catalog: Catalog) -> ConfigurationError:
    models = catalog.models()
    if not models:
        return ConfigurationError(
            f"unknown accelerator {name!r}: the accelerator catalog is empty; no plugin "
            "implementing skyward_accelerators() is registered"
        )
    close = difflib.get_close_matches(name, models, n=3, cutoff=0.6)
    hint = f"; did you mean {_one_of([repr(m) for m in close])}?" if close else "."
    return ConfigurationError(
        f"unknown accelerator {name!r}{hint} Known accelerators: {', '.join(models)} "
        "(a plugin can add more through the skyward_accelerators hook)"
    )


def resolve_model(name: str, catalog: Catalog) -> str:
    """The canonical model for a spelling, or a ConfigurationError naming the known ones."""
    model = catalog.model_for(name)
    if model is None:
        raise unknown_model_error(name, catalog)
    return model


def _resolve_mig(
    model: str, mig: MigSpec, matching: Sequence[CatalogEntry], catalog: Catalog
) -> tuple[tuple[str, ...], int]:
    """The partitions and the memory (GB) of the first matching variant they fit."""
    capable = sorted((e for e in matching if e.mig_profiles), key=lambda e: not e.default)
    if not capable:
        mig_models = [m for m in catalog.models() if any(e.mig_profiles for e in catalog.variants(m))]
        variants = {e.variant for e in matching}
        raise ConfigurationError(
            f"{model} ({', '.join(sorted(variants))}) does not support MIG partitioning; "
            f"MIG-capable accelerators: {', '.join(mig_models) or 'none'}"
        )
    # Variants that share memory and profiles (H100 SXM and PCIe) are tried once.
    groups: dict[tuple[int, tuple[MigProfile, ...]], list[CatalogEntry]] = {}
    for entry in capable:
        groups.setdefault((entry.memory_gb, entry.mig_profiles), []).append(entry)
    errors: list[str] = []
    for (memory_gb, profiles), entries in groups.items():
        label = f"{model}-{memory_gb}GB"
        form_factors = [e.form_factor for e in entries if e.form_factor is not None]
        if form_factors:
            label += "-" + "/".join(form_factors)
        try:
            return expand_mig(mig, profiles, label), memory_gb
        except ConfigurationError as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise ConfigurationError(errors[0])
    raise ConfigurationError(f"mig={mig!r} fits no variant of {model}: " + "; ".join(errors))


def make_accelerator(
    name: str,
    count: int = 1,
    memory: str | int | None = None,
    form_factor: str | None = None,
    mig: MigSpec | None = None,
    *,
    catalog: Catalog | None = None,
) -> Accelerator:
    """Validate a request against the catalog and return its canonical :class:`Accelerator`.

    ``memory`` is per device (``"40GB"`` or ``40``). ``mig`` is a profile (that profile
    as many times as it fits), or a list of partitions for each GPU. When MIG is asked
    for without a memory and the model comes in several memory sizes, the memory is
    pinned to the first variant (the default one first) whose profiles fit.
    """
    cat = current_catalog() if catalog is None else catalog
    model = resolve_model(name, cat)
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise ConfigurationError(f"accelerator count must be an integer >= 1 and at most {MAX_COUNT}, got {count!r}")
    if memory is not None and (isinstance(memory, bool) or not isinstance(memory, str | int)):
        raise ConfigurationError(f"{model}(memory={memory!r}): write the memory of one device like '40GB' or 40")
    if form_factor is not None and not isinstance(form_factor, str):
        raise ConfigurationError(f"{model}(form_factor={form_factor!r}) must be a string such as 'SXM'")
    if mig is not None and not (
        isinstance(mig, str) or (isinstance(mig, list | tuple) and all(isinstance(p, str) for p in mig))
    ):
        raise ConfigurationError(
            f"{model}(mig={mig!r}) must be a MIG profile such as '3g.40gb' or a list of profiles for each GPU"
        )

    memory_gb: int | None = None
    if memory is not None:
        memory_gb = parse_gpu_memory(memory)
        sizes = [f"{m}GB" for m in cat.memories(model)]
        if memory_gb is None:
            raise ConfigurationError(
                f"cannot read memory={memory!r} for {model}: write the memory of one device "
                f"like {sizes[0]!r} ({model} comes with {_one_of(sizes)})"
            )
        if memory_gb not in cat.memories(model):
            raise ConfigurationError(f"{model} comes with {_one_of(sizes)} of memory; memory={memory!r} is not offered")

    canonical_ff: str | None = None
    if form_factor is not None:
        canonical_ff = cat.form_factor_for(model, form_factor)
        if canonical_ff is None:
            choices = cat.form_factors(model)
            allowed = (
                f"choose one of {_one_of(choices)}"
                if choices
                else "it has no form-factor variants, leave form_factor unset"
            )
            raise ConfigurationError(
                f"{model}(form_factor={form_factor!r}): {model} has no such form factor; {allowed}"
            )

    matching = cat.matching(model, memory_gb, canonical_ff)
    if not matching:
        variants = ", ".join(e.variant for e in cat.variants(model))
        raise ConfigurationError(
            f"there is no {model} with {memory_gb}GB and form factor {canonical_ff}; variants: {variants}"
        )

    partitions: tuple[str, ...] = ()
    if mig is not None:
        partitions, pinned = _resolve_mig(model, mig, matching, cat)
        if len({e.memory_gb for e in matching}) > 1:
            memory_gb = pinned

    return Accelerator(
        name=model,
        count=count,
        memory=None if memory_gb is None else f"{memory_gb}GB",
        form_factor=canonical_ff,
        mig=partitions,
    )
