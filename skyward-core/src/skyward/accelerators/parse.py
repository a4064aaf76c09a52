"""String shorthand for accelerators: ``"A100"``, ``"H100-SXM:8"``, ``"4xT4"``, ``"v5p-8"``.

Grammar (case-insensitive; spaces, ``_`` and ``-`` separate words)::

    [COUNT x] [VENDOR] MODEL [MEMORY] [FORM_FACTOR] [SLICE] [:COUNT] [@MIG]

- ``MODEL``: a catalog model or alias (``A100``, ``Trainium2``, ``Trn2``, ``MI300X``,
  ``TPU-v5p`` or ``v5p``, ``RTX 4090`` or ``4090``); ``VENDOR`` (``NVIDIA``, ``AMD``,
  ``NVIDIA GeForce``, ...) may precede it.
- ``MEMORY``: per device, with a unit: ``40GB``, ``40G``, ``40GiB``.
- ``FORM_FACTOR``: one the model has (``SXM``, ``PCIe``, ``NVL``; ``SXM5`` reads as SXM).
- ``SLICE``: TPUs only, the slice size of a name such as ``v5p-8`` (cores for v4/v5p,
  chips for v5e/v6e); it sets the number of chips.
- ``COUNT``: devices per node, as ``A100:4`` or ``4xA100``.
- ``MIG``: ``@3g.40gb`` (that profile as many times as it fits) or explicit partitions
  ``@1x3g.40gb+2x2g.20gb``.
"""

from __future__ import annotations

import re

from skyward.accelerators.catalog import Catalog, CatalogEntry, current_catalog
from skyward.accelerators.normalize import make_accelerator, unknown_model_error
from skyward.accelerators.spec import Accelerator
from skyward.errors import ConfigurationError

_COUNT_PREFIX = re.compile(r"^(\d+)\s*[x\u00d7*]\s*(\S.*)$", re.IGNORECASE)
_COUNT_SUFFIX = re.compile(r"^(.*?\S)\s*:\s*(\d+)$")
_MEMORY_TOKEN = re.compile(r"^\d+\s*(gb|gib|g)$", re.IGNORECASE)
_WORDS = re.compile(r"[\s_\-]+")
_VENDOR_WORDS = {"nvidia", "geforce", "tesla", "amd", "aws", "google", "gcp"}
_MAX_VENDOR_WORDS = 2  # "NVIDIA GeForce RTX 4090", as nvidia-smi and RunPod name it


def _split_model(tokens: list[str], text: str, catalog: Catalog) -> tuple[str, list[str]]:
    """The longest run of leading words that names a model, and the words after it; up to
    two vendor words may come first."""
    for start in range(_MAX_VENDOR_WORDS + 1):
        if start > 0 and (len(tokens) <= start or tokens[start - 1].casefold() not in _VENDOR_WORDS):
            break
        for end in range(len(tokens), start, -1):
            model = catalog.model_for("".join(tokens[start:end]))
            if model is not None:
                return model, tokens[end:]
    raise unknown_model_error(text, catalog)


def _chips_in_slice(size: int, entries: list[CatalogEntry], text: str) -> int:
    cores = entries[0].cores_per_chip or 1
    if size < 1 or size % cores:
        raise ConfigurationError(
            f"TPU slice {text!r}: the size counts cores ({cores} per chip), "
            f"so it must be a positive multiple of {cores}"
        )
    return size // cores


def _parse_text(value: str, catalog: Catalog) -> Accelerator:
    text = value.strip()
    body, at, mig_text = text.partition("@")
    if at and not mig_text.strip():
        raise ConfigurationError(f"accelerator {value!r} ends with '@' but names no MIG profile (e.g. 'H100@3g.40gb')")
    count: int | None = None
    if suffix := _COUNT_SUFFIX.match(body):
        body, count = suffix[1], int(suffix[2])
    if prefix := _COUNT_PREFIX.match(body):
        if count is not None:
            raise ConfigurationError(f"accelerator {value!r} gives the count twice; write 'A100:4' or '4xA100'")
        body, count = prefix[2], int(prefix[1])
    tokens = [t for t in _WORDS.split(body.strip()) if t]
    if not tokens:
        raise ConfigurationError(f"accelerator {value!r} names no model; write e.g. 'A100', 'H100-SXM:8' or 'T4'")
    model, rest = _split_model(tokens, body.strip(), catalog)

    memory: str | None = None
    form_factor: str | None = None
    chips: int | None = None
    entries = catalog.variants(model)
    for token in rest:
        if _MEMORY_TOKEN.match(token) and memory is None:
            memory = token
        elif form_factor is None and catalog.form_factor_for(model, token) is not None:
            form_factor = token
        elif token.isdigit() and chips is None and entries[0].cores_per_chip is not None:
            chips = _chips_in_slice(int(token), entries, body)
        else:
            expected = ["a memory size such as " + repr(f"{entries[0].memory_gb}GB")]
            if catalog.form_factors(model):
                expected.append("a form factor (" + ", ".join(catalog.form_factors(model)) + ")")
            if entries[0].cores_per_chip is not None:
                expected.append("a slice size (e.g. 8)")
            raise ConfigurationError(
                f"cannot read {token!r} in accelerator {value!r}: after {model} "
                f"expected {' or '.join(expected)}, each at most once"
            )
    if chips is not None:
        if count is not None:
            raise ConfigurationError(f"accelerator {value!r} gives both a slice size and a count; give one")
        count = chips
    return make_accelerator(
        model,
        1 if count is None else count,
        memory,
        form_factor,
        mig_text.strip() if at else None,
        catalog=catalog,
    )


def parse_accelerator(value: str | Accelerator, *, catalog: Catalog | None = None) -> Accelerator:
    """Read an accelerator from shorthand or re-check an :class:`Accelerator`.

    Returns the canonical value: ``parse_accelerator(str(acc)) == acc`` for every value
    this function returns, and it is idempotent. Unknown models, memory sizes, form
    factors or MIG layouts raise :class:`skyward.errors.ConfigurationError` saying what
    is allowed.
    """
    cat = current_catalog() if catalog is None else catalog
    if isinstance(value, Accelerator):
        return make_accelerator(
            value.name,
            value.count,
            value.memory,
            value.form_factor,
            value.mig or None,
            catalog=cat,
        )
    if not isinstance(value, str):
        raise ConfigurationError(
            f"accelerator must be a string such as 'A100' or 'H100:8', or an Accelerator "
            f"(Accelerator.NVIDIA.H100()); got {type(value).__name__} {value!r}"
        )
    return _parse_text(value, cat)


def entry_for(value: str | Accelerator, *, catalog: Catalog | None = None) -> CatalogEntry | None:
    """The catalog variant ``value`` stands for (its default one if it is unspecific);
    ``None`` if it is not in the catalog."""
    cat = current_catalog() if catalog is None else catalog
    try:
        acc = parse_accelerator(value, catalog=cat)
    except ConfigurationError:
        return None
    return cat.preferred(acc.name, acc.memory_gb, acc.form_factor)


def is_nvidia(value: str | Accelerator) -> bool:
    """``is_nvidia("H100")`` is True; False for other vendors and unknown names."""
    entry = entry_for(value)
    return entry is not None and entry.vendor == "NVIDIA"


def is_trainium(value: str | Accelerator) -> bool:
    """``is_trainium("Trainium2")`` is True; False for anything else."""
    entry = entry_for(value)
    return entry is not None and entry.kind == "trainium"
