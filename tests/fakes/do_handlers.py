"""Handlers of the fake DigitalOcean API beyond droplets: the pool's network pieces (tags,
firewalls, SSH keys) and what baking uses (droplet snapshot actions, images, tagging
resources). Mixed into :class:`fakes.digitalocean.FakeDigitalOcean`, whose docstring lists
the rules enforced here and their sources."""

from __future__ import annotations

import base64
import hashlib
import ipaddress
import itertools
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from fakes.do_catalog import ALL_REGIONS, IMAGES, FakeAction, FakeDroplet, FakeSnapshot, do_error
from fakes.do_spec import problems
from fakes.http import Request, Response

TAG_PATTERN = re.compile(r"^[A-Za-z0-9_\-:]{1,255}$")
_FIREWALL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.\-]{0,254}$")
_PORTS = re.compile(r"^(0|[1-9]\d{0,4}(-[1-9]\d{0,4})?)$")
_RULE_TARGET_KEYS = {"addresses", "droplet_ids", "kubernetes_ids", "load_balancer_uids", "tags"}
_TAGGABLE = ("droplet", "image", "volume", "volume_snapshot")  # DO's resource_type values for tags
_SNAPSHOT_NAME_LIMIT = 255


class _Base:
    """What the handlers use of :class:`fakes.digitalocean.FakeDigitalOcean`."""

    lock: threading.RLock
    tags: set[str]
    droplets: dict[int, FakeDroplet]
    snapshots: dict[int, FakeSnapshot]
    actions: dict[int, FakeAction]
    firewalls: dict[str, dict[str, Any]]
    ssh_keys: dict[int, dict[str, Any]]
    snapshot_delay: float
    snapshot_gigabytes: float
    on_snapshot: Callable[[str, str], None] | None
    _key_ids: itertools.count[int]
    _action_ids: itertools.count[int]
    _image_ids: itertools.count[int]

    if TYPE_CHECKING:  # FakeDigitalOcean and FakeCloud provide these; stubs here would shadow them

        def violation(self, why: str) -> None: ...

        def later(self, delay: float, fn: Callable[..., None], *args: Any) -> None: ...

        def _reject(
            self, why: str, status: int = 422, error_id: str = "unprocessable_entity", **extra: Any
        ) -> Response: ...

        def _invalid(self, schema: str, body: Any) -> Response | None: ...

        def _page(self, request: Request, key: str, items: list[dict[str, Any]]) -> Response: ...

        def _find(self, droplet_id: str) -> FakeDroplet | None: ...


