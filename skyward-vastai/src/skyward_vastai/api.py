"""The VastAI REST calls the provider makes (``https://console.vast.ai/api/v0`` and ``/api/v1``).

Over requests (``skyward.providers.cloud.http.JsonAPI``) rather than the ``vastai``
package: that package is the CLI's code, which prints its results to stdout (a library's
output goes to stderr here) and returns what the CLI would print, and the versions we read
put the key into the URL's query string, where proxies and server logs keep it. Here the
key travels only in the ``Authorization`` header.

The shapes follow VastAI's published OpenAPI file (``api-reference/openapi.yaml`` and
``api-reference/openapi/yaml/create_instance.yaml`` in github.com/vast-ai/docs, commit
c624622, read 2026-11-25) and the CLI (github.com/vast-ai/vast-cli ``vastai/api/``,
commit 5567983): the instance listing is ``GET /api/v1/instances/``, at most 25 a page
(keyset pagination: ``next_token`` -> ``after_token``, ``null`` on the last page); the
CLI's ``show instances`` reads every page the same way. The old ``GET
/api/v0/instances/?owner=me`` is no longer in the published specification.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from skyward.errors import ConfigurationError
from skyward.providers.cloud.http import APIError, JsonAPI
from skyward_vastai.config import VastAI, api_key

PROVIDER = "VastAI"
PAGE_SIZE = 25
"""``GET /api/v1/instances/``: "Default 25, max 25"."""
_BY_ID = json.dumps([{"col": "id", "dir": "asc"}], separators=(",", ":"))


class OfferTaken(APIError):
    """The offer was rented by someone else (or withdrawn) before this rental: VastAI's
    ``no_such_ask``, documented as 404 (``error 404/3603: no_such_ask ...``) and 410."""


def rent_refusal(offer_id: int, error: APIError) -> Exception:
    """What a refused rental means, from VastAI's documented error body
    ``{"success": false, "error": ..., "msg": ..., "ask_id": ...}``: a taken offer
    (``no_such_ask``, by its code or its message: the documented 404 says
    ``"error": "invalid_args"`` with ``"msg": "error 404/3603: no_such_ask ..."``), a
    request VastAI calls invalid (``invalid_args`` otherwise: a configuration error, not a
    taken offer, and never worth trying another offer), or the API error as it came."""
    message = error.api_message
    if error.api_code == "no_such_ask" or "no_such_ask" in message or error.status in (404, 410):
        return OfferTaken(PROVIDER, error.action, error.status, message, error.api_code)
    if error.api_code == "invalid_args":
        return ConfigurationError(
            f"VastAI refused the rental of offer {offer_id} as invalid (invalid_args, HTTP {error.status}): "
            f"{message}. Skyward builds that request from VastAI(image=..., disk_gb=...) and the pool: check "
            "those, and report it to skyward if they are right"
        )
    return error


class VastAPI:
    def __init__(self, config: VastAI, key: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        key = api_key() if key is None else key
        self.http = JsonAPI.for_cloud(PROVIDER, config, config.api_url, key, sleep)
        v1 = config.api_url.rstrip("/").removesuffix("/api/v0") + "/api/v1"
        self.v1 = JsonAPI.for_cloud(PROVIDER, config, v1, key, sleep)

    def close(self) -> None:
        self.http.close()
        self.v1.close()

    def search(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        answer = self.http.call("search offers", "POST", "/bundles/", body=query, ok=(200,))
        return list((answer or {}).get("offers") or [])

    def rent(self, offer_id: int, body: dict[str, Any]) -> str:
        """Rent ``offer_id``; returns the new instance's id (VastAI's "contract"). Raises
        :class:`OfferTaken`, ``ConfigurationError`` (``invalid_args``) or ``APIError``."""
        action = f"rent offer {offer_id}"
        try:
            answer = self.http.call(action, "PUT", f"/asks/{offer_id}/", body=body, ok=(200,))
        except APIError as error:
            raise rent_refusal(offer_id, error) from None
        if not isinstance(answer, dict) or not answer.get("success") or "new_contract" not in answer:
            raise APIError(PROVIDER, action, 200, str((answer or {}).get("msg") or answer))
        return str(answer["new_contract"])

    def instances(self) -> list[dict[str, Any]]:
        """Every instance of the account: each page of ``GET /api/v1/instances/``, in id
        order, until ``next_token`` is null."""
        found: list[dict[str, Any]] = []
        params: dict[str, Any] = {"limit": PAGE_SIZE, "order_by": _BY_ID}
        tokens: set[str] = set()
        while True:
            answer = self.v1.call("list instances", "GET", "/instances/", params=params, ok=(200,))
            page = answer if isinstance(answer, dict) else {}
            found += list(page.get("instances") or [])
            token = page.get("next_token")
            if not token:
                return found
            if str(token) in tokens:
                raise APIError(PROVIDER, "list instances", 200, f"the listing repeats the page token {token!r}")
            tokens.add(str(token))
            params = {**params, "after_token": str(token)}

    def destroy(self, instance_id: str) -> None:
        """Destroy (not stop: a stopped instance bills its disk); already gone is done."""
        try:
            self.http.call(f"destroy instance {instance_id}", "DELETE", f"/instances/{instance_id}/", ok=(200,))
        except APIError as error:
            if error.status != 404:
                raise
