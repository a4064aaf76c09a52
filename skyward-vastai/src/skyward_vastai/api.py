"""The VastAI REST calls the provider makes (``https://console.vast.ai/api/v0``).

Over requests (``skyward.providers.cloud.http.JsonAPI``) rather than the ``vastai``
package: that package is the CLI's code, which prints its results to stdout (a library's
output goes to stderr here) and returns what the CLI would print, and the versions we read
put the key into the URL's query string, where proxies and server logs keep it. Here the
key travels only in the ``Authorization`` header.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skyward.providers.cloud.http import APIError, JsonAPI
from skyward_vastai.config import VastAI, api_key

PROVIDER = "VastAI"


class VastAPI:
    def __init__(self, config: VastAI, key: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.http = JsonAPI.for_cloud(PROVIDER, config, config.api_url, api_key() if key is None else key, sleep)

    def close(self) -> None:
        self.http.close()

    def search(self, query: dict[str, Any]) -> list[dict[str, Any]]:
        answer = self.http.call("search offers", "POST", "/bundles/", body=query, ok=(200,))
        return list((answer or {}).get("offers") or [])

    def rent(self, offer_id: int, body: dict[str, Any]) -> str:
        """Rent ``offer_id``; returns the new instance's id (VastAI's "contract")."""
        answer = self.http.call(f"rent offer {offer_id}", "PUT", f"/asks/{offer_id}/", body=body, ok=(200,))
        if not isinstance(answer, dict) or not answer.get("success") or "new_contract" not in answer:
            raise APIError(PROVIDER, f"rent offer {offer_id}", 200, str((answer or {}).get("msg") or answer))
        return str(answer["new_contract"])

    def instances(self) -> list[dict[str, Any]]:
        answer = self.http.call("list instances", "GET", "/instances/", params={"owner": "me"}, ok=(200,))
        return list((answer or {}).get("instances") or [])

    def destroy(self, instance_id: str) -> None:
        """Destroy (not stop: a stopped instance bills its disk); already gone is done."""
        try:
            self.http.call(f"destroy instance {instance_id}", "DELETE", f"/instances/{instance_id}/", ok=(200,))
        except APIError as error:
            if error.status != 404:
                raise
