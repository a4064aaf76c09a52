"""skyward-vastai's part of the ``skyward`` command: ls, down, offers, doctor."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.cli.model import CredentialCheck, Offer, OfferQuery, ProviderTools, Removal, Resource
from skyward.errors import ConfigurationError, ProvisioningError
from skyward.providers.cloud.http import APIError
from skyward_vastai import resources
from skyward_vastai.api import VastAPI
from skyward_vastai.config import KEY_ENV, VastAI, api_key


class VastAISession:
    provider = resources.PROVIDER
    region = "marketplace"

    def __init__(self, config: VastAI) -> None:
        self.config = config
        self._api: VastAPI | None = None

    @property
    def api(self) -> VastAPI:
        if self._api is None:
            self._api = VastAPI(self.config)
        return self._api

    def check(self) -> CredentialCheck:
        fix = f"export {KEY_ENV} or run `vastai set api-key <key>` (Account > Keys in the VastAI console)"
        try:
            api_key()
        except ConfigurationError:
            return CredentialCheck(
                self.provider, False, False, f"no key in {KEY_ENV} or the vastai CLI's key file", fix
            )
        try:
            self.api.instances()  # a read that changes nothing
        except APIError as error:
            return CredentialCheck(self.provider, True, False, str(error), fix)
        return CredentialCheck(self.provider, True, True, "API key accepted")

    def resources(self) -> list[Resource]:
        try:
            return resources.list_all(self.api)
        except APIError as error:
            raise ProvisioningError(f"while listing Skyward instances on VastAI: {error}") from error

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        try:
            return resources.delete_and_verify(self.api, items)
        except APIError as error:
            raise ProvisioningError(f"while destroying Skyward instances on VastAI: {error}") from error

    def offers(self, query: OfferQuery) -> list[Offer]:
        from skyward.cli.offers import offers_from
        from skyward_vastai.offers import parse_offers, search_query

        try:
            found = parse_offers(self.api.search(search_query(self.config, query.count)), self.config.bid_margin)
        except APIError as error:
            raise ProvisioningError(f"while searching VastAI offers: {error}") from error
        return offers_from(self.provider, [o.instance for o in found], query)


def open_session(config: object | None) -> VastAISession:
    config = VastAI() if config is None else config
    if not isinstance(config, VastAI):
        raise ConfigurationError(f"the vastai tools take a VastAI(...) configuration, got {config!r}")
    return VastAISession(config)


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-vastai", open=open_session)