class NetworkHandlers(_Base):
    """``POST /v2/tags``, ``/v2/firewalls``, ``/v2/account/keys``."""

    def _create_tag(self, request: Request) -> Response:
        body = request.json()
        name = body.get("name") if isinstance(body, dict) else None
        if problems("tag_create_request", body) or not isinstance(name, str) or not TAG_PATTERN.match(name):
            why = f"Error validating resource tag: tag-name {name!r} contains invalid characters"
            self.violation(why)
            # the documented 400 of tags_create (spec tags/responses/tags_bad_request.yml)
            return Response(400, {"error": why, "messages": None, "root_causes": [f"rpc error: {why}"]})
        if name in self.tags:
            return do_error(422, "unprocessable_entity", f"tag {name} already exists")
        self.tags.add(name)
        return Response(201, {"tag": self._tag_json(name)})

    def _check_targets(self, rule: Mapping[str, Any], key: str) -> str | None:
        targets = rule.get(key)
        if not isinstance(targets, dict) or not targets:
            return f"each rule needs a non-empty {key!r} object"
        unknown = set(targets) - _RULE_TARGET_KEYS
        if unknown:
            return f"{key} has unknown keys {sorted(unknown)}"
        for address in targets.get("addresses", []):
            try:
                network = ipaddress.ip_network(address, strict=False)
            except ValueError:
                return f"{address!r} is not an IP address or CIDR"
            if key == "sources" and network.prefixlen == 0 and rule.get("protocol") != "icmp":
                self.violation(f"inbound rule open to the whole internet: {address}")
        for tag in targets.get("tags", []):
            if tag not in self.tags:
                return f"tag {tag!r} does not exist"
        return None

    def _create_firewall(self, request: Request) -> Response:
        body = request.json()
        if not isinstance(body, dict):
            return self._reject("firewall body must be an object", 400, "bad_request")
        refused = self._invalid("firewall_create_request", body)
        if refused is not None:
            return refused
        name = body.get("name")
        if not isinstance(name, str) or not _FIREWALL_NAME.match(name):
            return self._reject(f"firewall name {name!r}: alphanumerics first, then alphanumerics, '.' or '-'")
        inbound, outbound = body.get("inbound_rules") or [], body.get("outbound_rules") or []
        if not inbound and not outbound:
            return self._reject("a firewall needs at least one inbound or outbound rule")
        for rules, key in ((inbound, "sources"), (outbound, "destinations")):
            for rule in rules:
                protocol = rule.get("protocol")
                if protocol not in ("tcp", "udp", "icmp"):
                    return self._reject(f"rule protocol {protocol!r}: tcp, udp or icmp")
                ports = rule.get("ports")  # required for ICMP too (firewall_rule_base.required)
                if not isinstance(ports, str) or not _PORTS.match(ports):
                    return self._reject(f"rule ports {ports!r}: a port, a range 'a-b', or '0' for all")
                problem = self._check_targets(rule, key)
                if problem:
                    return self._reject(problem)
        for tag in body.get("tags") or []:
            if tag not in self.tags:
                return self._reject(f"tag {tag!r} does not exist")
        # "For ICMP rules this parameter will always return '0'" (firewall_rule.yml)
        inbound = [{**r, "ports": "0"} if r.get("protocol") == "icmp" else r for r in inbound]
        outbound = [{**r, "ports": "0"} if r.get("protocol") == "icmp" else r for r in outbound]
        firewall_id = str(uuid.uuid4())
        firewall = {
            "id": firewall_id,
            "name": name,
            "status": "succeeded",
            "created_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "pending_changes": [],
            "inbound_rules": inbound,
            "outbound_rules": outbound,
            "droplet_ids": list(body.get("droplet_ids") or []),
            "tags": list(body.get("tags") or []),
        }
        self.firewalls[firewall_id] = firewall
        return Response(202, {"firewall": firewall})

    def _create_key(self, request: Request) -> Response:
        body = request.json()
        refused = self._invalid("ssh_key_create_request", body)
        if refused is not None:
            return refused
        name, public_key = body.get("name"), body.get("public_key")
        if not isinstance(name, str) or not name:
            return self._reject("an SSH key needs a name")
        parts = public_key.split() if isinstance(public_key, str) else []
        if len(parts) < 2 or parts[0] not in ("ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256"):
            return self._reject("public_key is not an OpenSSH public key")
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except ValueError:
            return self._reject("public_key is not an OpenSSH public key (bad base64)")
        digest = hashlib.md5(blob).hexdigest()
        key_id = next(self._key_ids)
        key = {
            "id": key_id,
            "fingerprint": ":".join(digest[i : i + 2] for i in range(0, 32, 2)),
            "public_key": public_key,
            "name": name,
        }
        self.ssh_keys[key_id] = key
        return Response(201, {"ssh_key": key})

    def _key_known(self, ident: Any) -> bool:
        return any(ident in (key_id, str(key_id), key["fingerprint"]) for key_id, key in self.ssh_keys.items())


