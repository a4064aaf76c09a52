"""Memory sizes: ``"32GB"``, ``"40GiB"``, ``"512MB"``, ``"1TB"`` to bytes and back.

Everything is in **bytes**, and units are **binary**: ``GB`` and ``GiB`` both mean
2**30 bytes, as cloud providers mean it when they list an instance's memory ("16 GB"
of RAM is 16 GiB). So ``memory="32GB"`` fits a machine reported as 32 GiB.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from skyward.errors import ConfigurationError

KIB = 1024
"""Bytes in a kibibyte (``"1KB"`` and ``"1KiB"`` both mean this)."""
MIB = 1024**2
"""Bytes in a mebibyte (``"1MB"`` and ``"1MiB"`` both mean this)."""
GIB = 1024**3
"""Bytes in a gibibyte (``"1GB"`` and ``"1GiB"`` both mean this)."""
TIB = 1024**4
"""Bytes in a tebibyte (``"1TB"`` and ``"1TiB"`` both mean this)."""

_UNITS: dict[str, int] = {
    "b": 1,
    "k": KIB,
    "kb": KIB,
    "kib": KIB,
    "m": MIB,
    "mb": MIB,
    "mib": MIB,
    "g": GIB,
    "gb": GIB,
    "gib": GIB,
    "t": TIB,
    "tb": TIB,
    "tib": TIB,
}
_FORMAT_UNITS: tuple[tuple[str, int], ...] = (("TB", TIB), ("GB", GIB), ("MB", MIB), ("KB", KIB))
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)\s*$", re.IGNORECASE)

_ALLOWED = (
    "a positive number with a unit, e.g. '512MB', '32GB', '40GiB', '1.5TB' "
    "(units B, KB, MB, GB, TB or KiB, MiB, GiB, TiB, all powers of 1024), "
    "or an int number of bytes"
)


def parse_memory(value: str | int) -> int:
    """``"32GB"`` -> 34359738368: a memory size in bytes (binary units).

    An ``int`` is taken as bytes and returned unchanged, so ``parse_memory`` is
    idempotent. Fractions are allowed (``"1.5GB"``) and rounded down to whole bytes.
    Anything else raises :class:`ConfigurationError` listing the accepted forms.
    """
    if isinstance(value, bool):
        raise ConfigurationError(f"memory must be {_ALLOWED}; got {value!r}")
    if isinstance(value, int):
        if value <= 0:
            raise ConfigurationError(f"memory must be positive; got {value} bytes")
        return value
    if not isinstance(value, str):
        raise ConfigurationError(f"memory must be {_ALLOWED}; got {type(value).__name__}")
    match = _MEMORY.match(value)
    if match is None or match[2].casefold() not in _UNITS:
        raise ConfigurationError(f"cannot read memory {value!r}: write {_ALLOWED}")
    try:
        amount = Decimal(match[1])
    except InvalidOperation as exc:  # pragma: no cover - the pattern admits numbers only
        raise ConfigurationError(f"cannot read memory {value!r}: write {_ALLOWED}") from exc
    size = int(amount * _UNITS[match[2].casefold()])
    if size <= 0:
        raise ConfigurationError(f"memory must be positive; {value!r} is {size} bytes")
    return size


def format_memory(size: int) -> str:
    """Bytes -> the largest unit that represents them exactly: ``"32GB"``, ``"1536MB"``.

    ``parse_memory(format_memory(n)) == n`` for every positive ``n``.
    """
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise ConfigurationError(f"memory size must be a positive int of bytes; got {size!r}")
    for unit, factor in _FORMAT_UNITS:
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def format_memory_approx(size: int) -> str:
    """Bytes -> a short human reading (``"15.6GB"``), for messages only."""
    for unit, factor in _FORMAT_UNITS:
        if size >= factor:
            return f"{size / factor:.1f}".removesuffix(".0") + unit
    return f"{size}B"
