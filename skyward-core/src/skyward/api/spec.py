"""``build_spec``: every ComputePool parameter, validated once, as one frozen ``PoolSpec``.

``PoolSpec`` itself is the provider contract's (:mod:`skyward.providers.spec`: every driver
method receives it); it is importable here too. ``build_spec`` is pure: it raises
ConfigurationError for bad input and touches nothing, so a pool that fails validation has
provisioned nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from skyward.accelerators import parse_accelerator, workers_per_node
from skyward.api.options import AcceleratorChoice, NodesChoice, SpotChoice
from skyward.bootstrap import CLIENT_PYTHON
from skyward.display import DISPLAY_MODES
from skyward.errors import ConfigurationError
from skyward.image import Image
from skyward.plugins.registry import registry
from skyward.providers.settings import ProviderSettings, check_seconds_value
from skyward.providers.spec import PoolSpec
from skyward.scaling import MAX_NODES, nodes_of
from skyward.secrets import EnvValue
from skyward.spot import normalize_spot
from skyward.units import parse_memory

__all__ = ["MAX_CONCURRENCY", "MAX_CPU", "MAX_NODES", "PoolSpec", "build_spec", "price_cap"]

MAX_CONCURRENCY = 1024
"""Worker processes per accelerator partition on one node."""

MAX_CPU = 1024
"""CPU cores per worker: the largest instances have a few hundred."""


def _positive_int(name: str, value: object, upper: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= upper:
        raise ConfigurationError(f"ComputePool({name}={value!r}): must be an integer >= 1 and at most {upper}")
    return value


def _volumes(volume: Sequence[object] | None) -> tuple[object, ...]:
    """Each volume must be of a type some plugin mounts (skyward_volumes hook)."""
    if volume is None:
        return ()
    if not isinstance(volume, list | tuple):
        volume = [volume]
    known = tuple(p.volume_type for p in registry.volumes())
    for item in volume:
        if not known or not isinstance(item, known):
            names = ", ".join(t.__name__ for t in known) or "none (install e.g. skyward[aws] for S3Volume)"
            raise ConfigurationError(f"ComputePool(volume=...): {item!r} is not a volume; volume types: {names}")
    return tuple(volume)


def build_spec(
    *,
    provider: ProviderSettings,
    image: Image | None,
    pip: Sequence[str] | None,
    nodes: NodesChoice,
    machine: str | None,
    accelerator: AcceleratorChoice | None,
    cpu: int | None,
    memory: str | int | None,
    volume: Sequence[object] | None,
    spot: SpotChoice | None,
    timeout: float,
    env: Mapping[str, EnvValue] | None,
    concurrency: int,
    display: str,
    collect_metrics: bool,
    max_hourly_cost: float | None = None,
    name: str | None = None,
    keep_alive: float | None = None,
) -> PoolSpec:
    scaling = nodes_of(nodes)
    name = check_pool_name(name)
    concurrency = _positive_int("concurrency", concurrency, MAX_CONCURRENCY)
    if not isinstance(display, str) or display not in DISPLAY_MODES:
        raise ConfigurationError(
            f"ComputePool(display={display!r}): unknown display mode; use one of {', '.join(map(repr, DISPLAY_MODES))}"
        )
    if image is None:
        image = Image()
    elif not isinstance(image, Image):
        raise ConfigurationError(f"ComputePool(image=...) takes a skyward.Image, got {image!r}")
    if ".".join(image.python.split(".")[:2]) != CLIENT_PYTHON:
        raise ConfigurationError(
            f"Image(python={image.python!r}) differs from this client's Python {CLIENT_PYTHON}: client and workers "
            "must run the same minor version (cloudpickle payloads are not portable across them). "
            f"Run the client on Python {image.python}, or use Image(python={CLIENT_PYTHON!r})"
        )
    if pip is not None:
        if isinstance(pip, str) or not isinstance(pip, list | tuple):
            raise ConfigurationError(f"ComputePool(pip={pip!r}) takes a list of packages")
        image = image.with_pip(*pip)
    if env is not None:
        if not isinstance(env, Mapping):
            raise ConfigurationError(f"ComputePool(env={env!r}) takes a dict of environment variables")
        image = image.with_env(env)
    timeout = check_seconds_value("ComputePool", "timeout", timeout)
    keep_alive = check_keep_alive(keep_alive, timeout)
    if cpu is not None:
        cpu = _positive_int("cpu", cpu, MAX_CPU)
    memory_mb = None
    if memory is not None:
        try:
            memory_mb = parse_memory(memory) // 2**20
        except ConfigurationError as exc:
            raise ConfigurationError(f"ComputePool(memory={memory!r}): {exc}") from None
    if machine is not None and (not isinstance(machine, str) or not machine.strip()):
        raise ConfigurationError(f"ComputePool(machine={machine!r}): must be an instance type name")
    acc, partitions = None, 1
    if accelerator is not None:
        acc = parse_accelerator(accelerator)
        partitions = workers_per_node(acc)
    strategy = None
    if spot is not None:
        strategy = normalize_spot(spot)
    volumes = _volumes(volume)
    cap = price_cap("ComputePool", max_hourly_cost)
    if not isinstance(collect_metrics, bool):
        raise ConfigurationError(f"ComputePool(collect_metrics={collect_metrics!r}): must be True or False")
    return PoolSpec(
        provider=provider,
        image=image,
        nodes=scaling.desired,
        scaling=scaling,
        machine=machine,
        accelerator=acc,
        cpu=cpu,
        memory_mb=memory_mb,
        volumes=volumes,
        spot=strategy,
        timeout=float(timeout),
        concurrency=concurrency,
        display=display,
        collect_metrics=collect_metrics,
        partitions=partitions,
        max_hourly_cost=cap,
        name=name,
        keep_alive=keep_alive,
    )


POOL_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?")
"""A pool name: lowercase letters, digits and inner hyphens, 1 to 63 characters. It names a
directory in the skyward home and goes into tags and labels, whose strictest rules (GCP
labels, DNS labels) allow exactly this."""

MIN_KEEP_ALIVE = 10.0
"""The shortest keep-alive: an attached client is heard every second (its answers to the
agent's pings), so a window shorter than a few of those would stop nodes under a client
that is merely busy."""


def check_pool_name(name: object) -> str:
    """``name`` as given, checked (``""`` when None: the pool id stands in for it)."""
    if name is None:
        return ""
    if not isinstance(name, str) or not POOL_NAME.fullmatch(name):
        raise ConfigurationError(
            f"ComputePool(name={name!r}): a pool name is 1 to 63 lowercase letters, digits and hyphens, "
            "starting and ending with a letter or digit (e.g. 'exp1')"
        )
    return name


def check_keep_alive(keep_alive: object, timeout: float) -> float | None:
    """``keep_alive`` in seconds, at least ``MIN_KEEP_ALIVE`` and at most the pool's
    ``timeout`` (the nodes' TTL ends a kept pool too), or None (not kept)."""
    if keep_alive is None:
        return None
    seconds = check_seconds_value("ComputePool", "keep_alive", keep_alive)
    if seconds < MIN_KEEP_ALIVE:
        raise ConfigurationError(
            f"ComputePool(keep_alive={keep_alive!r}): at least {MIN_KEEP_ALIVE:g} seconds (how long the nodes stay "
            "up with no client attached)"
        )
    if seconds > timeout:
        raise ConfigurationError(
            f"ComputePool(keep_alive={keep_alive!r}) outlasts timeout={timeout:g}: a kept pool still stops at its "
            "timeout (its nodes' TTL); raise timeout= as well, or shorten keep_alive"
        )
    return seconds


def price_cap(where: str, value: object) -> float | None:
    """``max_hourly_cost`` checked: a positive number of USD per hour, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise ConfigurationError(
            f"{where}(max_hourly_cost={value!r}): must be a positive number of USD per hour for the whole pool, "
            "or None for no cap"
        )
    return float(value)
