"""skyward-digitalocean's part of the ``skyward`` command."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.cli.model import CredentialCheck, Offer, OfferQuery, ProviderTools, Removal, Resource
from skyward.errors import ConfigurationError, ProvisioningError
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
        fix = f"create an API token (API > Tokens in the control panel) and export {TOKEN_ENV}"
        try:
            token_from_env()
        except ConfigurationError:
            return CredentialCheck(self.provider, False, False, f"{TOKEN_ENV} is not set", fix)
        try:
            self.api.ssh_keys()  # a read that changes nothing
        except DigitalOceanAPIError as error:
            return CredentialCheck(self.provider, True, False, str(error), fix)
        return CredentialCheck(self.provider, True, True, f"token from {TOKEN_ENV} accepted")

    def _wrap(self, error: DigitalOceanAPIError, doing: str) -> ProvisioningError:
        return ProvisioningError(f"while {doing}: {error}")

    def resources(self) -> list[Resource]:
        try:
            return resources.list_all(self.api)
        except DigitalOceanAPIError as error:
            raise self._wrap(error, "listing Skyward resources on DigitalOcean") from error

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        try:
            return resources.delete_and_verify(self.api, items)
        except DigitalOceanAPIError as error:
            raise self._wrap(error, "deleting Skyward resources on DigitalOcean") from error

    def offers(self, query: OfferQuery) -> list[Offer]:
        from skyward.cli.offers import offers_from
        from skyward_digitalocean.offers import parse_sizes

        if query.spot:
            return []  # DigitalOcean has no spot market
        try:
            sizes = parse_sizes(self.api.sizes(), self.config.region)
        except DigitalOceanAPIError as error:
            raise self._wrap(error, "listing DigitalOcean sizes") from error
        return offers_from(self.provider, [s.instance for s in sizes if s.instance.available], query)

    def client_address(self) -> str:
        from skyward.providers.cloud.addresses import client_address, firewall_source

        c = self.config
        return firewall_source(client_address(c.client_address, c.address_url, c.api_timeout, "DigitalOcean"))


def open_session(config: object | None) -> DigitalOceanSession:
    config = DigitalOcean() if config is None else config
    if not isinstance(config, DigitalOcean):
        raise ConfigurationError(f"the digitalocean tools take a DigitalOcean(...) configuration, got {config!r}")
    return DigitalOceanSession(config)


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-digitalocean", open=open_session)
