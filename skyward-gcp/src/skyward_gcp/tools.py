"""skyward-gcp's part of the ``skyward`` command: ``ls``, ``down``, ``offers``, ``doctor``."""

from __future__ import annotations

from collections.abc import Sequence

from skyward.errors import ConfigurationError
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
from skyward_gcp import resources
from skyward_gcp.api import GcpAPI, GcpAPIError
from skyward_gcp.catalog import catalog
from skyward_gcp.config import GCP
from skyward_gcp.credentials import CREDENTIALS_ENV, HOW_TO, find_credentials
from skyward_gcp.firewall import firewall_bodies, firewall_problems
from skyward_gcp.naming import firewall_name, label_problems, pool_labels

REQUIRED_APIS = (
    ("compute", "Compute Engine API (compute.googleapis.com)"),
    ("tpu", "Cloud TPU API (tpu.googleapis.com)"),
)


class GCPSession:
    """The project of the credentials, through the provider's own API wrapper."""

    provider = resources.PROVIDER

    def __init__(self, config: GCP) -> None:
        self.config = config
        self._api: GcpAPI | None = None

    @property
    def region(self) -> str:
        return self.config.the_region

    @property
    def api(self) -> GcpAPI:
        if self._api is None:
            self._api = GcpAPI(self.config)
        return self._api

    def check(self) -> CredentialCheck:
        return credential_check(
            self.provider,
            find=lambda: find_credentials(self.config),
            read=lambda: GcpAPI(for_one_check(self.config)).zones(self.config.the_region),
            error=GcpAPIError,
            missing=f"no credentials (GCP(credentials_file=...), {CREDENTIALS_ENV} or application default credentials)",
            accepted="Google Cloud credentials accepted",
            fix=HOW_TO,
            host="compute.googleapis.com",
        )

    def resources(self) -> list[Resource]:
        with reported_as("listing Skyward resources on Google Cloud", GcpAPIError):
            return resources.list_all(self.api, self.api.zones(self.config.the_region))

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        with reported_as("deleting Skyward resources on Google Cloud", GcpAPIError):
            return resources.delete_and_verify(self.api, items, self.api.zones(self.config.the_region))

    def offers(self, query: OfferQuery) -> list[Offer]:
        """From the catalog shipped in the package (no API call)."""
        region = self.config.the_region
        instances = [i for i in catalog().instances(region) if i.available]
        return offers_from(self.provider, instances, query)

    def account_checks(self) -> list[AccountCheck]:
        """The project, the APIs a pool calls (Compute Engine; Cloud TPU for TPU pools), the
        region's zones, and the shapes of the firewall rules and labels a pool would send."""
        name = self.provider
        checks: list[AccountCheck] = []
        try:
            api = self.api
        except ConfigurationError as exc:
            return [AccountCheck(name, "project", False, str(exc), "give GCP(project=...)")]
        checks.append(AccountCheck(name, "project", True, f"{api.project} (credentials: {api.source})"))
        region = self.config.the_region
        try:
            zones = api.zones(region)
            checks.append(
                AccountCheck(
                    name, "Compute Engine API", bool(zones), f"enabled; {region}: {', '.join(zones) or 'no zone up'}",
                    "use GCP(region=...) a region of your project (`gcloud compute regions list`)",
                )
            )  # fmt: skip
        except GcpAPIError as exc:
            checks.append(
                AccountCheck(
                    name, "Compute Engine API", False, str(exc),
                    f"enable it: gcloud services enable compute.googleapis.com --project {api.project}",
                )
            )  # fmt: skip
            zones = []
        if zones:
            try:
                api.tpus(zones[0])
                checks.append(AccountCheck(name, "Cloud TPU API", True, "enabled"))
            except GcpAPIError as exc:
                checks.append(
                    AccountCheck(
                        name, "Cloud TPU API", False, str(exc),
                        f"needed for TPU pools only: gcloud services enable tpu.googleapis.com --project {api.project}",
                    )
                )  # fmt: skip
        bodies = firewall_bodies(
            firewall_name("sky-doctor", 1_000_000_000, "client"), firewall_name("sky-doctor", 1_000_000_000, "pool"),
            self.config.network, "sky-doctor", "203.0.113.7/32", (1, 2),
        )  # fmt: skip
        problems = [p for b in bodies for p in firewall_problems(b)] + label_problems(pool_labels("sky-doctor", 1, 0))
        checks.append(
            AccountCheck(
                name, "firewall rule and label shape", not problems,
                "; ".join(problems) or "both rules target the pool's tag; labels follow Google's rules",
                "upgrade skyward-gcp (its requests break Google's documented rules)",
            )
        )  # fmt: skip
        return checks

    def client_address(self) -> str:
        c = self.config
        return firewall_source(client_address(c.client_address, c.address_url, c.api_timeout, "GCP"))


def open_session(config: object | None) -> GCPSession:
    return GCPSession(config_for(config, GCP, resources.PROVIDER))


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-gcp", open=open_session)
