"""skyward-verda's part of the ``skyward`` command."""

from __future__ import annotations

import dataclasses
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
from skyward_verda import resources
from skyward_verda.api import SCRIPTS_QUOTA, VerdaAPI, VerdaAPIError
from skyward_verda.config import CLIENT_ID_ENV, CLIENT_SECRET_ENV, Verda, credentials_from_env
from skyward_verda.offers import parse_instance_types


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
        return credential_check(
            self.provider,
            find=credentials_from_env,
            # a read that changes nothing (and gets a token), with few retries (for_one_check)
            read=lambda: VerdaAPI.from_config(for_one_check(self.config), *credentials_from_env()).ssh_keys(),
            error=VerdaAPIError,
            missing=lambda error: str(error).split(" (")[0],
            accepted=f"client {CLIENT_ID_ENV} accepted",
            fix=(
                "create API credentials (Keys > Cloud API credentials) "
                f"and export {CLIENT_ID_ENV} and {CLIENT_SECRET_ENV}"
            ),
        )

    def resources(self) -> list[Resource]:
        with reported_as("listing Skyward resources on Verda", VerdaAPIError):
            return resources.list_all(self.api)

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        with reported_as("deleting Skyward resources on Verda", VerdaAPIError):
            return resources.delete_and_verify(self.api, items)

    def offers(self, query: OfferQuery) -> list[Offer]:
        with reported_as("listing Verda instance types", VerdaAPIError):
            types = parse_instance_types(self.api.instance_types())
        region = self.config.region or "any"
        instances = [dataclasses.replace(t.instance, region=region) for t in types]
        return offers_from(self.provider, instances, query)

    def account_checks(self) -> list[AccountCheck]:
        """The balance (``GET /balance``: deploys fail on an empty one) and the startup
        scripts against Verda's per-project quota (100 by default: API change notes,
        2026-03-30), since a pool adds one script per node."""
        with reported_as("checking the Verda account", VerdaAPIError):
            balance = self.api.balance()
            scripts = len(self.api.scripts())
        amount, currency = balance.get("amount"), str(balance.get("currency") or "").upper()
        funded = isinstance(amount, int | float) and amount > 0
        return [
            AccountCheck(
                self.provider, "balance", funded, f"{amount} {currency}".strip(),
                "add credit in the Verda console (Billing): a deploy needs a positive balance",
            ),
            AccountCheck(
                self.provider, "startup scripts", scripts < SCRIPTS_QUOTA,
                f"{scripts} of {SCRIPTS_QUOTA} (Verda's default quota; a pool adds one per node)",
                "delete startup scripts you no longer need (skyward down removes Skyward's)",
            ),
        ]  # fmt: skip

    def client_address(self) -> str:
        c = self.config
        return firewall_source(client_address(c.client_address, c.address_url, c.api_timeout, "Verda"))


def open_session(config: object | None) -> VerdaSession:
    return VerdaSession(config_for(config, Verda, resources.PROVIDER))


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-verda", open=open_session)
