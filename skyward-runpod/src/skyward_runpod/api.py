"""The RunPod GraphQL calls the provider makes (``https://api.runpod.io/graphql``).

Over requests (``skyward.providers.cloud.http.JsonAPI``) rather than the ``runpod``
package: its GraphQL wrapper reads a module-global key, sends it in the URL's query
string (``?api_key=``, kept by proxies and server logs) and posts to a fixed
``api.runpod.io`` address, so it can be pointed neither at a test server nor at a key
per pool. Here the key travels only in the ``Authorization`` header.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from skyward.providers.cloud.http import APIError, JsonAPI
from skyward_runpod.config import RunPod, api_key

PROVIDER = "RunPod"

GPU_TYPES = """query GpuTypes { gpuTypes { id displayName memoryInGb maxGpuCount secureCloud communityCloud
  securePrice communityPrice secureSpotPrice communitySpotPrice } }"""
PODS = """query Pods { myself { pods { id name desiredStatus costPerHr imageName
  runtime { ports { ip isIpPublic privatePort publicPort type } } } } }"""
DEPLOY = """mutation Deploy($input: PodFindAndDeployOnDemandInput) {
  podFindAndDeployOnDemand(input: $input) { id desiredStatus } }"""
DEPLOY_SPOT = """mutation DeploySpot($input: PodRentInterruptableInput!) {
  podRentInterruptable(input: $input) { id desiredStatus } }"""
TERMINATE = """mutation Terminate($input: PodTerminateInput!) { podTerminate(input: $input) }"""


class RunPodAPI:
    def __init__(self, config: RunPod, key: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.http = JsonAPI.for_cloud(PROVIDER, config, config.api_url, api_key() if key is None else key, sleep)

    def close(self) -> None:
        self.http.close()

    def _graphql(self, action: str, query: str, variables: dict[str, Any] | None = None, *, safe: bool) -> Any:
        """One GraphQL request; ``safe`` ones (reads, terminate) are repeated after a
        server error like a GET, a deploy never (a second pod would bill)."""
        body = {"query": query, "variables": variables or {}}
        answer = self.http.call(action, "POST", "", body=body, ok=(200,), retry_as="GET" if safe else "POST")
        if not isinstance(answer, dict):
            raise APIError(PROVIDER, action, 200, "the answer is not a GraphQL response")
        if answer.get("errors"):
            raise APIError(PROVIDER, action, 200, "; ".join(str(e.get("message")) for e in answer["errors"]))
        return answer.get("data") or {}

    def gpu_types(self) -> list[dict[str, Any]]:
        return list(self._graphql("list GPU types", GPU_TYPES, safe=True).get("gpuTypes") or [])

    def pods(self) -> list[dict[str, Any]]:
        return list((self._graphql("list pods", PODS, safe=True).get("myself") or {}).get("pods") or [])

    def deploy(self, pod: dict[str, Any], spot: bool) -> str:
        query, field = (DEPLOY_SPOT, "podRentInterruptable") if spot else (DEPLOY, "podFindAndDeployOnDemand")
        data = self._graphql(f"deploy pod {pod.get('name')}", query, {"input": pod}, safe=False)
        made = data.get(field) or {}
        if not made.get("id"):
            raise APIError(PROVIDER, f"deploy pod {pod.get('name')}", 200, "the answer holds no pod id")
        return str(made["id"])

    def terminate(self, pod_id: str) -> None:
        """Terminate (not stop: a stopped pod bills its disk); already gone is done."""
        try:
            self._graphql(f"terminate pod {pod_id}", TERMINATE, {"input": {"podId": pod_id}}, safe=True)
        except APIError as error:
            if "not found" not in error.api_message.lower():
                raise
