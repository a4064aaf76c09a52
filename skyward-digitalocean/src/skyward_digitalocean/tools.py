"""skyward-digitalocean's part of the ``skyward`` command."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.providers import (
    AccountCheck,
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
from skyward.providers.cloud.addresses import client_address, firewall_source
from skyward.providers.cloud.retry import Backoff
from skyward_digitalocean import resources
from skyward_digitalocean.api import DigitalOceanAPI, DigitalOceanAPIError, make_client
from skyward_digitalocean.config import TOKEN_ENV, DigitalOcean, token_from_env
from skyward_digitalocean.firewall import firewall_body, firewall_problems
from skyward_digitalocean.naming import pool_tag, resource_name
from skyward_digitalocean.offers import parse_sizes


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
            self._api = self._api_for(self.config)
        return self._api

    @staticmethod
    def _api_for(config: DigitalOcean) -> DigitalOceanAPI:
        backoff = Backoff(attempts=config.api_retries, base=config.api_backoff)
        return DigitalOceanAPI(make_client(config, token_from_env()), backoff)

    def check(self) -> CredentialCheck:
        return credential_check(
            self.provider,
            find=token_from_env,
            # a read that changes nothing, with few retries (for_one_check); made once the credentials are found
            read=lambda: self._api_for(for_one_check(self.config)).ssh_keys(),
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
        if query.spot:
            return []  # DigitalOcean has no spot market
        with reported_as("listing DigitalOcean sizes", DigitalOceanAPIError):
            sizes = parse_sizes(self.api.sizes(), self.config.region)
        return offers_from(self.provider, [s.instance for s in sizes if s.instance.available], query)

    def account_checks(self) -> list[AccountCheck]:
        """The account's state and droplet limit (``GET /v2/account``; every droplet
        counted, GPU ones too), the configured region against the regions DigitalOcean
        offers sizes in, and the firewall a pool would send against DO's documented rules."""
        with reported_as("checking the DigitalOcean account", DigitalOceanAPIError):
            account = self.api.account()
            used = len(self.api.all_droplets())
            sizes = parse_sizes(self.api.sizes(), self.config.region)
        name = self.provider
        status = str(account.get("status", "?"))
        checks = [
            AccountCheck(
                name, "account status", status == "active", f"{status} {account.get('status_message') or ''}".strip(),
                "resolve the account's state in the DigitalOcean control panel (Billing, or the notice it shows)",
            )
        ]  # fmt: skip
        limit = account.get("droplet_limit")
        if isinstance(limit, int):
            checks.append(
                AccountCheck(
                    name, "droplet limit", used < limit, f"{used} of {limit} droplets in use",
                    "delete droplets you no longer need or ask DigitalOcean to raise the limit (Settings > Limits)",
                )
            )  # fmt: skip
        offered = sorted({r for s in sizes for r in s.regions})
        region = self.config.region
        here = sum(s.instance.available for s in sizes)
        checks.append(
            AccountCheck(
                name, "region", region in offered, f"{region}: {here} sizes offered",
                f"use DigitalOcean(region=...) one of: {', '.join(offered) or 'none listed'}",
            )
        )  # fmt: skip
        sample = firewall_body(resource_name("sky-doctor", 1), pool_tag("sky-doctor", 1), "203.0.113.7/32", (1, 2))
        problems = firewall_problems(sample)
        checks.append(
            AccountCheck(
                name, "firewall rule shape", not problems,
                "; ".join(problems) or "every rule has protocol, ports and a source or destination",
                "upgrade skyward-digitalocean (its firewall breaks DigitalOcean's documented rules)",
            )
        )  # fmt: skip
        return checks

    def client_address(self) -> str:
        c = self.config
        return firewall_source(client_address(c.client_address, c.address_url, c.api_timeout, "DigitalOcean"))


def open_session(config: object | None) -> DigitalOceanSession:
    return DigitalOceanSession(config_for(config, DigitalOcean, resources.PROVIDER))


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-digitalocean", open=open_session)
