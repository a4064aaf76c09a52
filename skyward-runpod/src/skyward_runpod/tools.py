"""skyward-runpod's part of the ``skyward`` command: ls, down, offers, doctor."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.cli.model import CredentialCheck, Offer, OfferQuery, ProviderTools, Removal, Resource
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.http import APIError
from skyward_runpod import resources
from skyward_runpod.api import RunPodAPI
from skyward_runpod.config import KEY_ENV, RunPod, api_key


class RunPodSession:
    provider = resources.PROVIDER

    def __init__(self, config: RunPod) -> None:
        self.config = config
        self._api: RunPodAPI | None = None

    @property
    def region(self) -> str:
        return self.config.cloud

    @property
    def api(self) -> RunPodAPI:
        if self._api is None:
            self._api = RunPodAPI(self.config)
        return self._api

    def check(self) -> CredentialCheck:
        fix = f"create an API key (Settings > API Keys in the RunPod console) and export {KEY_ENV}"
        try:
            api_key()
        except ConfigurationError:
            return CredentialCheck(self.provider, False, False, f"{KEY_ENV} is not set", fix)
        try:
            self.api.pods()  # a read that changes nothing
        except APIError as error:
            return CredentialCheck(self.provider, True, False, str(error), fix)
        return CredentialCheck(self.provider, True, True, f"key from {KEY_ENV} accepted")

    def resources(self) -> list[Resource]:
        try:
            return resources.list_all(self.api)
        except APIError as error:
            raise ProvisioningError(f"while listing Skyward pods on RunPod: {error}") from error

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        try:
            return resources.delete_and_verify(self.api, items)
        except APIError as error:
            raise ProvisioningError(f"while terminating Skyward pods on RunPod: {error}") from error

    def offers(self, query: OfferQuery) -> list[Offer]:
        from skyward.cli.offers import offers_from
        from skyward_runpod.offers import default_size, pod_types

        vcpus, memory = default_size(None, None)
        try:
            types = pod_types(self.api.gpu_types(), self.config.cloud, vcpus, memory, self.config.bid_margin)
        except APIError as error:
            raise ProvisioningError(f"while listing RunPod GPU types: {error}") from error
        return offers_from(self.provider, [t.instance for t in types], query)


def open_session(config: object | None) -> RunPodSession:
    config = RunPod() if config is None else config
    if not isinstance(config, RunPod):
        raise ConfigurationError(f"the runpod tools take a RunPod(...) configuration, got {config!r}")
    return RunPodSession(config)


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-runpod", open=open_session)
