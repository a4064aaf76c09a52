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
from skyward.secrets import EnvValue
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
    """The nodes' environment (``Image()`` when left out)."""
    nodes: NodesChoice
    """How many nodes: an int (a fixed pool, default 1), a ``(desired, max)`` pair or ``sky.Nodes`` (elastic)."""
    machine: str | None
    """An instance type by name, bypassing selection (cloud providers)."""
    accelerator: AcceleratorChoice | None
    """The accelerator each node has: ``"A100"``, ``"H100:8"``, an ``Accelerator`` value, MIG through ``mig=``."""
    cpu: int | None
    """Minimum vCPUs per worker; a node must hold them times its workers."""
    memory: str | int | None
    """Minimum memory per worker (``"32GB"``, ``"40GiB"``, or bytes)."""
    volume: Sequence[object] | None
    """Volumes mounted on every node (``S3Volume``)."""
    spot: SpotChoice | None
    """How much of the pool runs on spot: ``"always"``, ``"if-available"``, ``"never"``, a fraction, or a
    ``Spot`` value; the provider's default when left out."""
    timeout: float
    """Seconds the pool may live; it stops itself after this (default 3600)."""
    env: Mapping[str, EnvValue] | None
    """Environment variables for the workers, merged into the image's."""
    concurrency: int
    """Worker processes per accelerator partition on each node (default 1)."""
    display: str
    """``"log"`` (default), ``"spinner"`` or ``"quiet"``."""
    on_event: EventHandler | None
    """A callback given every event of the pool."""
    collect_metrics: bool
    """Whether nodes report CPU, memory and GPU metrics (default True)."""
    pip: Sequence[str] | None
    """Shorthand: packages added to ``image.pip``."""
    safe_results: bool | None
    """Read results with an allow-list unpickler; ``None``: on where the provider's hosts are third parties."""
    allow_results: Sequence[str | type]
    """In safe mode, more types a result may hold: classes, ``"pkg.module.Type"`` or ``"pkg.module.*"``."""
    selection: str
    """With several candidates: ``"first"`` (default) in the order given, ``"cheapest"`` by live price."""
    max_hourly_cost: float | None
    """USD per hour for the whole pool; a candidate above it is passed over before anything is made."""
    autoscale_cooldown: float
    """Seconds between two changes of an elastic pool's size (default 30)."""
    autoscale_idle_timeout: float
    """Seconds a node must be idle before an elastic pool removes it (default 60)."""
    replace_lost_nodes: bool
    """Whether a node lost for any reason is replaced, its tasks run again (default True)."""
    name: str | None
    """The pool's name for ``skyward ls``, ``skyward logs`` and ``sky.attach`` (its pool id when left out)."""
    keep_alive: float | None
    """Seconds the nodes stay up with no client attached: the pool outlives its client (``sky.attach``)."""
