"""skyward-verda's part of the ``skyward`` command."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.cli.model import CredentialCheck, Offer, OfferQuery, ProviderTools, Removal, Resource
from skyward.errors import ConfigurationError, ProvisioningError
from skyward_verda import resources
from skyward_verda.api import VerdaAPI, VerdaAPIError
from skyward_verda.config import CLIENT_ID_ENV, CLIENT_SECRET_ENV, Verda, credentials_from_env


class VerdaSession:
    """The Verda account of ``VERDA_CLIENT_ID`` / ``VERDA_CLIENT_SECRET``."""

    provider = resources.PROVIDER

    def __init__(self, config: Verda) -> None:
        self.config = config
        self._api: VerdaAPI | None = None

    @property
    def region(self) -> str:
        return self.config.region or "any"

    @property
    def api(self) -> VerdaAPI:
        if self._api is None:
            client_id, secret = credentials_from_env()
            self._api = VerdaAPI.from_config(self.config, client_id, secret)
        return self._api

    def check(self) -> CredentialCheck:
        fix = (
            f"create API credentials (Keys > Cloud API credentials) and export {CLIENT_ID_ENV} and {CLIENT_SECRET_ENV}"
        )
        try:
            credentials_from_env()
        except ConfigurationError as error:
            return CredentialCheck(self.provider, False, False, str(error).split(" (")[0], fix)
        try:
            self.api.ssh_keys()  # a read that changes nothing (and gets a token)
        except VerdaAPIError as error:
            return CredentialCheck(self.provider, True, False, str(error), fix)
        return CredentialCheck(self.provider, True, True, f"client {CLIENT_ID_ENV} accepted")

    def resources(self) -> list[Resource]:
        try:
            return resources.list_all(self.api)
        except VerdaAPIError as error:
            raise ProvisioningError(f"while listing Skyward resources on Verda: {error}") from error

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        try:
            return resources.delete_and_verify(self.api, items)
        except VerdaAPIError as error:
            raise ProvisioningError(f"while deleting Skyward resources on Verda: {error}") from error

    def offers(self, query: OfferQuery) -> list[Offer]:
        import dataclasses

        from skyward.cli.offers import offers_from
        from skyward_verda.offers import parse_instance_types

        try:
            types = parse_instance_types(self.api.instance_types())
        except VerdaAPIError as error:
            raise ProvisioningError(f"while listing Verda instance types: {error}") from error
        region = self.config.region or "any"
        instances = [dataclasses.replace(t.instance, region=region) for t in types]
        return offers_from(self.provider, instances, query)

    def client_address(self) -> str:
        from skyward.providers.cloud.addresses import client_address, firewall_source

        c = self.config
        return firewall_source(client_address(c.client_address, c.address_url, c.api_timeout, "Verda"))


def open_session(config: object | None) -> VerdaSession:
    config = Verda() if config is None else config
    if not isinstance(config, Verda):
        raise ConfigurationError(f"the verda tools take a Verda(...) configuration, got {config!r}")
    return VerdaSession(config)


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-verda", open=open_session)
