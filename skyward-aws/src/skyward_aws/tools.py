"""skyward-aws's part of the ``skyward`` command (``ls``, ``down``, ``offers``, ``doctor``)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from importlib import resources as package_files
from typing import Any

from skyward.errors import ConfigurationError
from skyward.providers import (
    NETWORK_FIX,
    CredentialCheck,
    Offer,
    OfferQuery,
    ProviderTools,
    Removal,
    Resource,
    current_catalog,
    fits,
    offers_from,
    parse_accelerator,
    unreachable,
)
from skyward_aws import infra, resources
from skyward_aws.client_ip import discover_public_ip
from skyward_aws.config import AWS
from skyward_aws.offers import SPOT_PRODUCTS, Request, fetch_offers, offer_from_description
from skyward_aws.pricing import FALLBACK_REGION, shipped_catalog
from skyward_aws.session import NO_CREDENTIALS, Clients, client_config, explain, make_clients, new_session

SPOT_BATCH = 50  # instance types per DescribeSpotPriceHistory call
INSTANCE_TYPES_FILE = "instance_types.json"


@lru_cache(maxsize=1)
def shipped_instance_types() -> tuple[dict[str, Any], ...]:
    """The ``describe_instance_types`` items of every type in the price catalog, as this
    package ships them (``data/instance_types.json``: see its ``source``): what
    ``skyward offers`` lists with no AWS account. Only the fields
    :func:`~skyward_aws.offers.offer_from_description` reads are kept (58 KB for the 151
    types); when the price catalog gains a type, add its item from ``aws ec2
    describe-instance-types --instance-types TYPE`` (a test holds the two files to the same
    types)."""
    raw = package_files.files("skyward_aws").joinpath("data", INSTANCE_TYPES_FILE).read_text(encoding="utf-8")
    return tuple(json.loads(raw)["types"])


def shipped_offers(query: OfferQuery) -> list[Offer]:
    """The types that fit ``query`` from the shipped descriptions and list prices (pure
    but for reading the package's data). The catalog prices one region
    (:data:`~skyward_aws.pricing.FALLBACK_REGION`): rows are for that region, whatever the
    configured one, and there is no spot price (spot prices are live only), so a spot
    query finds nothing here."""
    if query.spot:
        return []
    prices, catalog = shipped_catalog(), current_catalog()
    found = [
        offer_from_description(d, region=FALLBACK_REGION, zones=(FALLBACK_REGION,), prices=prices, catalog=catalog)
        for d in shipped_instance_types()
    ]
    return offers_from(resources.PROVIDER, [o.instance for o in found if o is not None], query)


def cheapest_spot_prices(ec2: Any, offers: Sequence[Any]) -> dict[str, float]:
    """Instance type -> its cheapest current spot price over the zones it is offered in
    (``offers`` are ``skyward_aws.offers.Ec2Offer``), in one paginated call per 50 types
    rather than one per type: a CPU query fits hundreds of types."""
    zones = {o.name: set(o.zones) for o in offers}
    names = sorted(zones)
    now = datetime.datetime.now(datetime.UTC)
    latest: dict[tuple[str, str], tuple[datetime.datetime, float]] = {}
    for start in range(0, len(names), SPOT_BATCH):
        pages = ec2.get_paginator("describe_spot_price_history").paginate(
            InstanceTypes=names[start : start + SPOT_BATCH], ProductDescriptions=list(SPOT_PRODUCTS), StartTime=now
        )
        for page in pages:
            for item in page["SpotPriceHistory"]:
                name, zone = str(item["InstanceType"]), str(item["AvailabilityZone"])
                if zones.get(name) and zone not in zones[name]:
                    continue
                key = (name, zone)
                if key not in latest or item["Timestamp"] > latest[key][0]:
                    latest[key] = (item["Timestamp"], float(item["SpotPrice"]))
    cheapest: dict[str, float] = {}
    for (name, _zone), (_when, price) in latest.items():
        cheapest[name] = min(price, cheapest.get(name, price))
    return cheapest


def _check_config() -> Any:
    # one quick answer: an unreachable endpoint must not hold `skyward doctor` for minutes
    return client_config(attempts=2, connect_timeout=5, read_timeout=15)


class AwsSession:
    """One region of the user's AWS account, through boto3's usual credential chain.
    ``session`` (a boto3 Session) and ``sleep`` are seams for tests."""

    provider = resources.PROVIDER

    def __init__(self, config: AWS, *, session: Any = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self._session = session
        self._sleep = sleep
        self._clients: Clients | None = None

    @property
    def region(self) -> str:
        return self.config.region

    @property
    def clients(self) -> Clients:
        if self._clients is None:
            if self._session is None:
                self._session = new_session(self.config.region)
            self._clients = make_clients(self._session, self.config.region)
        return self._clients

    def check(self) -> CredentialCheck:
        check_config = _check_config()
        fix = "run `aws configure` (or `aws sso login` and set AWS_PROFILE)"
        try:
            if self._session is None:
                self._session = new_session(self.config.region)
            if self._session.get_credentials() is None:
                return CredentialCheck(self.provider, False, False, "no credentials found", fix)
            identity = self._session.client(
                "sts", region_name=self.config.region, config=check_config
            ).get_caller_identity()
        except Exception as error:
            offline = unreachable(error, f"sts.{self.config.region}.amazonaws.com")
            if offline is not None:
                return CredentialCheck(self.provider, True, False, str(offline), NETWORK_FIX, reachable=False)
            explained = explain(error, "checking the credentials (sts get-caller-identity)")
            found = NO_CREDENTIALS not in str(explained)
            return CredentialCheck(self.provider, found, False, str(explained), fix)
        return CredentialCheck(self.provider, True, True, f"account {identity.get('Account', '?')}")

    def resources(self) -> list[Resource]:
        try:
            return resources.list_all(self.clients, self.config.region)
        except Exception as error:
            raise explain(error, f"listing Skyward resources in {self.config.region}") from error

    def delete(self, items: Sequence[Resource]) -> list[Removal]:
        try:
            return resources.delete_and_verify(self.clients, self.config.region, items, sleep=self._sleep)
        except Exception as error:
            raise explain(error, f"deleting Skyward resources in {self.config.region}") from error

    def offers(self, query: OfferQuery) -> list[Offer]:
        accelerator = None
        if query.accelerator is not None:
            accelerator = dataclasses.replace(parse_accelerator(query.accelerator), count=query.count)
        request = Request(accelerator=accelerator, needs_spot=query.spot)
        try:
            ec2 = self.clients.ec2
            network = infra.find_network(ec2, self.config.subnet_ids)
            found = fetch_offers(
                ec2,
                request,
                region=self.config.region,
                usable_zones=sorted(network.subnets),
                prices=shipped_catalog(),
                catalog=current_catalog(),
            )
            fitting = [o for o in found if fits(o.instance, query)]
            spot = cheapest_spot_prices(ec2, [o for o in fitting if o.supports_spot])
            priced = [
                dataclasses.replace(o.instance, spot_price=spot[o.name]) if o.name in spot else o.instance
                for o in fitting
            ]
        except ConfigurationError:
            raise
        except Exception as error:
            raise explain(error, f"listing offers in {self.config.region}") from error
        return offers_from(self.provider, priced, query)

    def shipped_offers(self, query: OfferQuery) -> list[Offer]:
        return shipped_offers(query)

    def client_address(self) -> str:
        if self.config.use_ssm:
            return "none (use_ssm: the security group opens no port)"
        if self.config.ingress_cidr is not None:  # client_cidr, or client_address as one host
            return self.config.ingress_cidr
        return discover_public_ip(self.config.address_url, self.config.api_timeout)


def open_session(config: object | None) -> AwsSession:
    if config is None:
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        config = AWS(region=region) if region else AWS()
    if not isinstance(config, AWS):
        raise ConfigurationError(f"the aws tools take an AWS(...) configuration, got {config!r}")
    return AwsSession(config)


TOOLS = ProviderTools(name=resources.PROVIDER, distribution="skyward-aws", open=open_session)