class SnapshotHandlers(_Base):
    """Droplet snapshot actions, ``GET /v2/actions``, ``/v2/images``, tagging resources."""

    def _tag_json(self, name: str) -> dict[str, Any]:
        droplets = sum(name in d.tags for d in self.droplets.values() if d.status != "deleted")
        images = sum(name in x.tags for x in self.snapshots.values())
        return {
            "name": name,
            "resources": {"count": droplets + images, "droplets": {"count": droplets}, "images": {"count": images}},
        }

    def _snapshot(self, ident: str) -> FakeSnapshot | None:
        return self.snapshots.get(int(ident)) if ident.isdigit() else None

    def _busy(self, droplet_id: int) -> bool:
        return any(a.droplet_id == droplet_id and a.status == "in-progress" for a in self.actions.values())

    def _tag_resources(self, request: Request, name: str) -> Response:
        if name not in self.tags:
            return do_error(404, "not_found", "The resource you were accessing could not be found.")
        body = request.json()
        refused = self._invalid("tag_assign_resources_request", body)
        if refused is not None:
            return refused
        resources = body.get("resources") if isinstance(body, dict) else None
        if set(body or {}) - {"resources"} or not isinstance(resources, list) or not resources:
            return self._reject('the body must be {"resources": [...]}, a non-empty list')
        targets: list[list[str]] = []
        for resource in resources:
            if not isinstance(resource, dict) or set(resource) != {"resource_id", "resource_type"}:
                return self._reject(f"resource {resource!r}: exactly resource_id and resource_type")
            ident, kind = resource["resource_id"], resource["resource_type"]
            if not isinstance(ident, str):
                return self._reject(f"resource_id {ident!r} must be a string")
            if kind not in _TAGGABLE:
                return self._reject(f"resource_type {kind!r}: one of {', '.join(_TAGGABLE)}")
            found: FakeDroplet | FakeSnapshot | None
            found = self._find(ident) if kind == "droplet" else self._snapshot(ident) if kind == "image" else None
            if found is None:
                return self._reject(f"{kind} {ident} does not exist", 404, "not_found")
            targets.append(found.tags)
        for tags in targets:
            if name not in tags:
                tags.append(name)
        return Response(204)

    def _droplet_action(self, request: Request, droplet_id: str) -> Response:
        droplet = self._find(droplet_id)
        if droplet is None:
            return do_error(404, "not_found", "The resource you were accessing could not be found.")
        body = request.json()
        refused = self._invalid("droplet_action_snapshot_request", body)
        if refused is not None:
            return refused
        if not isinstance(body, dict) or body.get("type") != "snapshot":
            return self._reject(f"droplet action {body!r}: this fake knows type 'snapshot' only")
        if set(body) - {"type", "name"}:
            return self._reject(f"unknown snapshot action attributes {sorted(set(body) - {'type', 'name'})}")
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not 0 < len(name) <= _SNAPSHOT_NAME_LIMIT):
            return self._reject(f"snapshot name {name!r}: a string of 1-{_SNAPSHOT_NAME_LIMIT} characters")
        if droplet.status == "new" or self._busy(droplet.id):
            return do_error(422, "unprocessable_entity", "Droplet already has a pending event.")
        action = FakeAction(next(self._action_ids), "snapshot", droplet.id, droplet.region, time.time())
        self.actions[action.id] = action
        name = name or f"{droplet.name}-{int(action.started_at)}"
        self.later(self.snapshot_delay, self._complete_snapshot, action.id, name)
        return Response(201, {"action": action.to_json()})

    def _complete_snapshot(self, action_id: int, name: str) -> None:
        with self.lock:
            action = self.actions[action_id]
            droplet = self.droplets[action.droplet_id]
            snapshot = FakeSnapshot(
                next(self._image_ids), name, droplet.region, droplet.id, int(droplet.size["disk"]),
                self.snapshot_gigabytes, self._vendor(droplet.image), time.time(),
            )  # fmt: skip
            hook = self.on_snapshot
        if hook is not None:
            try:
                hook(str(droplet.id), str(snapshot.id))
            except Exception as exc:  # the test sees it
                self.violation(f"on_snapshot({droplet.id}) failed: {exc!r}")
        with self.lock:
            self.snapshots[snapshot.id] = snapshot
            droplet.snapshot_ids.append(snapshot.id)
            action.status, action.completed_at = "completed", time.time()

    def _vendor(self, image: str) -> str | None:
        """The accelerator vendor an image (a slug or a snapshot's id) is for."""
        if image.isdigit():
            snapshot = self.snapshots.get(int(image))
            return None if snapshot is None else snapshot.vendor
        return IMAGES[image]

    def _list_images(self, request: Request) -> Response:
        private, kind, tag = request.arg("private"), request.arg("type"), request.arg("tag_name")
        if private not in (None, "true", "false") or kind not in (None, "distribution", "application"):
            return self._reject(f"images: private={private!r} type={kind!r}")
        images = [x.as_image() for x in self.snapshots.values()]
        if private != "true":
            public = [
                {"id": 100000 + i, "slug": slug, "name": slug, "type": "base", "public": True}
                | {"regions": [*ALL_REGIONS]}
                for i, slug in enumerate(IMAGES)
            ]
            images = public if kind is not None else [*public, *images]
        if tag:
            images = [i for i in images if tag in i.get("tags", ())]
        return self._page(request, "images", images)
