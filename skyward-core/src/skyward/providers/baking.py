"""Baked machine images (``Image(bake=True)``): which one a pool may start from (pure).

A provider that can save a node's disk as an image (AWS: an AMI) labels it with a
:class:`BakeKey`: the image's content hash, the environment key (which also covers the
skyward and plugin requirements, and the digest of a local checkout's sources),
skyward's version and the base image it was made from (a new GPU image from the cloud,
or another architecture, needs another bake). A pool starts from a baked image only when all four match its own:
a baked image made for another environment, or by another skyward, is stale and never
used (its agent would not match the client). See docs/coldstart.md.

The flow is the same on every cloud, so it lives here (:class:`Bakery`); a provider
supplies only its :class:`BakeStore`: list, make and delete baked images (AWS: AMIs,
DigitalOcean: droplet snapshots).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from skyward.bootstrap import environment_key
from skyward.events import Notice
from skyward.image import BootstrapContext, Image
from skyward.providers.protocol import EventSink, NodeHandle
from skyward.providers.resources import Resource, parse_time
from skyward.providers.spec import PoolSpec
from skyward.version import __version__

LABEL_BAKED = "skyward:baked"
"""``"true"`` on every baked image: how `skyward ls` finds them."""
LABEL_IMAGE_HASH = "skyward:image-hash"
LABEL_ENV_KEY = "skyward:env-key"
LABEL_VERSION = "skyward:version"
LABEL_BASE = "skyward:base-image"
LABEL_BAKED_FROM = "skyward:baked-from"
"""The label naming the instance whose disk a baked image copies."""

BAKED_POOL = "baked"
"""The pool id `skyward ls` shows baked images under (they belong to no pool and never
expire): ``skyward down baked`` deletes them all, ``--all`` too, ``--expired`` never."""
BAKED_IMAGE = "baked-image"
"""The kind `skyward ls` shows baked images as."""
HOURS_PER_MONTH = 730.0  # how clouds turn a monthly storage price into an hourly one


@dataclass(frozen=True, slots=True)
class BakeKey:
    """What a baked image must carry to be used by a pool."""

    image_hash: str
    """The :class:`~skyward.image.Image`'s content hash."""
    env_key: str
    """The environment key: the image plus the skyward and plugin requirements (and a local
    checkout's source digest), so an edited checkout never starts from yesterday's bake."""
    version: str
    """The skyward version that baked it: another version's agent would not match the client."""
    base: str
    """The base image it was made from: a new base (or another architecture) needs another bake."""

    def labels(self) -> dict[str, str]:
        """The labels a baked image carries for this key (:meth:`from_labels` reads them back)."""
        return {
            LABEL_BAKED: "true",
            LABEL_IMAGE_HASH: self.image_hash,
            LABEL_ENV_KEY: self.env_key,
            LABEL_VERSION: self.version,
            LABEL_BASE: self.base,
        }

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> BakeKey | None:
        """The key a baked image's labels say, or None when they are not a baked image's."""
        if labels.get(LABEL_BAKED) != "true":
            return None
        try:
            return cls(labels[LABEL_IMAGE_HASH], labels[LABEL_ENV_KEY], labels[LABEL_VERSION], labels[LABEL_BASE])
        except KeyError:
            return None


def bake_key(image: Image, context: BootstrapContext, base: str) -> BakeKey:
    """The key of ``image`` as a node with ``context`` would build it on ``base``."""
    return BakeKey(image.content_hash(), environment_key(image, context), __version__, base)


@dataclass(frozen=True, slots=True)
class BakedImage:
    """One baked image a provider lists. ``ready``: usable now (an AMI is ``pending``
    for minutes after CreateImage)."""

    id: str
    """The provider's id of the image (an AMI id, a snapshot id)."""
    key: BakeKey | None
    """The key its labels say; ``None``: labels that are not a complete key (never used)."""
    created: str
    """When it was made, ISO 8601, as the provider reports it; the newest match wins."""
    ready: bool
    """Whether it is usable now; one still being made is not chosen, and not made twice."""
    size_gb: float | None = None
    """Its size in GB, to price its storage; ``None`` where the provider does not say."""
    name: str = ""
    """The provider's name for it, shown by `skyward ls` when it has no complete key."""


def baked_resource(provider: str, region: str, image: BakedImage, price_gb_month: float) -> Resource:
    """How `skyward ls` shows a baked image: under the pool id ``baked``, never expiring,
    priced per hour from its size and the provider's monthly storage price."""
    key = image.key
    size = f", {image.size_gb:g} GB" if image.size_gb is not None else ""
    return Resource(
        provider=provider,
        region=region,
        pool_id=BAKED_POOL,
        kind=BAKED_IMAGE,
        id=image.id,
        state=("available" if image.ready else "pending") + size,
        created=parse_time(image.created),
        expires_at=None,
        hourly_price=image.size_gb * price_gb_month / HOURS_PER_MONTH if image.size_gb else None,
        name=f"Image {key.image_hash}, skyward {key.version}" if key else image.name,
    )


