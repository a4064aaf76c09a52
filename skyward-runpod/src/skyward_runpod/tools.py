"""skyward-runpod's part of the ``skyward`` command: ls, down, offers, doctor."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property

from skyward.providers import (
    CredentialCheck,
    Offer,
    OfferQuery,
    ProviderTools,
    Removal,
    Resource,
    config_for,
    credential_check,
    for_one_check,
    offers_from,
    reported_as,
)
from skyward.providers.cloud.http import APIError
from skyward_runpod import resources
from skyward_runpod.api import RunPodAPI
from skyward_runpod.config import KEY_ENV, RunPod, api_key
from skyward_runpod.offers import default_size, pod_types


class RunPodSession:
    provider = resources.PROVIDER

    def __init__(self, config: RunPod) -> None:
        self.config = config

    @property
    def region(self) -> str:
        return self.config.cloud

    @cached_property
    def api(self) -> RunPodAPI:
        """Made on first use: check() looks for the key first."""
        return RunPodAPI(self.config)

    def check(self) -> CredentialCheck:
        return credential_check(
            self.provider,
            find=api_key,
            # a read that changes nothing, with few retries (for_one_check); made once the credentials are found
            read=lambda: RunPodAPI(for_one_check(self.config)).pods(),
            error=APIError,
            missing=f"{KEY_ENV} is not set",
            accepted=f"key from {KEY_ENV} accepted",
            fix=f"create an API key (Settings > API Keys in the RunPod console) and export {KEY_ENV}",
        )

    def resources(self) -> list[Resource]:
        with reported_as("listing Skyward pods on RunPod", APIError):
            return resources.list_all(self.api)

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        with reported_as("terminating Skyward pods on RunPod", APIError):
            return resources.delete_and_verify(self.api, items)

    def offers(self, query: OfferQuery) -> list[Offer]:
        vcpus, memory = default_size(None, None)
        with reported_as("listing RunPod GPU types", APIError):
            types = pod_types(self.api.gpu_types(), self.config.cloud, vcpus, memory, self.config.bid_margin)
        return offers_from(self.provider, [t.instance for t in types], query)


def open_session(config: object | None) -> RunPodSession:
    return RunPodSession(config_for(config, RunPod, resources.PROVIDER))


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-runpod", open=open_session)
