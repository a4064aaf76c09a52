"""The types of ``ComputePool``'s parameters, and ``PoolOptions``: its keyword
parameters as one ``TypedDict``, for pools built on it (``JoblibPool``,
``ScikitLearnPool``) to take without writing them out again. ``provider``'s type,
``ProviderChoice``, is in ``skyward.api.failover`` beside ``Spec``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias, TypedDict

from skyward.accelerators.spec import Accelerator
from skyward.events import SkywardEvent
from skyward.image import Image
from skyward.scaling import Nodes
from skyward.spot import SpotAlways, SpotIfAvailable, SpotLike

AcceleratorChoice: TypeAlias = Accelerator | str
"""What ``accelerator=`` takes: an ``Accelerator`` or its shorthand (``"A100"``,
``"H100:8"``, ``"A100-40GB:1:3g.20gb"``)."""

SpotChoice: TypeAlias = SpotLike | str | type[SpotAlways] | type[SpotIfAvailable]
"""What ``spot=`` takes: a strategy (``Spot.Always(...)``, ``Spot.Never``...), its name
(``"always"``, ``"if-available"``, ``"never"``), a share of spot nodes in (0, 1], or
the class ``Spot.Always`` / ``Spot.IfAvailable`` for its defaults."""

NodesChoice: TypeAlias = int | tuple[int, int] | Nodes
"""What ``nodes=`` takes: a count (a fixed pool), ``(desired, max)`` (an elastic pool
that starts with ``desired`` and grows up to ``max``) or ``sky.Nodes(desired, max=,
min=)``."""

EventHandler: TypeAlias = Callable[[SkywardEvent], object]
"""A callable taking an event. What it returns counts only when it is another event (a
derived event, see ``skyward.callbacks``)."""


class PoolOptions(TypedDict, total=False):
    """``ComputePool``'s keyword parameters (all but ``provider``), each with its
    ``ComputePool`` default when left out. A pool class built on ComputePool takes them
    as ``**options: Unpack[PoolOptions]`` and passes them on.

    Why a ``TypedDict`` and not an options object: callers keep writing
    ``JoblibPool(nodes=4, accelerator="A100")``, the keyword style every example uses,
    and a type checker still checks each keyword's name and type (PEP 692); an options
    object would make them write ``JoblibPool(options=PoolOptions(nodes=4))`` and keep a
    second set of defaults in step with ComputePool's. ``ComputePool`` itself keeps its
    explicit signature, which the API reference renders with every default; a unit test
    (tests/unit/test_pool_options.py) checks that the two name the same parameters with
    the same types.
    """

    image: Image | None
    nodes: NodesChoice
    machine: str | None
    accelerator: AcceleratorChoice | None
    cpu: int | None
    memory: str | int | None
    volume: Sequence[object] | None
    spot: SpotChoice | None
    timeout: float
    env: Mapping[str, str] | None
    concurrency: int
    display: str
    on_event: EventHandler | None
    collect_metrics: bool
    pip: Sequence[str] | None
    safe_results: bool | None
    allow_results: Sequence[str | type]
    selection: str
    max_hourly_cost: float | None
    autoscale_cooldown: float
    autoscale_idle_timeout: float
    replace_lost_nodes: bool
