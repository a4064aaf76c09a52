"""Baked machine images (``Image(bake=True)``): which one a pool may start from (pure).

A provider that can save a node's disk as an image (AWS: an AMI) labels it with a
:class:`BakeKey`: the image's content hash, the environment key (which also covers the
skyward and plugin requirements, and the digest of a local checkout's sources),
skyward's version and the base image it was made from (a new GPU image from the cloud,
or another architecture, needs another bake). A pool starts from a baked image only when all three match its own:
a baked image made for another environment, or by another skyward, is stale and never
used (its agent would not match the client). See docs/coldstart.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from skyward.image import BootstrapContext, Image

if TYPE_CHECKING:
    from skyward.api.spec import PoolSpec
    from skyward.providers.protocol import EventSink, NodeHandle

LABEL_BAKED = "skyward:baked"  # "true" on every baked image: how `skyward ls` finds them
LABEL_IMAGE_HASH = "skyward:image-hash"
LABEL_ENV_KEY = "skyward:env-key"
LABEL_VERSION = "skyward:version"
LABEL_BASE = "skyward:base-image"
LABEL_BAKED_FROM = "skyward:baked-from"  # the instance whose disk it copies

BAKED_POOL = "baked"
"""The pool id `skyward ls` shows baked images under (they belong to no pool and never
expire): ``skyward down baked`` deletes them all, ``--all`` too, ``--expired`` never."""
BAKED_IMAGE = "baked-image"  # their kind in `skyward ls`
HOURS_PER_MONTH = 730.0  # how clouds turn a monthly storage price into an hourly one


@dataclass(frozen=True, slots=True)
class BakeKey:
    """What a baked image must carry to be used by a pool."""

    image_hash: str
    env_key: str
    version: str
    base: str

    def labels(self) -> dict[str, str]:
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
    import skyward
    from skyward.bootstrap import environment_key

    return BakeKey(image.content_hash(), environment_key(image, context), skyward.__version__, base)


@dataclass(frozen=True, slots=True)
class BakedImage:
    """One baked image a provider lists. ``ready``: usable now (an AMI is ``pending``
    for minutes after CreateImage)."""

    id: str
    key: BakeKey | None  # None: labels that are not a complete key (never used)
    created: str  # ISO 8601, as the provider reports it
    ready: bool
    size_gb: float | None = None
    name: str = ""


def choose_baked(candidates: Iterable[BakedImage], want: BakeKey) -> BakedImage | None:
    """The newest ready image whose key is exactly ``want``; None when there is none
    (a stale key, a pending image or an unlabelled one is never chosen)."""
    matching = [c for c in candidates if c.ready and c.key == want]
    return max(matching, key=lambda c: c.created, default=None)


def being_baked(candidates: Iterable[BakedImage], want: BakeKey) -> bool:
    """Whether an image for ``want`` is already on its way (another pool baked it): no
    second one is made meanwhile."""
    return any(c.key == want and not c.ready for c in candidates)


@runtime_checkable
class Bakes(Protocol):
    """A provider that can bake images: it finds a matching one in ``prepare`` (and
    launches from it with ``BootstrapContext(baked=True)``), and once the pool's agents
    answer, :meth:`bake` saves node 0's disk when there was none."""

    def bake(self, spec: PoolSpec, handle: NodeHandle, emit: EventSink) -> BakedImage | None:
        """Save ``handle``'s disk as a baked image when the pool asked for one and none
        matched; None when nothing was made. Never fails the pool: a failure is a Notice."""
        ...
