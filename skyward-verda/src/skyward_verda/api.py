"""The Verda public API calls the provider makes, over requests.

Authentication is OAuth 2.0 client credentials (``POST /oauth2/token``). The access
token is refreshed before it expires (with the refresh token, or the client credentials
again when that is refused) and once more if the API answers 401 anyway (a token revoked
or expired early). Every call follows the retry rules of :mod:`skyward.providers.cloud.retry`;
failures become :class:`VerdaAPIError` with Verda's own ``code`` and ``message``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack
from urllib.parse import quote

import requests

from skyward.errors import ProvisioningError
from skyward.providers.cloud.http import BearerSession, HTTPStatusError, Options, classify
from skyward.providers.cloud.http import check_api_url as check_url
from skyward.providers.cloud.retry import Backoff, call_with_retry
from skyward_verda.config import Verda

USER_AGENT = "skyward-verda"
REFRESH_MARGIN = 30.0  # seconds before expiry at which a token is renewed (at most)
SCRIPTS_PAGE = 100
"""``GET /scripts`` page size: paginated since 2026-03-30 with ``page`` and ``pageSize``
(default 10, at most 100), the total in the ``X-Total-Count`` header (Verda API change
notes, docs.verda.com/welcome-to-verda/release-notes/verda-api-changes)."""
SCRIPTS_QUOTA = 100
"""Startup scripts a project may hold by default (same notes; at most 1000 on request)."""


@dataclass(frozen=True, slots=True)
class ActionResult:
    """One instance's outcome of ``PUT /instances``: a 202 lists every instance with
    status ``success``, a 207 lists some with status ``error``, ``error`` and
    ``statusCode`` (verdacloud-sdk-go pkg/verda/instances.go ``InstanceActionResult``)."""

    instance_id: str
    ok: bool
    error: str = ""
    status_code: int | None = None


def action_results(instance_ids: Sequence[str], status: int, body: Any) -> list[ActionResult]:
    """The per-instance results of an instance action. A 204 ("already in that state")
    or a body that lists no result counts as success for every instance asked."""
    listed: dict[str, ActionResult] = {}
    if status in (202, 207) and isinstance(body, list):
        for entry in body:
            if not isinstance(entry, dict) or not entry.get("instanceId"):
                continue
            ident = str(entry["instanceId"])
            code = entry.get("statusCode")
            failed = str(entry.get("status", "")).lower() not in ("success", "ok", "")
            listed[ident] = ActionResult(
                ident, not failed, str(entry.get("error") or ""), int(code) if isinstance(code, int) else None
            )
    if status == 207 and not listed:
        return [ActionResult(i, False, "a partial answer (207) without per-instance results") for i in instance_ids]
    return [listed.get(i, ActionResult(i, True)) for i in instance_ids]


class VerdaAPIError(ProvisioningError):
    """A Verda API call failed; ``status``, ``code`` and ``api_message`` are Verda's."""

    def __init__(self, action: str, status: int | None, code: str, message: str) -> None:
        self.action = action
        self.status = status
        self.code = code
        self.api_message = message
        where = f"HTTP {status}" if status is not None else "no response"
        super().__init__(f"Verda API: {action} failed ({where}, {code or 'error'}): {message}")


def check_api_url(url: str) -> str:
    return check_url("Verda", url, "the client secret and tokens")


def _error_of(action: str, response: requests.Response) -> VerdaAPIError:
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:500]}
    if not isinstance(body, dict):
        body = {"message": str(body)[:500]}
    return VerdaAPIError(
        action, response.status_code, str(body.get("code") or ""), str(body.get("message") or "no message")
    )


