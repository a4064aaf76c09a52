"""The DigitalOcean API calls the provider makes, through pydo.

One thin method per call, each with the retry rules of :mod:`skyward.providers.cloud.retry`
and errors turned into :class:`DigitalOceanAPIError` carrying DO's own ``id`` and
``message``. pydo's own retry policy is switched off: it would repeat a droplet-creating
POST after a 500 (a second billed droplet) and would not repeat it after a 429.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.addresses import is_loopback
from skyward.providers.cloud.retry import Backoff, Failure, call_with_retry
from skyward_digitalocean.config import DigitalOcean

T = TypeVar("T")
JSON = dict[str, Any]
PAGE_SIZE = 200

# pydo and azure-core are imported inside the functions that use them: this module loads
# with the package (``__init__`` -> reaper -> api), so with the plugin's entry point in
# every process that reads the plugin registry, workers included. Measured after the
# registry is loaded: ``import pydo`` adds 122 modules and ~60 ms, ``azure.core`` alone
# 62 modules and ~15 ms; a process only pays them once it talks to DigitalOcean.


class DigitalOceanAPIError(ProvisioningError):
    """A DigitalOcean API call failed; ``status``, ``error_id`` and ``body`` are DO's."""

    def __init__(self, action: str, status: int | None, error_id: str, message: str, body: Mapping[str, Any]) -> None:
        self.action = action
        self.status = status
        self.error_id = error_id
        self.api_message = message
        self.body = dict(body)
        code = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"DigitalOcean API: {action} failed ({code}, {error_id or 'error'}): {message}")


def _auth_policy_for_plain_http(token: str) -> Any:
    """azure-core's bearer policy refuses a token over plain http; its per-request
    ``enforce_https`` option is the supported way to allow it. We set it only for a
    loopback endpoint (a test double), so a token never travels unencrypted off-host."""
    from azure.core.pipeline.policies import BearerTokenCredentialPolicy  # noqa: PLC0415  # heavy, see top
    from pydo._patch import TokenCredentials  # noqa: PLC0415  # heavy, see top

    class LoopbackBearerPolicy(BearerTokenCredentialPolicy):  # type: ignore[type-arg]
        def on_request(self, request: Any) -> None:
            request.context.options["enforce_https"] = False
            super().on_request(request)

    return LoopbackBearerPolicy(TokenCredentials(token), "https://api.digitalocean.com")


def make_client(config: DigitalOcean, token: str) -> Any:
    """A pydo Client for ``config.api_url``."""
    import pydo  # noqa: PLC0415  # heavy (~60 ms), see top

    url = urlsplit(config.api_url)
    kwargs: dict[str, Any] = {}
    if url.scheme == "http":
        if not is_loopback(url.hostname):
            raise ConfigurationError(
                f"DigitalOcean(api_url={config.api_url!r}): plain http would send the API token unencrypted; "
                "use https (plain http is allowed only on a loopback address, for test doubles)"
            )
        kwargs["authentication_policy"] = _auth_policy_for_plain_http(token)
    return pydo.Client(
        token,
        endpoint=config.api_url.rstrip("/"),
        retry_total=0,
        connection_timeout=min(10.0, config.api_timeout),
        read_timeout=config.api_timeout,
        **kwargs,
    )


def _body_of(response: Any) -> dict[str, Any]:
    if response is None:
        return {}
    try:
        text = response.text()
    except Exception:
        return {}
    try:
        parsed = json.loads(text) if text else {}
    except ValueError:
        return {"message": text[:500]}
    return parsed if isinstance(parsed, dict) else {"message": str(parsed)[:500]}


def classify(exc: BaseException) -> Failure | None:
    from azure.core.exceptions import (  # noqa: PLC0415  # heavy (~15 ms), see top
        HttpResponseError,
        ServiceRequestError,
        ServiceResponseError,
    )

    if isinstance(exc, _StatusError):
        return Failure(status=exc.status, sent=True, headers=exc.headers)
    if isinstance(exc, HttpResponseError) and exc.status_code is not None:
        headers = dict(getattr(exc.response, "headers", None) or {})
        return Failure(status=int(exc.status_code), sent=True, headers=headers)
    if isinstance(exc, ServiceRequestError):
        return Failure(status=None, sent=False, headers={})
    if isinstance(exc, ServiceResponseError):
        return Failure(status=None, sent=True, headers={})
    return None


class _StatusError(Exception):
    """A status pydo returned instead of raising (it treats some 4xx as results)."""

    def __init__(self, status: int, body: Mapping[str, Any], headers: Mapping[str, str]) -> None:
        super().__init__(status)
        self.status = status
        self.body = dict(body)
        self.headers = dict(headers)


