"""Baked droplet snapshots (``Image(bake=True)``): list, make and delete them.

A baked image on DigitalOcean is a snapshot of a bootstrapped droplet (the droplet
action ``snapshot``, taken live: the node keeps serving), made once the pool's agents
answer. It carries the same labels as AWS's baked AMIs (:class:`skyward.providers.baking.BakeKey`),
as DigitalOcean tags: a tag name allows only letters, digits, ``_``, ``-`` and ``:``
(at most 255 characters), so each label is the tag ``<label>:<value>`` with every other
character of the value written ``_XX`` (its UTF-8 bytes in hex; ``_`` itself is
``_5F``): ``skyward:version:0_2E1_2E0``. A snapshot exists only once its action
completes, so the labels are put on it then; until then they are on the droplet being
copied, which is how another pool sees that this key is being baked.

Snapshots bill $0.06 per GB-month of their (compressed) size until deleted
(https://docs.digitalocean.com/products/images/snapshots/details/pricing/). A droplet
runs one event at a time and a snapshot whose droplet is gone would be lost, so the pool
waits for the snapshot before deleting node 0 (:meth:`DropletSnapshots.wait`).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from skyward.providers import LABEL_BAKED, BakedImage, BakeKey, EventSink, Notice
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError
from skyward_digitalocean.naming import COMMON_TAG

SNAPSHOT_PRICE_GB_MONTH = 0.06
"""USD per GB-month of a droplet snapshot (DigitalOcean's pricing page, 2025)."""
SNAPSHOT_TIMEOUT = 3600.0
"""Seconds the pool waits for a snapshot to complete before it gives up on it (and says
so). DigitalOcean takes minutes for a few GB; an hour covers a GPU image's tens of GB."""
NAME_PREFIX = "skyward-baked-"
_PLAIN = re.compile(r"[A-Za-z0-9-]")
_ENCODED = re.compile(r"(?:[A-Za-z0-9-]|_[0-9A-F]{2})*")


def encode_value(value: str) -> str:
    """``value`` within DigitalOcean's tag alphabet, reversibly (see the module docs)."""
    return "".join(c if _PLAIN.fullmatch(c) else "".join(f"_{b:02X}" for b in c.encode()) for c in value)


def decode_value(text: str) -> str | None:
    """The value :func:`encode_value` wrote; None for text it cannot have written."""
    if not _ENCODED.fullmatch(text):
        return None
    raw = re.sub(r"_([0-9A-F]{2})", lambda m: f"%{m[1]}", text)
    try:
        return unquote_to_bytes(raw).decode()
    except UnicodeDecodeError:
        return None


def label_tags(key: BakeKey) -> list[str]:
    """The tags a baked snapshot of ``key`` carries."""
    return [f"{label}:{encode_value(value)}" for label, value in key.labels().items()]


def labels_of(tags: Iterable[str]) -> dict[str, str]:
    """The labels these tags carry (tags that are no label are left out)."""
    known = tuple(BakeKey("", "", "", "").labels())
    labels: dict[str, str] = {}
    for tag in tags:
        for label in known:
            if tag.startswith(f"{label}:"):
                value = decode_value(tag[len(label) + 1 :])
                if value is not None:
                    labels[label] = value
    return labels


def baked_tag() -> str:
    """The tag every baked snapshot (and every droplet being baked) carries."""
    return f"{LABEL_BAKED}:true"


def as_baked(snapshot: Mapping[str, Any]) -> BakedImage:
    size = snapshot.get("size_gigabytes")
    return BakedImage(
        id=str(snapshot["id"]),
        key=BakeKey.from_labels(labels_of(str(t) for t in snapshot.get("tags") or ())),
        created=str(snapshot.get("created_at", "")),
        ready=True,  # DigitalOcean lists a snapshot once its action has completed
        size_gb=float(size) if isinstance(size, int | float) else None,
        name=str(snapshot.get("name", "")),
    )


def is_skywards(snapshot: Mapping[str, Any]) -> bool:
    """A snapshot bake made: labelled, or named so (its labels not on it yet)."""
    return baked_tag() in (snapshot.get("tags") or ()) or str(snapshot.get("name", "")).startswith(NAME_PREFIX)


class DropletSnapshots:
    """Baked snapshots as a :class:`skyward.providers.baking.BakeStore` for one pool: those of
    ``region`` that fit a disk of ``disk_gb``. ``create_baked`` returns once the action is
    started; a thread waits for it and labels the snapshot (:meth:`wait` joins it)."""

    price_gb_month = SNAPSHOT_PRICE_GB_MONTH

    def __init__(
        self,
        api: DigitalOceanAPI,
        region: str,
        disk_gb: int,
        emit: EventSink,
        *,
        poll_interval: float,
        clock: Callable[[], float],
        sleep: Callable[[float], None],
        timeout: float = SNAPSHOT_TIMEOUT,
    ) -> None:
        self.api = api
        self.region = region
        self.disk_gb = disk_gb
        self.emit = emit
        self.poll_interval = poll_interval
        self.timeout = timeout
        self._clock = clock
        self._sleep = sleep
        self._thread: threading.Thread | None = None
        self.snapshot_id: str | None = None  # what this pool baked, once labelled

    def list_baked(self) -> list[BakedImage]:
        """This region's baked snapshots a droplet of this size can start from, then
        droplets being baked (``ready=False``, their labels on the droplet)."""
        found = [
            as_baked(s)
            for s in self.api.droplet_snapshots()
            if is_skywards(s) and self.region in (s.get("regions") or ()) and _fits(s, self.disk_gb)
        ]
        busy = {str(d["id"]): d for d in self.api.droplets_tagged(baked_tag())}
        for droplet_id, droplet in busy.items():
            key = BakeKey.from_labels(labels_of(str(t) for t in droplet.get("tags") or ()))
            found.append(BakedImage(id=f"droplet-{droplet_id}", key=key, created="", ready=False))
        return found

    def create_baked(self, instance_id: str, key: BakeKey, pool_id: str) -> BakedImage:
        """Start the snapshot action and a thread that labels the snapshot once it
        completes; then label the droplet, so that another pool sees the bake under way
        (a droplet that could not be labelled only lets another pool bake too)."""
        name = f"{NAME_PREFIX}{key.image_hash}-{key.env_key[-8:]}-{pool_id}"
        tags = list(dict.fromkeys([baked_tag(), *label_tags(key)]))
        action = self.api.snapshot_droplet(int(instance_id), name)
        self._thread = threading.Thread(
            target=self._finish, args=(int(action["id"]), instance_id, name, tags), name="skyward-bake", daemon=True
        )
        self._thread.start()
        try:
            for tag in tags:
                self.api.create_tag(tag)
                self.api.tag_resources(tag, "droplet", [instance_id])
        except DigitalOceanAPIError as error:
            self.emit(Notice(message=f"could not label droplet {instance_id} as being baked: {error}"))
        return BakedImage(id=name, key=key, created="", ready=False, name=name)

    def _finish(self, action_id: int, droplet_id: str, name: str, tags: list[str]) -> None:
        try:
            status = self._await(action_id)
            if status != "completed":
                self.emit(Notice(message=f"the snapshot {name} of droplet {droplet_id} did not complete: {status}"))
                return
            snapshot = next(
                (
                    s
                    for s in self.api.droplet_snapshots()
                    if s.get("name") == name and str(s.get("resource_id")) == droplet_id
                ),
                None,
            )
            if snapshot is None:
                self.emit(Notice(message=f"the snapshot {name} completed but DigitalOcean does not list it"))
                return
            snapshot_id = str(snapshot["id"])
            for tag in [COMMON_TAG, *tags]:
                self.api.create_tag(tag)
                self.api.tag_resources(tag, "image", [snapshot_id])
            self.snapshot_id = snapshot_id
            self.emit(Notice(message=f"baked image {snapshot_id} ({name}) is ready"))
        except DigitalOceanAPIError as error:
            self.emit(Notice(message=f"could not finish baking {name}: {error}"))

    def _await(self, action_id: int) -> str:
        deadline = self._clock() + self.timeout
        while True:
            status = str(self.api.action(action_id).get("status"))
            if status != "in-progress":
                return status
            if self._clock() > deadline:
                return f"still in progress after {self.timeout:g} s"
            self._sleep(self.poll_interval)

    def wait(self) -> None:
        """Until the snapshot is taken and labelled (or given up on): the droplet it
        copies cannot be deleted before."""
        if self._thread is not None:
            self._thread.join()

    def delete_baked(self, image_id: str) -> None:
        self.api.delete_snapshot(image_id)


def unused_label_tags(api: DigitalOceanAPI) -> list[str]:
    """Bake label tags that no longer label anything (their snapshots deleted): free on
    DigitalOcean, but clutter; ``skyward down`` removes them after deleting snapshots."""
    unused = []
    for tag in api.tags():
        name = str(tag.get("name", ""))
        if not labels_of([name]):
            continue
        count = (tag.get("resources") or {}).get("count")
        if count == 0:
            unused.append(name)
    return unused


def _fits(snapshot: Mapping[str, Any], disk_gb: int) -> bool:
    minimum = snapshot.get("min_disk_size")
    return not isinstance(minimum, int | float) or minimum <= disk_gb