class TokenSource:
    """Access tokens from ``/oauth2/token``, renewed before they expire."""

    def __init__(
        self,
        session: requests.Session,
        base_url: str,
        client_id: str,
        client_secret: str,
        timeout: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._session = session
        self._url = f"{base_url}/oauth2/token"
        self._client_id = client_id
        self._client_secret = client_secret
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._access: str | None = None
        self._refresh: str | None = None
        self._expires_at = 0.0
        self._lifetime = 0.0
        self.grants: list[str] = []  # what was asked for, in order (for tests and logs)

    def token(self) -> str:
        with self._lock:
            margin = min(REFRESH_MARGIN, self._lifetime / 10)
            if self._access is None or self._clock() >= self._expires_at - margin:
                self._renew()
            assert self._access is not None
            return self._access

    def refused(self, token: str) -> bool:
        """The API refused ``token`` (expired or revoked early): the next ``token()`` gets
        a new one, worth one more try."""
        with self._lock:
            if self._access == token:
                self._expires_at = 0.0
        return True

    def _renew(self) -> None:
        if self._refresh is not None:
            response = self._post({"grant_type": "refresh_token", "refresh_token": self._refresh})
            if response.status_code in (400, 401):
                self._refresh = None  # expired or revoked: start over with the credentials
            else:
                return self._store(response, "refresh_token")
        response = self._post(
            {"grant_type": "client_credentials", "client_id": self._client_id, "client_secret": self._client_secret}
        )
        if response.status_code in (400, 401):
            error = _error_of("authenticate", response)
            raise VerdaAPIError(
                "authenticate",
                response.status_code,
                error.code,
                f"{error.api_message} (check VERDA_CLIENT_ID and VERDA_CLIENT_SECRET)",
            )
        self._store(response, "client_credentials")

    def _post(self, body: Mapping[str, str]) -> requests.Response:
        def once() -> requests.Response:
            response = self._session.post(
                self._url, json=dict(body), timeout=self._timeout, headers={"User-Agent": USER_AGENT}
            )
            if response.status_code == 429 or response.status_code >= 500:
                raise HTTPStatusError(response)
            return response

        try:
            # a token request changes nothing on the server: safe to repeat like a GET
            return call_with_retry(once, method="GET", classify=classify, backoff=Backoff(attempts=5, base=0.5))
        except HTTPStatusError as exc:
            raise _error_of("authenticate", exc.response)
        except requests.RequestException as exc:
            raise VerdaAPIError("authenticate", None, "unreachable", f"{type(exc).__name__}: {exc}")

    def _store(self, response: requests.Response, grant: str) -> None:
        if response.status_code != 200:
            raise _error_of("authenticate", response)
        data = response.json()
        self._access = str(data["access_token"])
        self._refresh = data.get("refresh_token") or None
        self._lifetime = float(data.get("expires_in") or 3600)
        self._expires_at = self._clock() + self._lifetime
        self.grants.append(grant)


class VerdaAPI:
    """The calls the driver and the reaper make. Every method blocks and retries."""

    def __init__(
        self,
        base_url: str,
        client_id: str,
        client_secret: str,
        *,
        timeout: float = 60.0,
        backoff: Backoff | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.base_url = check_api_url(base_url)
        session = requests.Session()
        self.tokens = TokenSource(session, self.base_url, client_id, client_secret, timeout, clock)
        self._http = BearerSession(
            self.base_url,
            self.tokens,
            user_agent=USER_AGENT,
            timeout=timeout,
            backoff=backoff or Backoff(),
            sleep=sleep,
            session=session,
        )

    @classmethod
    def from_config(cls, config: Verda, client_id: str, client_secret: str) -> VerdaAPI:
        return cls(
            config.api_url,
            client_id,
            client_secret,
            timeout=config.api_timeout,
            backoff=Backoff(attempts=config.api_retries, base=config.api_backoff),
        )

    def close(self) -> None:
        self._http.close()

    # -- plumbing ----------------------------------------------------------------------

    def _request(self, action: str, method: str, path: str, **options: Unpack[Options]) -> requests.Response:
        try:
            return self._http.send(method, path, **options)
        except HTTPStatusError as exc:
            raise _error_of(action, exc.response)
        except requests.RequestException as exc:
            raise VerdaAPIError(action, None, "unreachable", f"{type(exc).__name__}: {exc}")

    def _json(self, action: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        response = self._request(action, "GET", path, params=params, ok=(200,))
        try:
            return response.json()
        except ValueError:
            raise VerdaAPIError(action, response.status_code, "bad_response", "the response is not JSON")

    @staticmethod
    def _id_of(action: str, response: requests.Response) -> str:
        """Create calls answer with the new id as the body (plain text, or a JSON string)."""
        text = response.text.strip()
        if text.startswith('"'):
            try:
                text = str(json.loads(text))
            except ValueError:
                pass
        if not text:
            raise VerdaAPIError(action, response.status_code, "bad_response", "the response holds no id")
        return text

    # -- catalogue --------------------------------------------------------------------

    def instance_types(self) -> list[dict[str, Any]]:
        return list(self._json("list instance types", "/instance-types"))

    def availability(self, *, spot: bool, location: str | None = None) -> list[dict[str, Any]]:
        """Per location, the types deployable now in one market.

        The market goes under both spellings the official SDKs use: ``is_spot``
        (verdacloud-sdk-go ``GetAllAvailabilities``, the API reference) and ``isSpot``
        (the Python SDK's ``get_availabilities``, still in verda 1.24). An API that reads
        either one then answers for the market asked, not for on-demand by default. The
        location is ``location_code`` only: the Python SDK's ``locationCode`` was a bug
        fixed in Dec 2025 (sdk-python #69, "according to docs, it should be passed as
        location_code")."""
        flag = "true" if spot else "false"
        params: dict[str, Any] = {"is_spot": flag, "isSpot": flag}
        if location is not None:
            params["location_code"] = location
        return list(self._json("list instance availability", "/instance-availability", params))

    def locations(self) -> list[dict[str, Any]]:
        return list(self._json("list locations", "/locations"))

    def images(self, instance_type: str | None = None) -> list[dict[str, Any]]:
        """OS images; with ``instance_type``, only those offered for it
        (``GET /images?instance_type=``, as verda's ``images.get(instance_type=)`` and
        the Go SDK's ``GetImagesByInstanceType`` ask)."""
        params = {"instance_type": instance_type} if instance_type else None
        return list(self._json("list images", "/images", params))

    def balance(self) -> dict[str, Any]:
        """``GET /balance``: ``amount`` and ``currency`` (the SDKs' ``BalanceService``)."""
        data = self._json("get balance", "/balance")
        return data if isinstance(data, dict) else {}

    # -- keys and scripts --------------------------------------------------------------

    def create_ssh_key(self, name: str, public_key: str) -> str:
        response = self._request(f"add SSH key {name}", "POST", "/sshkeys", body={"name": name, "key": public_key})
        return self._id_of("add SSH key", response)

    def ssh_keys(self) -> list[dict[str, Any]]:
        return list(self._json("list SSH keys", "/sshkeys"))

    def delete_ssh_key(self, key_id: str) -> None:
        self._delete(f"delete SSH key {key_id}", f"/sshkeys/{quote(key_id, safe='')}")

    def create_script(self, name: str, script: str) -> str:
        response = self._request(
            f"create startup script {name}", "POST", "/scripts", body={"name": name, "script": script}
        )
        return self._id_of("create startup script", response)

    def scripts(self) -> list[dict[str, Any]]:
        """Every startup script, page by page (see :data:`SCRIPTS_PAGE`): one page would
        show a sweep at most ten scripts."""
        found: list[dict[str, Any]] = []
        page = 1
        while True:
            params = {"page": page, "pageSize": SCRIPTS_PAGE}
            response = self._request("list startup scripts", "GET", "/scripts", params=params, ok=(200,))
            try:
                items = response.json()
            except ValueError:
                raise VerdaAPIError("list startup scripts", 200, "bad_response", "the response is not JSON")
            items = items if isinstance(items, list) else []
            found += items
            total = response.headers.get("X-Total-Count")
            more = len(found) < int(total) if total and total.isdigit() else len(items) >= SCRIPTS_PAGE
            if not items or not more:
                return found
            page += 1

    def delete_script(self, script_id: str) -> None:
        self._delete(f"delete startup script {script_id}", f"/scripts/{quote(script_id, safe='')}")

    def _delete(self, action: str, path: str) -> None:
        try:
            self._request(action, "DELETE", path)
        except VerdaAPIError as exc:
            if exc.status != 404:  # already gone counts as done
                raise

    # -- instances ----------------------------------------------------------------------

    def deploy(self, body: Mapping[str, Any]) -> str:
        response = self._request(f"deploy instance {body.get('hostname')}", "POST", "/instances", body=dict(body))
        return self._id_of("deploy instance", response)

    def instance(self, instance_id: str) -> dict[str, Any] | None:
        """The instance, or None once it no longer exists."""
        try:
            data = self._json(f"get instance {instance_id}", f"/instances/{quote(instance_id, safe='')}")
        except VerdaAPIError as exc:
            if exc.status == 404:
                return None
            raise
        if isinstance(data, list):  # some endpoints answer a one-element list
            data = data[0] if data else None
        return data if isinstance(data, dict) else None

    def instances(self) -> list[dict[str, Any]]:
        return list(self._json("list instances", "/instances"))

    def delete_instances(self, instance_ids: Sequence[str], volume_ids: Sequence[str] = ()) -> list[ActionResult]:
        """Delete the instances and these volumes (their OS disks: kept, they would bill),
        returning each instance's result: a 207 is a partial success, not an error.

        ``delete_permanently`` goes with the volumes: without it they go to the trash,
        restorable for 96 hours (verda CLI: "Deleted storage can be restored within 96
        hours"), and whether the trash bills is not documented. A pool's disks hold
        nothing to restore, so they go for good (verda 1.20.0: "volume_ids will be
        deleted in one go, skipping trash")."""
        body: dict[str, Any] = {"id": list(instance_ids), "action": "delete"}
        if volume_ids:  # omitted, the API's default applies (the Go SDK: "OS volume deleted"); [] would keep it
            body["volume_ids"] = list(volume_ids)
            body["delete_permanently"] = True
        action = f"delete instances {', '.join(instance_ids)}"
        try:
            response = self._request(action, "PUT", "/instances", body=body, ok=(200, 202, 204, 207))
        except VerdaAPIError as exc:
            if exc.status != 404:
                raise
            return [ActionResult(i, True) for i in instance_ids]  # gone already
        try:
            answer = response.json() if response.content else None
        except ValueError:
            answer = None
        return action_results(instance_ids, response.status_code, answer)

    def delete_volumes(self, volume_ids: Sequence[str]) -> None:
        """Delete detached volumes for good (``PUT /volumes`` action ``delete`` with
        ``is_permanent``, as verda's ``volumes.delete(..., is_permanent=True)``): the OS
        disk a discontinued spot instance leaves behind (kept detached by default)."""
        body = {"id": list(volume_ids), "action": "delete", "is_permanent": True}
        try:
            self._request(f"delete volumes {', '.join(volume_ids)}", "PUT", "/volumes", body=body)
        except VerdaAPIError as exc:
            if exc.status != 404:
                raise
