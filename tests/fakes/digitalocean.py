"""A stateful fake of the DigitalOcean API v2 (the parts skyward-digitalocean uses).

Shapes follow DigitalOcean's published API reference (as pydo's generated operations
document it): droplets, sizes, tags, firewalls, account SSH keys, with DO's error body
``{"id": ..., "message": ...}``, pagination under ``links.pages.next`` and the status
codes pydo expects. It checks the bearer token on every call and the body of every
create against the published constraints, and keeps state: a droplet is ``new``, then
``active`` after ``boot_delay`` seconds with loopback addresses, ``off`` when its machine
powers off (still billed, as on DigitalOcean), and ``deleted`` once deleted.

Snapshots (``Image(bake=True)``): ``POST /v2/droplets/{id}/actions`` with
``{"type": "snapshot", "name": ...}`` answers an action that is ``in-progress``, then
``completed`` after ``snapshot_delay`` seconds, when the snapshot appears in
``GET /v2/snapshots`` and ``GET /v2/images?private=true`` (with ``size_gigabytes``,
``min_disk_size``, ``created_at``, ``regions``); tags label images through
``POST /v2/tags/{tag}/resources``; a droplet created with ``image=<snapshot id>`` starts
from the snapshot (the hook ``on_snapshot(droplet id, snapshot id)`` lets the harness
copy the droplet's disk when the snapshot is taken). Deleting a droplet while its
snapshot is in progress is refused the way DigitalOcean refuses a second event on a
droplet (422 ``Droplet already has a pending event.``) and recorded as a violation: the
conservative reading, since a snapshot whose droplet is gone would be lost.

Test controls: ``fail``/``slow`` (from FakeHTTPServer), ``rate_limit``, ``capacity``
(per size and region), ``droplet_limit``, ``snapshot_delay``, ``snapshot_gigabytes``,
and hooks ``on_running(id, user_data, ip)`` / ``on_deleted(id)`` / ``on_snapshot`` that an
emulated-instance harness attaches to.

The rules it enforces, each with its source ("spec" is DigitalOcean's OpenAPI
specification, github.com/digitalocean/openapi, vendored in tests/fakes/specs; every
request body is validated against its schema there, see :mod:`fakes.do_spec`):

* firewall rules: ``protocol`` and ``ports`` required for every protocol, ICMP included
  (spec resources/firewalls/models/firewall_rule.yml ``firewall_rule_base.required``);
  ``ports`` a port, a range or "0"; a name of letters, digits, ``.`` and ``-`` starting with a letter or digit.
* ``GET /v2/droplets``: ``type`` is ``droplets`` or ``gpus``; without ``type=gpus`` only
  non-GPU droplets are listed; ``tag_name`` cannot be combined with ``name`` or ``type``
  (spec resources/droplets/droplets_list.yml and parameters.yml). Whether a
  ``tag_name`` listing includes GPU droplets is not documented; the fake takes the
  reading that can hide them (it leaves them out), so a client must list GPU droplets too.
* tags: letters, digits, ``_``, ``-`` and ``:``, at most 255 characters (spec tags/models/tags.yml); a
  refused name answers 400 in the ``error_with_root_causes`` shape (spec
  tags/responses/tags_bad_request.yml). Creating a tag that exists is not documented
  (spec tags_create.yml lists 201 and 400); the fake answers 422, as the DigitalOcean
  Ansible collection expects, so a client must not depend on a 201 then.
* droplet create: the body matches ``droplet_single_create`` (spec); ``user_data`` at
  most 64 KiB (DO's Droplet limits page); a size offered in the region and an image for
  its accelerator vendor; a capacity refusal is 422 with DO's plain error body
  ``{id, message, request_id}`` (spec shared/models/error.yml), no list of regions.
* ``GET /v2/account``: ``droplet_limit`` (spec account/models/account.yml), enforced.
* pagination: ``per_page`` 1-200, ``links.pages.next`` (spec shared/parameters.yml).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import unquote

from fakes.do_catalog import IMAGES, REGIONS, SIZES, FakeAction, FakeDroplet, FakeSnapshot
from fakes.do_catalog import do_error as _error
from fakes.do_handlers import TAG_PATTERN, NetworkHandlers, SnapshotHandlers
from fakes.do_spec import problems
from fakes.http import FakeCloud, LoopbackAddresses, Request, Response

TOKEN = "dop_v1_fake_0123456789abcdef"
USER_DATA_LIMIT = 64 * 1024
_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9\-.]{0,253}[A-Za-z0-9])?$")
_DROPLET_KEYS = {
    "name", "names", "region", "size", "image", "ssh_keys", "backups", "backup_policy", "ipv6", "monitoring",
    "tags", "user_data", "private_networking", "volumes", "vpc_uuid", "with_droplet_agent",
}  # fmt: skip


class FakeDigitalOcean(NetworkHandlers, SnapshotHandlers, FakeCloud):
    def __init__(
        self,
        *,
        token: str = TOKEN,
        sizes: Sequence[Mapping[str, Any]] = SIZES,
        boot_delay: float = 0.05,
        seed: int | None = None,
    ) -> None:
        super().__init__()
        self.token = token
        self.sizes = [dict(s) for s in sizes]
        self.boot_delay = boot_delay
        self.addresses = LoopbackAddresses(seed)
        self.droplets: dict[int, FakeDroplet] = {}
        self.tags: set[str] = set()
        self.firewalls: dict[str, dict[str, Any]] = {}
        self.ssh_keys: dict[int, dict[str, Any]] = {}
        self.capacity: dict[tuple[str, str], int] = {}  # (size, region) -> droplets it can still take
        self.droplet_limit = 25  # GET /v2/account's droplet_limit, enforced on create
        self.snapshots: dict[int, FakeSnapshot] = {}
        self.actions: dict[int, FakeAction] = {}
        self.snapshot_delay = 0.2  # seconds a snapshot action stays in-progress
        self.snapshot_gigabytes = 2.36  # the billable size of each snapshot made
        self.on_snapshot: Callable[[str, str], None] | None = None  # (droplet id, snapshot id), before it completes
        self._ids = itertools.count(3164444)
        self._key_ids = itertools.count(512189)
        self._action_ids = itertools.count(36804636)
        self._image_ids = itertools.count(7555620)

    # -- test controls ------------------------------------------------------------------

    def rate_limit(
        self, method: str | None, path: str | None, *, times: int | None = 1, retry_after: float | None = None
    ) -> None:
        """429 as DigitalOcean sends it: rate-limit headers, optionally Retry-After."""
        headers = {"ratelimit-limit": "5000", "ratelimit-remaining": "0", "ratelimit-reset": str(int(time.time()) + 1)}
        if retry_after is not None:
            headers["Retry-After"] = f"{retry_after:g}"
        else:
            headers.pop("ratelimit-reset")  # else the client would wait for the reset second
        self.fail(
            method, path, 429, {"id": "too_many_requests", "message": "API rate limit exceeded."},
            times=times, headers=headers,
        )  # fmt: skip

    def power_off(self, droplet_id: int | str) -> None:
        """The droplet's machine shut itself down: DO keeps (and bills) it, status ``off``."""
        with self.lock:
            droplet = self.droplets.get(int(droplet_id))
            if droplet is not None and droplet.status == "active":
                droplet.status = "off"
                droplet.history.append("off")

    def add_droplet(self, *, name: str, tags: list[str], status: str = "active", size: str = "s-1vcpu-1gb") -> int:
        """A droplet made outside this test (an earlier pool's leftover, or not skyward's)."""
        with self.lock:
            droplet_id = next(self._ids)
            public, private = self.addresses.allocate()
            spec = next(s for s in self.sizes if s["slug"] == size)
            self.droplets[droplet_id] = FakeDroplet(
                droplet_id, name, "nyc1", spec, "ubuntu-24-04-x64", list(tags), "", [], time.time(), status,
                public, private, history=[status],
            )  # fmt: skip
            self.tags.update(tags)
            return droplet_id

    def live(self) -> dict[str, list[str]]:
        """What still exists (and, for droplets, still bills)."""
        with self.lock:
            return {
                "droplets": [f"{d.name} ({d.id}, {d.status})" for d in self.droplets.values() if d.status != "deleted"],
                "firewalls": [f["name"] for f in self.firewalls.values()],
                "ssh_keys": [k["name"] for k in self.ssh_keys.values()],
                "tags": sorted(self.tags),
                "snapshots": [f"{s.name} ({s.id})" for s in self.snapshots.values()],
            }

    def account(self) -> dict[str, Any]:
        """As ``GET /v2/account`` answers (spec account/models/account.yml)."""
        return {
            "droplet_limit": self.droplet_limit, "floating_ip_limit": 3, "volume_limit": 100,
            "email": "skyward@example.com", "name": "Skyward Tests", "uuid": "b6fr89dbf6d9156cace5f3c78dc9851d957381ef",
            "email_verified": True, "status": "active", "status_message": "",
            "team": {"uuid": "5df3e3004a17e242b7c20ca6c9fc25b701a47ece", "name": "My Team"},
        }  # fmt: skip

    def _invalid(self, schema: str, body: Any) -> Response | None:
        """A 422 when ``body`` breaks the published schema (and a violation recorded)."""
        found = problems(schema, body)
        if not found:
            return None
        return self._reject(f"{schema}: {'; '.join(found)}")

    # -- routing --------------------------------------------------------------------------

    def route(self, request: Request) -> Response:
        if request.path == "/whoami":
            return Response(200, f"{request.client}\n")
        if not request.path.startswith("/v2/"):
            return _error(404, "not_found", "The resource you were accessing could not be found.")
        if request.headers.get("authorization") != f"Bearer {self.token}":
            self.violation(f"{request.method} {request.path} without the right bearer token")
            return _error(401, "unauthorized", "Unable to authenticate you.")  # spec shared/responses/unauthorized.yml
        if request.method in ("POST", "PUT", "PATCH") and request.body:
            if "application/json" not in request.headers.get("content-type", ""):
                self.violation(f"{request.method} {request.path} body is not declared as JSON")
                return _error(400, "bad_request", "Content-Type must be application/json")
            try:
                request.json()
            except ValueError:
                self.violation(f"{request.method} {request.path} body is not JSON")
                return _error(400, "bad_request", "malformed JSON")
        parts = [unquote(p) for p in request.path.rstrip("/").split("/")[2:]]
        with self.lock:
            return self._route(request, parts)

    def _route(self, request: Request, parts: list[str]) -> Response:
        method = request.method
        match parts:
            case ["sizes"] if method == "GET":
                return self._page(request, "sizes", self.sizes)
            case ["account"] if method == "GET":
                return Response(200, {"account": self.account()})
            case ["regions"] if method == "GET":
                regions = [{"slug": s, "name": n, "available": True} for s, n in REGIONS.items()]
                return self._page(request, "regions", regions)
            case ["tags"] if method == "GET":
                return self._page(request, "tags", [self._tag_json(t) for t in sorted(self.tags)])
            case ["tags"] if method == "POST":
                return self._create_tag(request)
            case ["tags", name] if method == "DELETE":
                if name not in self.tags:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                self.tags.discard(name)
                for labelled in [*self.droplets.values(), *self.snapshots.values()]:
                    if name in labelled.tags:
                        labelled.tags.remove(name)
                return Response(204)
            case ["tags", name] if method == "GET":
                if name not in self.tags:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                return Response(200, {"tag": self._tag_json(name)})
            case ["tags", name, "resources"] if method == "POST":
                return self._tag_resources(request, name)
            case ["droplets", droplet_id, "actions"] if method == "POST":
                return self._droplet_action(request, droplet_id)
            case ["actions", action_id] if method == "GET":
                action = self.actions.get(int(action_id)) if action_id.isdigit() else None
                if action is None:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                return Response(200, {"action": action.to_json()})
            case ["snapshots"] if method == "GET":
                kind = request.arg("resource_type")
                if kind not in (None, "droplet", "volume"):
                    return self._reject(f"resource_type {kind!r}: droplet or volume")
                snapshots = [] if kind == "volume" else [x.as_snapshot() for x in self.snapshots.values()]
                return self._page(request, "snapshots", snapshots)
            case ["snapshots", snapshot_id] if method == "GET":
                snapshot = self._snapshot(snapshot_id)
                if snapshot is None:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                return Response(200, {"snapshot": snapshot.as_snapshot()})
            case ["snapshots", snapshot_id] if method == "DELETE":
                snapshot = self._snapshot(snapshot_id)
                if snapshot is None:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                del self.snapshots[snapshot.id]
                return Response(204)
            case ["images"] if method == "GET":
                return self._list_images(request)
            case ["firewalls"] if method == "POST":
                return self._create_firewall(request)
            case ["firewalls"] if method == "GET":
                return self._page(request, "firewalls", list(self.firewalls.values()))
            case ["firewalls", firewall_id] if method == "DELETE":
                if self.firewalls.pop(firewall_id, None) is None:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                return Response(204)
            case ["account", "keys"] if method == "POST":
                return self._create_key(request)
            case ["account", "keys"] if method == "GET":
                return self._page(request, "ssh_keys", list(self.ssh_keys.values()))
            case ["account", "keys", ident] if method == "DELETE":
                for key_id, key in list(self.ssh_keys.items()):
                    if str(key_id) == ident or key["fingerprint"] == ident:
                        del self.ssh_keys[key_id]
                        return Response(204)
                return _error(404, "not_found", "The resource you were accessing could not be found.")
            case ["droplets"] if method == "POST":
                return self._create_droplet(request)
            case ["droplets"] if method == "GET":
                return self._list_droplets(request)
            case ["droplets"] if method == "DELETE":
                tag = request.arg("tag_name")
                if not tag:
                    self.violation("DELETE /v2/droplets without tag_name")
                    return _error(422, "unprocessable_entity", "tag_name is required")
                for droplet in list(self.droplets.values()):
                    if tag in droplet.tags and droplet.status != "deleted":
                        self._delete(droplet)
                return Response(204)
            case ["droplets", droplet_id] if method == "GET":
                droplet = self._find(droplet_id)
                if droplet is None:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                return Response(200, {"droplet": droplet.to_json()})
            case ["droplets", droplet_id] if method == "DELETE":
                droplet = self._find(droplet_id)
                if droplet is None:
                    return _error(404, "not_found", "The resource you were accessing could not be found.")
                if self._busy(droplet.id):
                    self.violation(f"deleting droplet {droplet.id} while its snapshot is in progress")
                    return _error(422, "unprocessable_entity", "Droplet already has a pending event.")
                self._delete(droplet)
                return Response(204)
        self.violation(f"{method} {request.path}: not an endpoint this fake (or DigitalOcean) has")
        return _error(404, "not_found", "The resource you were accessing could not be found.")

    # -- helpers --------------------------------------------------------------------------

    def _page(self, request: Request, key: str, items: list[dict[str, Any]]) -> Response:
        try:
            per_page = int(request.arg("per_page") or 20)
            page = int(request.arg("page") or 1)
        except ValueError:
            return _error(400, "bad_request", "page and per_page must be integers")
        if not 1 <= per_page <= 200 or page < 1:
            self.violation(f"GET {request.path} with per_page={per_page} page={page}")
            return _error(400, "bad_request", "per_page must be between 1 and 200")
        start = (page - 1) * per_page
        chunk = items[start : start + per_page]
        pages: dict[str, str] = {}
        if start + per_page < len(items):
            pages["next"] = f"{self.url}{request.path}?page={page + 1}&per_page={per_page}"
            pages["last"] = f"{self.url}{request.path}?page={(len(items) - 1) // per_page + 1}&per_page={per_page}"
        return Response(200, {key: chunk, "links": {"pages": pages}, "meta": {"total": len(items)}})

    def _find(self, droplet_id: str) -> FakeDroplet | None:
        try:
            droplet = self.droplets.get(int(droplet_id))
        except ValueError:
            return None
        return None if droplet is None or droplet.status == "deleted" else droplet

    def _delete(self, droplet: FakeDroplet) -> None:
        droplet.status = "deleted"
        droplet.deleted_at = time.time()
        droplet.history.append("deleted")
        if self.on_deleted is not None:
            threading.Thread(target=self.on_deleted, args=(str(droplet.id),), daemon=True).start()

    def _reject(self, why: str, status: int = 422, error_id: str = "unprocessable_entity", **extra: Any) -> Response:
        self.violation(why)
        return _error(status, error_id, why, **extra)

    def _create_droplet(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict):
            return self._reject("droplet body must be an object", 400, "bad_request")
        if "names" not in body:
            refused = self._invalid("droplet_single_create_request", body)
            if refused is not None:
                return refused
        unknown = set(body) - _DROPLET_KEYS
        if unknown:
            return self._reject(f"unknown droplet attributes {sorted(unknown)}")
        if "names" in body:
            return self._reject("this fake creates one droplet per call (use 'name'); the provider sends one each")
        name = body.get("name")
        if not isinstance(name, str) or not _HOSTNAME.match(name):
            return self._reject(f"name {name!r} is not a valid hostname")
        size = next((s for s in self.sizes if s["slug"] == body.get("size")), None)
        if size is None:
            return self._reject(f"size {body.get('size')!r} does not exist")
        region = body.get("region")
        if region not in REGIONS:
            return self._reject(f"region {region!r} does not exist")
        if region not in size["regions"] or not size["available"]:
            return _error(422, "unprocessable_entity", "Size is not available in this region.")
        image = body.get("image")
        snapshot = self.snapshots.get(image) if isinstance(image, int) and not isinstance(image, bool) else None
        if snapshot is not None:
            if region not in [snapshot.region]:
                return _error(422, "unprocessable_entity", f"Image {image} is not available in region {region}.")
            if size["disk"] < snapshot.min_disk_size:
                return self._reject(f"size {size['slug']}'s disk is smaller than snapshot {image}'s min_disk_size")
            vendor = snapshot.vendor
            image = str(snapshot.id)
        elif image not in IMAGES:
            return self._reject(f"image {image!r} does not exist")
        else:
            vendor = IMAGES[image]
        gpu = size.get("gpu_info")
        if gpu is None and vendor is not None:
            return self._reject(f"image {image} is for GPU droplets; size {size['slug']} has no GPU")
        if gpu is not None and (vendor is None or not gpu["model"].startswith(vendor)):
            return self._reject(f"size {size['slug']} needs a {gpu['model'].split('_')[0]} GPU image, not {image}")
        for key in body.get("ssh_keys") or []:
            if not self._key_known(key):
                return self._reject(f"ssh key {key!r} does not exist in this account")
        tags = body.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) and TAG_PATTERN.match(t) for t in tags):
            return self._reject(f"tags {tags!r}: letters, numbers, colons, dashes and underscores")
        user_data = body.get("user_data") or ""
        if not isinstance(user_data, str) or len(user_data.encode()) > USER_DATA_LIMIT:
            return self._reject("user_data must be a string of at most 64 KiB")
        for flag in ("backups", "ipv6", "monitoring", "private_networking", "with_droplet_agent"):
            if flag in body and not isinstance(body[flag], bool):
                return self._reject(f"{flag} must be a boolean")
        live = [d for d in self.droplets.values() if d.status != "deleted"]
        if len(live) >= self.droplet_limit:
            return _error(
                422, "unprocessable_entity",
                f"creating this/these droplet(s) will exceed your droplet limit of {self.droplet_limit}",
            )  # fmt: skip
        left = self.capacity.get((size["slug"], region))
        if left is not None:
            if left <= 0:
                return _error(
                    422, "unprocessable_entity",
                    "The size you selected is temporarily unavailable because of GPU capacity in this region.",
                )  # fmt: skip
            self.capacity[(size["slug"], region)] = left - 1
        self.tags.update(tags)  # DO creates tags a droplet names
        droplet = FakeDroplet(
            id=next(self._ids), name=name, region=region, size=size, image=image, tags=list(tags),
            user_data=user_data, ssh_keys=list(body.get("ssh_keys") or []), created_at=time.time(),
        )  # fmt: skip
        self.droplets[droplet.id] = droplet
        self.later(self.boot_delay, self._boot, droplet.id)
        action = {"id": next(self._ids), "rel": "create", "href": f"{self.url}/v2/actions/{droplet.id}"}
        return Response(202, {"droplet": droplet.to_json(), "links": {"actions": [action]}})

    def _boot(self, droplet_id: int) -> None:
        with self.lock:
            droplet = self.droplets.get(droplet_id)
            if droplet is None or droplet.status != "new":
                return
            if self.address_for is not None:
                droplet.public_ip = droplet.private_ip = self.address_for(str(droplet_id))
            else:
                droplet.public_ip, droplet.private_ip = self.addresses.allocate()
            droplet.status = "active"
            droplet.history.append("active")
            hook, user_data, ip = self.on_running, droplet.user_data, droplet.public_ip
        if hook is not None:
            try:
                hook(str(droplet_id), user_data, ip)
            except Exception as exc:  # the test sees it
                self.violation(f"on_running({droplet_id}) failed: {exc!r}")

    def _list_droplets(self, request: Request) -> Response:
        tag, kind, name = request.arg("tag_name"), request.arg("type"), request.arg("name")
        if tag and (kind or name):
            return self._reject("tag_name cannot be combined with type or name")
        if kind not in (None, "droplets", "gpus"):
            return self._reject(f"type {kind!r}: droplets or gpus")
        live = [d for d in self.droplets.values() if d.status != "deleted"]
        if tag:  # not documented for GPU droplets: the reading that hides them (see the module docs)
            chosen = [d for d in live if tag in d.tags and not d.is_gpu]
        elif kind == "gpus":
            chosen = [d for d in live if d.is_gpu]
        else:  # the plain listing leaves GPU droplets out
            chosen = [d for d in live if not d.is_gpu]
        if name:
            chosen = [d for d in chosen if d.name.lower() == name.lower()]
        return self._page(request, "droplets", [d.to_json() for d in chosen])
