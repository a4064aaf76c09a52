"""The fake RunPod API refuses what RunPod's SDK and docs document as invalid, one test per
rule (the sources are in tests/fakes/runpod.py); GraphQL refusals come back as RunPod
answers them: HTTP 200 with ``errors``."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from fakes.runpod import API_KEY, FakeRunPod

from skyward_runpod.api import DEPLOY, DEPLOY_SPOT, GPU_TYPES, TERMINATE

pytestmark = pytest.mark.cloud

AUTH = {"Authorization": f"Bearer {API_KEY}"}
GOOD: dict[str, Any] = {
    "cloudType": "SECURE", "gpuTypeId": "NVIDIA RTX A6000", "gpuCount": 1, "name": "skyward-p-2000000000-0",
    "imageName": "img", "dockerArgs": "bash -c true", "ports": "16789/tcp,16790/tcp", "containerDiskInGb": 32,
    "volumeInGb": 0, "minVcpuCount": 8, "minMemoryInGb": 32, "supportPublicIp": True, "startSsh": False,
}  # fmt: skip


def _post(fake: FakeRunPod, query: str, variables: dict[str, Any], headers: dict[str, str] = AUTH) -> Any:
    return requests.post(f"{fake.url}/graphql", json={"query": query, "variables": variables}, headers=headers,
                         timeout=10)  # fmt: skip


def _refused(fake: FakeRunPod, response: requests.Response) -> str:
    assert response.status_code == 200, response.text  # GraphQL: errors travel in a 200
    body = response.json()
    assert body["data"] is None and body["errors"], body
    assert fake.violations, "the fake answered an error without recording a violation"
    fake.violations.clear()
    return str(body["errors"][0]["message"])


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"name": None}, "name is required"),  # SDK "Required Fields"
        ({"imageName": None}, "imageName is required"),  # SDK "Required Fields"
        ({"cloudType": None}, "cloudType None"),  # SDK "Required Fields"
        ({"cloudType": "secure"}, "cloudType 'secure'"),  # SDK: ALL, COMMUNITY or SECURE
        ({"gpuTypeId": "NVIDIA GTX 9999"}, "unknown gpuTypeId"),
        ({"gpuCount": 0}, "gpuCount is required"),
        ({"containerDiskInGb": 31.5}, "containerDiskInGb is a whole number"),
        ({"ports": "16789/tcp, 16790/tcp"}, "is not 'N/tcp,...'"),  # SDK removes spaces
        ({"ports": "16789"}, "is not 'N/tcp,...'"),
        ({"dockerArgs": ["bash", "-c", "true"]}, "dockerArgs is a string"),
        ({"env": {"A": "1"}}, "env is a list of {key, value}"),  # SDK: env: [{ key, value }]
        ({"bidPerGpu": 0.5}, "bidPerGpu goes with podRentInterruptable"),
        ({"containerDisk": 32}, "unknown pod input fields"),
    ],
)
def test_a_pod_input_runpod_refuses_is_refused(fake: FakeRunPod, change: dict[str, Any], why: str) -> None:
    pod = {k: v for k, v in {**GOOD, **change}.items() if v is not None}  # None: the field left out
    assert fake.deploy_problem(GOOD, spot=False) == ""  # the same input without the change is accepted
    assert why in _refused(fake, _post(fake, DEPLOY, {"input": pod}))
    assert not fake.pods


def test_a_spot_pod_without_a_bid_is_refused(fake: FakeRunPod) -> None:
    assert "bidPerGpu" in _refused(fake, _post(fake, DEPLOY_SPOT, {"input": GOOD}))
    assert fake.deploy_problem({**GOOD, "bidPerGpu": 0.3}, spot=True) == ""


def test_a_terminate_without_a_pod_id_is_refused(fake: FakeRunPod) -> None:
    assert "podTerminate takes {podId}" in _refused(fake, _post(fake, TERMINATE, {"input": {"id": "x"}}))


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": API_KEY}])
def test_a_call_without_the_bearer_key_is_unauthorized(fake: FakeRunPod, headers: dict[str, str]) -> None:
    assert _post(fake, GPU_TYPES, {}, headers).status_code == 401  # SDK graphql.py: "Authorization: Bearer <key>"


def test_a_long_docker_args_is_accepted_as_runpod_documents_no_limit(fake: FakeRunPod) -> None:
    answer = _post(fake, DEPLOY, {"input": {**GOOD, "dockerArgs": "bash -c " + "x" * 20_000}}).json()
    assert answer["data"]["podFindAndDeployOnDemand"]["id"] in fake.pods
