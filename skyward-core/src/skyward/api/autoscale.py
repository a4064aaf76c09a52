"""How many nodes an elastic pool should have: a pure decision, and its settings.

``desired_nodes`` reads what the pool's client reports (tasks queued and running, slots
per node, how long each idle node has been idle) and the pool's bounds, and returns the
node count to work towards. It touches nothing: the fleet's scaler thread
(``skyward.api.scaler``) asks it once per tick and acts on the answer, and the rules
below are checked with hypothesis for any input (tests/unit/test_autoscale.py):

* never outside ``[Nodes.floor, Nodes.ceiling]``;
* never below what the queued and running work needs while tasks wait (no shrink under
  pressure);
* no change within ``cooldown`` seconds of the last one (a burst that ends does not
  make the pool flap between two sizes);
* a scale-up is sized to the queue in one step (every waiting task gets a slot, up to
  the ceiling), not one node per cooldown: a node takes tens of seconds to boot, so
  growing one at a time would make a burst of 200 tasks wait for many cooldowns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from skyward.errors import ConfigurationError
from skyward.scaling import Nodes

__all__ = ["AutoscaleSettings", "Demand", "desired_nodes"]

MAX_AUTOSCALE_SECONDS = 7 * 24 * 3600.0
"""The longest cooldown or idle timeout: a week. Past a pool's longest useful life a
value is a mistake (a unit mix-up), refused rather than silently never acting."""


def _seconds(name: str, value: object) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 <= value <= MAX_AUTOSCALE_SECONDS
    ):
        raise ConfigurationError(
            f"ComputePool({name}={value!r}): must be a number of seconds >= 0 and at most "
            f"{MAX_AUTOSCALE_SECONDS:.0f} (a week)"
        )
    return float(value)


@dataclass(frozen=True, slots=True)
class AutoscaleSettings:
    """``ComputePool(autoscale_cooldown=, autoscale_idle_timeout=, replace_lost_nodes=)``,
    validated. ``cooldown``: seconds between two changes of the desired count;
    ``idle_timeout``: seconds a node must have been idle before a scale-down removes it;
    ``replace_lost``: a lost node is replaced (elastic and fixed pools alike).

    The defaults (30 s, 60 s) follow what a cloud node costs to come back: it boots in
    30 to 90 s on the providers Skyward ships, so removing a node idle for less than a
    minute would often pay a boot to get it back for the next cell of a notebook."""

    cooldown: float = 30.0
    idle_timeout: float = 60.0
    replace_lost: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "cooldown", _seconds("autoscale_cooldown", self.cooldown))
        object.__setattr__(self, "idle_timeout", _seconds("autoscale_idle_timeout", self.idle_timeout))
        if not isinstance(self.replace_lost, bool):
            raise ConfigurationError(
                f"ComputePool(replace_lost_nodes={self.replace_lost!r}): must be True (a lost node is replaced) "
                "or False (its tasks fail with NodeLostError)"
            )


@dataclass(frozen=True, slots=True)
class Demand:
    """What the pool's client reports at one instant (``PoolClient.load()``, reduced):
    ``queued`` tasks on no worker, ``running`` tasks on one, ``slots_per_node`` workers a
    node brings, and ``idle`` how many seconds each idle live node has been idle (busy
    nodes are not listed)."""

    queued: int
    running: int
    slots_per_node: int
    idle: Sequence[float] = ()

    @property
    def needed(self) -> int:
        """Nodes that give every queued and running task a slot."""
        return -(-(self.queued + self.running) // max(self.slots_per_node, 1))


def desired_nodes(
    demand: Demand,
    *,
    desired: int,
    bounds: Nodes,
    settings: AutoscaleSettings,
    since_change: float,
) -> int:
    """The node count to work towards, given ``demand``, the current ``desired`` count,
    the pool's ``bounds`` and ``since_change`` seconds since the desired count last
    changed (by this policy or ``pool.resize``)."""
    current = min(max(desired, bounds.floor), bounds.ceiling)
    if since_change < settings.cooldown:
        return current
    if demand.queued > 0:
        return max(current, min(demand.needed, bounds.ceiling))
    idle_long = sum(1 for seconds in demand.idle if seconds >= settings.idle_timeout)
    if idle_long == 0:
        return current
    busy_floor = -(-demand.running // max(demand.slots_per_node, 1))
    return min(current, max(bounds.floor, busy_floor, current - idle_long))  # a shrink never grows
