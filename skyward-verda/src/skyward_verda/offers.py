"""Verda instance types and availability as skyward offers (pure functions over JSON).

``GET /instance-types`` gives each type's ``instance_type`` name (``"1H100.80S.30V"``:
count, model, GPU memory and form factor, vCPUs), ``cpu.number_of_cores``,
``memory.size_in_gigabytes``, ``gpu.number_of_gpus`` / ``gpu.description``,
``price_per_hour`` and ``spot_price`` (USD, often as strings). ``GET
/instance-availability?is_spot=...`` gives, per location, the types that can be deployed
now: ``[{"location_code": "FIN-01", "availabilities": ["1H100.80S.30V", ...]}]``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from skyward.errors import ConfigurationError
from skyward.providers import GIB, InstanceType, parse_accelerator

_TYPE_NAME = re.compile(r"^(?P<count>\d+)(?P<model>[A-Z][A-Z0-9]*?)(?:\.(?P<mem>\d+)(?P<ff>[SP])?)?\.(?P<vcpus>\d+)V$")
_FORM_FACTORS = {"S": "SXM", "P": "PCIe"}
# Verda's spellings of model names the catalog spells otherwise.
_MODELS: Mapping[str, str] = {
    "RTX6000ADA": "RTX6000-Ada",
    "RTX4000ADA": "RTX4000-Ada",
    "RTXA6000": "A6000",
    "TESLAV100": "V100",
}
_MEMORY = re.compile(r"^(\d+)\s*GB$", re.IGNORECASE)
_FORM = re.compile(r"^(SXM\d?|PCIE|NVL)$", re.IGNORECASE)
_COUNT = re.compile(r"^\d+\s*x$", re.IGNORECASE)


def _parses(text: str) -> str | None:
    try:
        return str(parse_accelerator(text))
    except (ConfigurationError, ValueError):
        return None


def _from_description(description: str) -> tuple[str, str | None, str | None]:
    """("A100", "80", "SXM") from "8x A100 SXM4 80GB"."""
    words = description.split()
    if words and _COUNT.match(words[0]):
        words = words[1:]
    memory = form = None
    model_words = []
    for word in words:
        if (found := _MEMORY.match(word)) is not None:
            memory = found.group(1)
        elif _FORM.match(word):
            upper = word.upper()
            form = "PCIe" if upper == "PCIE" else ("NVL" if upper == "NVL" else "SXM")
        elif word.lower() != "tesla":
            model_words.append(word)
    joined = "".join(model_words).upper()
    return _MODELS.get(joined, joined), memory, form


def accelerator_of(name: str, description: str = "", model: str = "") -> str | None:
    """A catalog spelling of the type's GPU (``"H100-80GB-SXM"``), most specific first;
    the raw model text when the catalog does not know it."""
    match = _TYPE_NAME.match(name)
    desc_model, desc_memory, desc_form = _from_description(description) if description else ("", None, None)
    if match is not None:
        base = _MODELS.get(match["model"], match["model"])
    elif model.strip():
        compact = model.replace(" ", "").upper()
        base = _MODELS.get(compact, compact)
    else:
        base = desc_model
    if not base:
        return None
    memory = (match["mem"] if match is not None else None) or desc_memory
    form = (_FORM_FACTORS.get(match["ff"] or "") if match is not None else None) or desc_form
    candidates = []
    if memory and form:
        candidates.append(f"{base}-{memory}GB-{form}")
    if memory:
        candidates.append(f"{base}-{memory}GB")
    candidates.append(base)
    for candidate in candidates:
        if (parsed := _parses(candidate)) is not None:
            return parsed
    return base


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


@dataclass(frozen=True, slots=True)
class VerdaType:
    """One instance type: its InstanceType (prices, size, accelerator) without a place."""

    instance: InstanceType

    @property
    def name(self) -> str:
        return self.instance.name


def parse_instance_type(data: Mapping[str, Any]) -> VerdaType | None:
    """None when the entry cannot be described (no name, no size, no price)."""
    name = data.get("instance_type")
    price = _number(data.get("price_per_hour"))
    if not isinstance(name, str) or not name or price is None:
        return None
    cpu = data.get("cpu") or {}
    memory = data.get("memory") or {}
    gpu = data.get("gpu") or {}
    try:
        vcpus = int(cpu.get("number_of_cores") or 0)
        memory_bytes = int(float(memory.get("size_in_gigabytes") or 0) * GIB)
        gpus = int(gpu.get("number_of_gpus") or 0)
    except (TypeError, ValueError):
        return None
    match = _TYPE_NAME.match(name)
    if vcpus < 1 and match is not None:
        vcpus = int(match["vcpus"])
    if vcpus < 1 or memory_bytes < 1:
        return None
    accelerator = (
        accelerator_of(name, str(gpu.get("description") or ""), str(data.get("model") or "")) if gpus > 0 else None
    )
    return VerdaType(
        InstanceType(
            name=name,
            vcpus=vcpus,
            memory=memory_bytes,
            on_demand_price=price,
            accelerator=accelerator,
            accelerator_count=gpus if accelerator else 0,
            spot_price=_number(data.get("spot_price")),
        )
    )


def parse_instance_types(data: Iterable[Mapping[str, Any]]) -> list[VerdaType]:
    return [t for t in (parse_instance_type(d) for d in data) if t is not None]


Availability = dict[str, frozenset[str]]  # location code -> instance types deployable now


def parse_availability(data: Iterable[Mapping[str, Any]]) -> Availability:
    out: dict[str, frozenset[str]] = {}
    for entry in data:
        code = entry.get("location_code")
        if isinstance(code, str):
            out[code] = frozenset(str(t) for t in entry.get("availabilities") or ())
    return out


@dataclass(frozen=True, slots=True)
class Markets:
    """Which markets a pool needs in the one location all its nodes share."""

    spot: bool  # some node must (or wants to) run on spot
    on_demand: bool  # some node must run on-demand
    spot_optional: bool = False  # spot is wanted but on-demand will do (if-available)


def fits(type_name: str, location: str, markets: Markets, on_demand: Availability, spot: Availability) -> bool:
    has_od = type_name in on_demand.get(location, frozenset())
    has_spot = type_name in spot.get(location, frozenset())
    if markets.spot_optional:
        return has_od or has_spot
    return (not markets.spot or has_spot) and (not markets.on_demand or has_od)


def offered(
    types: Sequence[VerdaType],
    locations: Sequence[str],
    markets: Markets,
    on_demand: Availability,
    spot: Availability,
) -> list[InstanceType]:
    """The types with ``available`` set: deployable now in one of ``locations`` in the
    markets the pool needs."""
    return [
        replace(t.instance, available=any(fits(t.name, loc, markets, on_demand, spot) for loc in locations))
        for t in types
    ]


def choose_location(
    type_name: str,
    locations: Sequence[str],
    markets: Markets,
    on_demand: Availability,
    spot: Availability,
) -> str | None:
    """The first of ``locations`` where ``type_name`` can be deployed now; with
    ``spot_optional``, one that has spot is preferred."""
    usable = [loc for loc in locations if fits(type_name, loc, markets, on_demand, spot)]
    if markets.spot_optional:
        with_spot = [loc for loc in usable if type_name in spot.get(loc, frozenset())]
        usable = with_spot or usable
    return usable[0] if usable else None


def where_available(type_name: str, on_demand: Availability, spot: Availability) -> str:
    """ "on-demand in FIN-01, spot in FIN-03" (or "nowhere right now")."""
    parts = []
    od = sorted(loc for loc, types in on_demand.items() if type_name in types)
    sp = sorted(loc for loc, types in spot.items() if type_name in types)
    if od:
        parts.append(f"on-demand in {', '.join(od)}")
    if sp:
        parts.append(f"spot in {', '.join(sp)}")
    return "; ".join(parts) or "nowhere right now"
