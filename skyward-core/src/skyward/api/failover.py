"""Candidates of a pool and the decisions of its failover (pure functions).

A pool may name several candidates, in order: provider configurations, or :class:`Spec`
values where a candidate needs its own accelerator, spot strategy, machine or price cap.
``selection="first"`` tries them in the order given; ``"cheapest"`` in the order of the
whole pool's live price (:func:`cheapest_first`). Every node comes from one candidate.

The pool moves on only when a candidate failed for a reason another candidate can fix
(:func:`moves_on`: an ``UnavailableError``: capacity, quota, no offer, price cap, launch
timeout); anything else (bad configuration, bad credentials, a bootstrap that fails)
stops it at once, since the next candidate would fail the same way and bill meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeAlias, cast, runtime_checkable

from skyward.api.options import AcceleratorChoice, SpotChoice
from skyward.api.spec import price_cap
from skyward.errors import ConfigurationError, NoCandidateError, NoOfferError, UnavailableError
from skyward.instances import NoMatchingInstanceError
from skyward.plugins.registry import registry
from skyward.providers.settings import ProviderSettings

Selection: TypeAlias = Literal["first", "cheapest"]
SELECTIONS: tuple[Selection, ...] = ("first", "cheapest")


@dataclass(frozen=True, slots=True)
class Spec:
    """One candidate of a pool: a provider configuration and what differs for it.

    ``accelerator``, ``spot``, ``machine`` and ``max_hourly_cost`` left ``None`` take the
    pool's own (``ComputePool(accelerator=..., spot=..., ...)``). ``max_hourly_cost`` is
    USD per hour for the whole pool (every node), on the market the spot strategy gets.
    """

    provider: ProviderSettings
    """The provider configuration this candidate uses (``sky.AWS(region=...)``)."""
    accelerator: AcceleratorChoice | None = None
    """This candidate's accelerator, or ``None``: the pool's."""
    spot: SpotChoice | None = None
    """This candidate's spot strategy, or ``None``: the pool's."""
    machine: str | None = None
    """This candidate's instance type by name, or ``None``: the pool's."""
    max_hourly_cost: float | None = None
    """This candidate's price cap in USD per hour for the whole pool, or ``None``: the pool's."""

    def __post_init__(self) -> None:
        """Refused when made, not when a pool starts: a candidate names one known provider."""
        if isinstance(self.provider, Spec | list | tuple) or self.provider is None:
            raise ConfigurationError(
                f"sky.Spec(provider={self.provider!r}): must be one provider configuration, such as sky.AWS()"
            )
        try:
            registry.provider_for(self.provider)
        except ConfigurationError as exc:
            raise ConfigurationError(f"sky.Spec(provider={self.provider!r}): {exc}") from None
        price_cap("sky.Spec", self.max_hourly_cost)


ProviderChoice: TypeAlias = ProviderSettings | Spec | Sequence[ProviderSettings | Spec]
"""What ``ComputePool(provider=...)`` takes: a provider configuration (every one derives
from ``ProviderSettings``: ``sky.AWS()``, ``sky.Local()``...), a ``Spec`` (a candidate
with its own accelerator, spot strategy, machine or price cap), or a non-empty list of
them, the candidates in order."""


@runtime_checkable
class Regional(Protocol):
    """A provider configuration with a region (``None``: the provider may choose)."""

    @property
    def region(self) -> str | None: ...


def candidates_from(
    provider: ProviderChoice,
    *,
    accelerator: AcceleratorChoice | None,
    spot: SpotChoice | None,
    machine: str | None,
    max_hourly_cost: float | None,
) -> tuple[Spec, ...]:
    """The pool's candidates, in order, each with the pool's values where it leaves one
    unset. ``provider`` is a configuration, a :class:`Spec`, or a non-empty list of them."""
    items: Sequence[object]
    if isinstance(provider, list | tuple):
        if not provider:
            raise ConfigurationError(
                "ComputePool(provider=[]): give at least one provider configuration or sky.Spec(provider=...)"
            )
        items = provider
    else:
        items = [provider]
    out = []
    for item in items:
        # a value of the wrong type reaches Spec too: its check names what is allowed
        spec = item if isinstance(item, Spec) else Spec(provider=cast(ProviderSettings, item))
        out.append(
            Spec(
                provider=spec.provider,
                accelerator=accelerator if spec.accelerator is None else spec.accelerator,
                spot=spot if spec.spot is None else spec.spot,
                machine=machine if spec.machine is None else spec.machine,
                max_hourly_cost=max_hourly_cost if spec.max_hourly_cost is None else spec.max_hourly_cost,
            )
        )
    return tuple(out)


def selection_of(value: object) -> Selection:
    for known in SELECTIONS:
        if value == known:
            return known
    raise ConfigurationError(f"ComputePool(selection={value!r}): must be one of {', '.join(map(repr, SELECTIONS))}")


def cheapest_first(prices: Sequence[float | None]) -> list[int]:
    """Candidate indexes by the whole pool's hourly price, cheapest first; a candidate
    whose price is unknown (no offers listed) after every priced one; ties keep the order
    given."""
    return sorted(range(len(prices)), key=lambda i: (prices[i] is None, prices[i] or 0.0, i))


def order(selection: Selection, prices: Sequence[float | None]) -> list[int]:
    """The order in which candidates are tried."""
    return cheapest_first(prices) if selection == "cheapest" else list(range(len(prices)))


def ranking(labels: Sequence[str], prices: Sequence[float | None]) -> str:
    """The order ``"cheapest"`` chose, in words: ``#2 verda $4.38/h, #1 aws ?``."""
    return ", ".join(f"{name} {'?' if p is None else f'${p:.4g}/h'}" for name, p in zip(labels, prices, strict=True))


def moves_on(error: BaseException) -> UnavailableError | None:
    """The error as a reason to try the next candidate, or None: stop at once. A provider
    that sells no machine fitting the request (``NoMatchingInstanceError`` from instance
    selection) has no offer: another provider may sell one."""
    if isinstance(error, UnavailableError):
        return error
    if isinstance(error, NoMatchingInstanceError):
        return NoOfferError(str(error))
    return None


def label(index: int, provider_name: str, config: object) -> str:
    """How messages name a candidate: ``#2 aws (us-west-2)``."""
    region = config.region if isinstance(config, Regional) else None
    return f"#{index + 1} {provider_name}" + (f" ({region})" if region else "")


def all_failed(failures: Sequence[tuple[str, UnavailableError]]) -> NoCandidateError:
    """The one error of a pool whose every candidate failed: each one and why."""
    lines = "; ".join(f"{name}: {error.reason}: {error}" for name, error in failures)
    return NoCandidateError(
        f"no candidate could provide the pool ({len(failures)} tried; each one's resources were removed): {lines}",
        tuple(failures),
    )
