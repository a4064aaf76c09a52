"""The RunPod API client against the fake: which failures are repeated (a deploy never,
after a server error: a second pod would bill), and that the key stays out of errors."""

from __future__ import annotations

import pytest
from fakes.runpod import API_KEY, FakeRunPod

from skyward.providers.cloud.http import APIError
from skyward_runpod import RunPod
from skyward_runpod.api import RunPodAPI

pytestmark = pytest.mark.cloud

POD = {
    "cloudType": "SECURE", "gpuTypeId": "NVIDIA RTX A6000", "gpuCount": 1, "name": "skyward-p-2000000000-0",
    "imageName": "img", "dockerArgs": "bash -c 'echo IyEvYmluL3NoCg== | base64 -d > /root/x && exec /root/x'",
    "ports": "16789/tcp",
}  # fmt: skip


def _api(config: RunPod) -> RunPodAPI:
    return RunPodAPI(config, sleep=lambda _s: None)


def test_a_server_error_on_a_read_is_repeated_but_never_on_a_deploy(fake: FakeRunPod, config: RunPod) -> None:
    api = _api(config)
    fake.fail("POST", "/graphql", 502, {"errors": [{"message": "bad gateway"}]}, times=1, process=True)
    assert api.pods() == []  # repeated after the 502
    fake.fail("POST", "/graphql", 502, {"errors": [{"message": "bad gateway"}]}, times=1, process=True)
    with pytest.raises(APIError, match="502"):
        api.deploy(dict(POD), spot=False)
    assert len(fake.pods) == 1  # the server made it once; it was not asked again
    assert fake.count("POST", "/graphql", 502) == 2


def test_a_refused_key_is_an_error_that_does_not_show_the_key(fake: FakeRunPod, config: RunPod) -> None:
    api = RunPodAPI(config, key="rpa_WRONGWRONGWRONG")
    with pytest.raises(APIError, match="401") as caught:
        api.gpu_types()
    assert "rpa_WRONG" not in str(caught.value) and API_KEY not in str(caught.value)


def test_graphql_errors_become_api_errors_with_the_message(fake: FakeRunPod, config: RunPod) -> None:
    fake.no_capacity(spot=False)
    with pytest.raises(APIError, match="no longer any instances available"):
        _api(config).deploy(dict(POD), spot=False)