def choose_baked(candidates: Iterable[BakedImage], want: BakeKey) -> BakedImage | None:
    """The newest ready image whose key is exactly ``want``; None when there is none
    (a stale key, a pending image or an unlabelled one is never chosen)."""
    matching = [c for c in candidates if c.ready and c.key == want]
    return max(matching, key=lambda c: c.created, default=None)


def being_baked(candidates: Iterable[BakedImage], want: BakeKey) -> bool:
    """Whether an image for ``want`` is already on its way (another pool baked it): no
    second one is made meanwhile."""
    return any(c.key == want and not c.ready for c in candidates)


class BakeStore(Protocol):
    """A provider's baked images: the primitives :class:`Bakery` drives."""

    @property
    def price_gb_month(self) -> float:
        """USD per GB-month a baked image bills while it exists (for the Notice)."""
        ...

    def list_baked(self) -> list[BakedImage]:
        """Baked images this pool could start from (its region), those still being made
        among them (``ready=False``)."""
        ...

    def create_baked(self, instance_id: str, key: BakeKey, pool_id: str) -> BakedImage:
        """Start saving ``instance_id``'s disk as an image labelled with ``key``; returns
        at once (the image is not ready yet)."""
        ...

    def delete_baked(self, image_id: str) -> None:
        """Delete a baked image and what bills with it."""
        ...


class Bakery:
    """One pool's baking, the same on every provider: :meth:`choose` at prepare (the
    baked image to launch from, if one matches), :meth:`bake` once the agents answer
    (node 0's disk, when nothing matched and no other pool is baking it). It makes at
    most one image per pool and never fails the pool: a failure is a Notice."""

    def __init__(self) -> None:
        self.key: BakeKey | None = None
        """Set by :meth:`choose`: the key this pool's image bakes under."""
        self.chosen: BakedImage | None = None
        """The baked image this pool starts from; ``None``: it installs as usual."""
        self.pending = False
        """Another pool's bake of this key is under way, so this pool bakes nothing."""
        self.made: BakedImage | None = None
        """What this pool baked (at most one image)."""

    @property
    def starts_baked(self) -> bool:
        """For ``BootstrapContext(baked=...)``: the nodes start from a baked image."""
        return self.chosen is not None

    def choose(
        self, store: BakeStore, image: Image, context: BootstrapContext, base: str, emit: EventSink
    ) -> BakedImage | None:
        """The newest ready baked image of ``image`` built with ``context`` on ``base``
        (``choose_baked``: a stale one is never used), said in a Notice; None when there is
        none, and the pool starts from ``base`` as usual."""
        self.key = bake_key(image, context, base)
        listed = store.list_baked()
        self.chosen = choose_baked(listed, self.key)
        self.pending = self.chosen is None and being_baked(listed, self.key)
        if self.chosen is not None:
            emit(Notice(message=f"starting from baked image {self.chosen.id}: apt, uv and the environment are skipped"))
        elif self.pending:
            emit(Notice(message="another pool is baking this Image; this pool installs it as usual and bakes nothing"))
        return self.chosen

    def bake(self, store: BakeStore, spec: PoolSpec, handle: NodeHandle, emit: EventSink) -> BakedImage | None:
        """The Bakes ability: save ``handle``'s disk when :meth:`choose` found nothing and
        no bake of this key is under way; None when nothing was made."""
        if self.key is None or self.chosen is not None or self.pending or self.made is not None:
            return None
        try:
            made = store.create_baked(handle.instance_id, self.key, spec.pool_id)
        except Exception as error:  # the pool is up and working: baking is a bonus
            emit(Notice(message=f"could not bake an image from {handle.instance_id}: {error}"))
            return None
        self.made = made
        emit(
            Notice(
                message=f"baking image {made.id} from {handle.instance_id}: the next pool with this Image starts "
                f"from it. It bills for its storage (about ${store.price_gb_month:.2f} per GB-month) until "
                "`skyward down baked` deletes it"
            )
        )
        return made


@runtime_checkable
class Bakes(Protocol):
    """A provider that can bake images: it finds a matching one in ``prepare`` (and
    launches from it with ``BootstrapContext(baked=True)``), and once the pool's agents
    answer, :meth:`bake` saves node 0's disk when there was none."""

    def bake(self, spec: PoolSpec, handle: NodeHandle, emit: EventSink) -> BakedImage | None:
        """Save ``handle``'s disk as a baked image when the pool asked for one and none
        matched; None when nothing was made. Never fails the pool: a failure is a Notice."""
        ...