class DigitalOceanAPI:
    """The calls the driver and the reaper make. Every method blocks and retries."""

    def __init__(self, client: Any, backoff: Backoff, sleep: Callable[[float], None] | None = None) -> None:
        self._client = client
        self._backoff = backoff
        self._sleep = sleep or time.sleep

    # -- plumbing ----------------------------------------------------------------------

    def _call(self, action: str, method: str, op: Callable[..., Any], /, *args: Any, **kwargs: Any) -> tuple[int, JSON]:
        """Run one pydo operation; returns (status, body). Raises DigitalOceanAPIError
        for any status >= 400 that is not in ``ok`` after retries."""
        from azure.core.exceptions import AzureError, HttpResponseError  # noqa: PLC0415  # heavy, see top

        def once() -> tuple[int, JSON]:
            captured: dict[str, Any] = {}

            def keep(pipeline_response: Any, deserialized: Any, headers: Any) -> Any:
                captured["status"] = pipeline_response.http_response.status_code
                captured["headers"] = dict(pipeline_response.http_response.headers)
                return deserialized

            body = op(*args, cls=keep, **kwargs)
            status = int(captured.get("status", 200))
            body = body if isinstance(body, dict) else {}
            if status >= 400:
                raise _StatusError(status, body, captured.get("headers", {}))
            return status, body

        try:
            return call_with_retry(once, method=method, classify=classify, backoff=self._backoff, sleep=self._sleep)
        except _StatusError as exc:
            raise self._error(action, exc.status, exc.body)
        except HttpResponseError as exc:
            raise self._error(action, exc.status_code, _body_of(exc.response), fallback=str(exc.message))
        except AzureError as exc:
            raise DigitalOceanAPIError(action, None, "unreachable", f"{type(exc).__name__}: {exc}", {})

    @staticmethod
    def _error(action: str, status: int | None, body: Mapping[str, Any], fallback: str = "") -> DigitalOceanAPIError:
        """DO answers errors in two shapes (its OpenAPI specification, shared/models):
        ``error.yml`` ``{"id", "message", "request_id"}`` on most endpoints and
        ``error_with_root_causes.yml`` ``{"error", "messages", "root_causes"}`` on some
        (a refused tag, for one); both are read."""
        error_id = str(body.get("id") or "")
        causes = body.get("root_causes")
        message = body.get("message") or body.get("error") or ""
        if not message and isinstance(causes, list) and causes:
            message = "; ".join(str(c) for c in causes)
        return DigitalOceanAPIError(action, status, error_id, str(message or fallback or "no message"), body)

    def _object(self, action: str, method: str, op: Callable[..., Any], key: str, /, **kwargs: Any) -> JSON:
        """One call whose answer holds one object under ``key`` (a created droplet, an
        action...); an answer without it is an error."""
        status, response = self._call(action, method, op, **kwargs)
        found = response.get(key)
        if not isinstance(found, dict):
            raise self._error(action, status, response, f"the response holds no {key}")
        return found

    def _pages(self, action: str, op: Callable[..., Any], key: str, **kwargs: Any) -> Iterator[JSON]:
        page = 1
        while True:
            _, body = self._call(action, "GET", op, per_page=PAGE_SIZE, page=page, **kwargs)
            items = body.get(key) or []
            yield from items
            pages = (body.get("links") or {}).get("pages") or {}
            if not items or not pages.get("next"):
                return
            page += 1

    # -- sizes, regions, account -----------------------------------------------------

    def sizes(self) -> list[JSON]:
        return list(self._pages("list sizes", self._client.sizes.list, "sizes"))

    def regions(self) -> list[JSON]:
        return list(self._pages("list regions", self._client.regions.list, "regions"))

    def account(self) -> JSON:
        """``GET /v2/account``: ``droplet_limit``, ``status`` (active, warning, locked),
        ``email_verified`` (OpenAPI resources/account/models/account.yml)."""
        return self._object("get account", "GET", self._client.account.get, "account")

    # -- tags, firewalls, keys --------------------------------------------------------

    def create_tag(self, name: str) -> None:
        """Make sure the tag exists. Creating a tag that exists already is not documented
        (DO's OpenAPI ``tags_create`` lists 201 and 400 only); the DigitalOcean Ansible
        collection reads a 422 as "already there". So a refusal is followed by a look-up:
        the tag being there is success, whatever the create answered."""
        try:
            self._call(f"create tag {name}", "POST", self._client.tags.create, body={"name": name})
        except DigitalOceanAPIError as exc:
            if exc.status not in (400, 409, 422) or not self.tag_exists(name):
                raise

    def tag_exists(self, name: str) -> bool:
        try:
            self._call(f"get tag {name}", "GET", self._client.tags.get, tag_id=name)
        except DigitalOceanAPIError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def tags(self) -> list[JSON]:
        return list(self._pages("list tags", self._client.tags.list, "tags"))

    def delete_tag(self, name: str) -> None:
        self._call_gone_ok(f"delete tag {name}", self._client.tags.delete, tag_id=name)

    def create_firewall(self, body: JSON) -> JSON:
        action = f"create firewall {body.get('name')}"
        return self._object(action, "POST", self._client.firewalls.create, "firewall", body=body)

    def firewalls(self) -> list[JSON]:
        return list(self._pages("list firewalls", self._client.firewalls.list, "firewalls"))

    def delete_firewall(self, firewall_id: str) -> None:
        self._call_gone_ok(f"delete firewall {firewall_id}", self._client.firewalls.delete, firewall_id=firewall_id)

    def create_ssh_key(self, name: str, public_key: str) -> JSON:
        body = {"name": name, "public_key": public_key}
        return self._object(f"create SSH key {name}", "POST", self._client.ssh_keys.create, "ssh_key", body=body)

    def ssh_keys(self) -> list[JSON]:
        return list(self._pages("list SSH keys", self._client.ssh_keys.list, "ssh_keys"))

    def delete_ssh_key(self, key_id: int | str) -> None:
        self._call_gone_ok(f"delete SSH key {key_id}", self._client.ssh_keys.delete, ssh_key_identifier=key_id)

    # -- droplets ----------------------------------------------------------------------

    def create_droplet(self, body: JSON) -> JSON:
        action = f"create droplet {body.get('name')}"
        return self._object(action, "POST", self._client.droplets.create, "droplet", body=body)

    def droplet(self, droplet_id: int) -> JSON | None:
        """The droplet, or None once it no longer exists."""
        try:
            _, response = self._call(
                f"get droplet {droplet_id}", "GET", self._client.droplets.get, droplet_id=droplet_id
            )
        except DigitalOceanAPIError as exc:
            if exc.status == 404:
                return None
            raise
        droplet = response.get("droplet")
        return droplet if isinstance(droplet, dict) else None

    def droplets_tagged(self, tag: str) -> list[JSON]:
        """Every droplet carrying ``tag``, GPU droplets included.

        DO's ``droplets_list`` returns "only non-GPU Droplets" unless ``type=gpus``, and
        ``tag_name`` "can not be combined with ``name`` or ``type``" (OpenAPI
        resources/droplets/parameters.yml). Whether a ``tag_name`` listing includes GPU
        droplets is not documented, so both listings are read: by tag, and every GPU
        droplet filtered here by its tags."""
        found: dict[str, JSON] = {}
        for droplet in self._pages(f"list droplets tagged {tag}", self._client.droplets.list, "droplets", tag_name=tag):
            found[str(droplet.get("id"))] = droplet
        for droplet in self.gpu_droplets():
            if tag in (droplet.get("tags") or ()):
                found.setdefault(str(droplet.get("id")), droplet)
        return list(found.values())

    def all_droplets(self) -> list[JSON]:
        """Every droplet of the account: the plain listing, then the GPU droplets it leaves out."""
        return [*self._pages("list droplets", self._client.droplets.list, "droplets"), *self.gpu_droplets()]

    def gpu_droplets(self) -> list[JSON]:
        """GPU droplets: the plain listing leaves them out unless asked with type=gpus."""
        return list(self._pages("list GPU droplets", self._client.droplets.list, "droplets", type="gpus"))

    def delete_droplet(self, droplet_id: int) -> None:
        self._call_gone_ok(f"delete droplet {droplet_id}", self._client.droplets.destroy, droplet_id=droplet_id)

    def delete_droplets_tagged(self, tag: str) -> None:
        self._call_gone_ok(f"delete droplets tagged {tag}", self._client.droplets.destroy_by_tag, tag_name=tag)

    def _call_gone_ok(self, action: str, op: Callable[..., Any], **kwargs: Any) -> None:
        """A DELETE whose target being gone already (404) counts as done."""
        try:
            self._call(action, "DELETE", op, **kwargs)
        except DigitalOceanAPIError as exc:
            if exc.status != 404:
                raise

    # -- snapshots (Image(bake=True)) ------------------------------------------------

    def snapshot_droplet(self, droplet_id: int, name: str) -> JSON:
        """Start a snapshot of the droplet (a droplet action); returns the action."""
        body = {"type": "snapshot", "name": name}
        op = self._client.droplet_actions.post
        return self._object(f"snapshot droplet {droplet_id}", "POST", op, "action", droplet_id=droplet_id, body=body)

    def action(self, action_id: int) -> JSON:
        return self._object(f"get action {action_id}", "GET", self._client.actions.get, "action", action_id=action_id)

    def droplet_snapshots(self) -> list[JSON]:
        """Every droplet snapshot of the account (all regions), with its tags."""
        return list(self._pages("list snapshots", self._client.snapshots.list, "snapshots", resource_type="droplet"))

    def delete_snapshot(self, snapshot_id: str) -> None:
        self._call_gone_ok(f"delete snapshot {snapshot_id}", self._client.snapshots.delete, snapshot_id=snapshot_id)

    def tag_resources(self, tag: str, resource_type: str, resource_ids: list[str]) -> None:
        """Put ``tag`` (which must exist) on these resources."""
        body = {"resources": [{"resource_id": i, "resource_type": resource_type} for i in resource_ids]}
        self._call(
            f"tag {resource_type}s with {tag}", "POST", self._client.tags.assign_resources, tag_id=tag, body=body
        )
