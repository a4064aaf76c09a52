"""skyward-digitalocean's part of the ``skyward`` command."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.providers import (
    CredentialCheck,
    Offer,
    OfferQuery,
    ProviderTools,
    Removal,
    Resource,
    config_for,
    credential_check,
    reported_as,
)
from skyward.providers.cloud.retry import Backoff
from skyward_digitalocean import resources
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError, make_client
from skyward_digitalocean.config import TOKEN_ENV, DigitalOcean, token_from_env


class DigitalOceanSession:
    """The account of ``DIGITALOCEAN_TOKEN``, through the provider's own API client."""

    provider = resources.PROVIDER

    def __init__(self, config: DigitalOcean) -> None:
        self.config = config
        self._api: DigitalOceanAPI | None = None

    @property
    def region(self) -> str:
        return self.config.region

    @property
    def api(self) -> DigitalOceanAPI:
        if self._api is None:
            backoff = Backoff(attempts=self.config.api_retries, base=self.config.api_backoff)
            self._api = DigitalOceanAPI(make_client(self.config, token_from_env()), backoff)
        return self._api

    def check(self) -> CredentialCheck:
        return credential_check(
            self.provider,
            find=token_from_env,
            # a read that changes nothing; a lambda: the api is made only once the credentials are found
            read=lambda: self.api.ssh_keys(),  # noqa: PLW0108
            error=DigitalOceanAPIError,
            missing=f"{TOKEN_ENV} is not set",
            accepted=f"token from {TOKEN_ENV} accepted",
            fix=f"create an API token (API > Tokens in the control panel) and export {TOKEN_ENV}",
        )

    def resources(self) -> list[Resource]:
        with reported_as("listing Skyward resources on DigitalOcean", DigitalOceanAPIError):
            return resources.list_all(self.api)

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        with reported_as("deleting Skyward resources on DigitalOcean", DigitalOceanAPIError):
            return resources.delete_and_verify(self.api, items)

    def offers(self, query: OfferQuery) -> list[Offer]:
        from skyward.providers import offers_from
        from skyward_digitalocean.offers import parse_sizes

        if query.spot:
            return []  # DigitalOcean has no spot market
        with reported_as("listing DigitalOcean sizes", DigitalOceanAPIError):
            sizes = parse_sizes(self.api.sizes(), self.config.region)
        return offers_from(self.provider, [s.instance for s in sizes if s.instance.available], query)

    def client_address(self) -> str:
        from skyward.providers.cloud.addresses import client_address, firewall_source

        c = self.config
        return firewall_source(client_address(c.client_address, c.address_url, c.api_timeout, "DigitalOcean"))


def open_session(config: object | None) -> DigitalOceanSession:
    return DigitalOceanSession(config_for(config, DigitalOcean, resources.PROVIDER))


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-digitalocean", open=open_session)
