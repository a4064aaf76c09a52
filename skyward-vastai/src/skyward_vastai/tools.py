"""skyward-vastai's part of the ``skyward`` command: ls, down, offers, doctor."""

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
from skyward_vastai import resources
from skyward_vastai.api import VastAPI
from skyward_vastai.config import KEY_ENV, VastAI, api_key
from skyward_vastai.offers import parse_offers, search_query


class VastAISession:
    provider = resources.PROVIDER
    region = "marketplace"

    def __init__(self, config: VastAI) -> None:
        self.config = config

    @cached_property
    def api(self) -> VastAPI:
        """Made on first use: check() looks for the key first."""
        return VastAPI(self.config)

    def check(self) -> CredentialCheck:
        return credential_check(
            self.provider,
            find=api_key,
            # a read that changes nothing, with few retries (for_one_check); made once the credentials are found
            read=lambda: VastAPI(for_one_check(self.config)).instances(),
            error=APIError,
            missing=f"no key in {KEY_ENV} or the vastai CLI's key file",
            accepted="API key accepted",
            fix=f"export {KEY_ENV} or run `vastai set api-key <key>` (Account > Keys in the VastAI console)",
        )

    def resources(self) -> list[Resource]:
        with reported_as("listing Skyward instances on VastAI", APIError):
            return resources.list_all(self.api)

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        with reported_as("destroying Skyward instances on VastAI", APIError):
            return resources.delete_and_verify(self.api, items)

    def offers(self, query: OfferQuery) -> list[Offer]:
        with reported_as("searching VastAI offers", APIError):
            found = parse_offers(self.api.search(search_query(self.config, query.count)), self.config.bid_margin)
        return offers_from(self.provider, [o.instance for o in found], query)


def open_session(config: object | None) -> VastAISession:
    return VastAISession(config_for(config, VastAI, resources.PROVIDER))


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-vastai", open=open_session)
