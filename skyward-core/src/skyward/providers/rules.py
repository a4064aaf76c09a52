"""Rules the pool applies to every provider the same way, before anything is made (pure).

Spot: a provider without a spot market (:class:`~skyward.providers.protocol.SpotMarket`)
runs everything on-demand. ``spot="if-available"`` then means on-demand, said in a
Notice; ``"always"`` and a fraction ask for spot nodes that cannot exist and are refused.
Volumes: a provider without :class:`~skyward.providers.protocol.VolumeMounts` mounts none.
"""

from __future__ import annotations

from collections.abc import Sequence

from skyward.errors import ConfigurationError
from skyward.spot import SpotAlways, SpotIfAvailable, SpotNever, SpotPercent, SpotStrategy


def spot_without_market(provider: str, strategy: SpotStrategy | None) -> str | None:
    """For a provider with no spot market: None when ``strategy`` is met as it is, the
    Notice's text when it runs on-demand instead; ConfigurationError when it asks for
    spot nodes."""
    if strategy is None or isinstance(strategy, SpotNever):
        return None
    if isinstance(strategy, SpotIfAvailable):
        return f"spot='if-available': the {provider} provider has no spot market, so this pool runs on-demand"
    if isinstance(strategy, SpotAlways | SpotPercent):
        raise ConfigurationError(
            f"ComputePool(spot={strategy!r}) cannot be met on the {provider} provider: it has no spot market. "
            "Leave spot unset (or spot='never'), or use spot='if-available' to run on-demand"
        )
    raise ConfigurationError(f"ComputePool(spot={strategy!r}) is not a spot strategy")


def unmounted_volumes(provider: str, volumes: Sequence[object], mounts: bool) -> None:
    """ConfigurationError when there are volumes and the provider mounts none."""
    if volumes and not mounts:
        raise ConfigurationError(
            f"ComputePool(volume=...) is not supported by the {provider} provider: it mounts no volumes. "
            "Copy data in from your task, or use a provider that mounts it (AWS with S3Volume)"
        )
