"""On-demand prices: the catalog this package ships, and the tool that regenerates it.

EC2 itself reports no on-demand prices, and moto (the emulator the tests run against)
has no Pricing API, so on-demand prices come from ``data/on_demand_prices.json``: see its
``source``, ``compiled`` and ``notes`` fields. Spot prices are live (``offers``).

Regenerate the catalog from AWS's Price List API (needs ``pricing:GetProducts``)::

    python -m skyward_aws.pricing --region us-east-1 > on_demand_prices.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from skyward_aws.session import new_session

CATALOG_FILE = "on_demand_prices.json"
FALLBACK_REGION = "us-east-1"


@dataclass(frozen=True, slots=True)
class PriceCatalog:
    source: str
    compiled: str
    regions: Mapping[str, Mapping[str, float]]
    approximate: frozenset[str] = frozenset()

    def price(self, region: str, instance_type: str) -> float | None:
        """USD per hour in ``region``; ``None`` when the catalog does not know it."""
        return self.regions.get(region, {}).get(instance_type)

    def has_region(self, region: str) -> bool:
        return region in self.regions

    def estimate(self, region: str, instance_type: str) -> tuple[float | None, str | None]:
        """The price, and a note when it is not the region's own list price (the caller
        shows the note to the user: no silent fallback)."""
        if self.has_region(region):
            return self.price(region, instance_type), None
        price = self.price(FALLBACK_REGION, instance_type)
        note = (
            f"on-demand prices for {region} are not in skyward-aws's price catalog (compiled {self.compiled}); "
            f"cost estimates use {FALLBACK_REGION} prices"
        )
        return price, note


def parse_catalog(document: Mapping[str, Any]) -> PriceCatalog:
    regions = {
        str(region): {str(k): float(v) for k, v in prices.items()} for region, prices in document["regions"].items()
    }
    return PriceCatalog(
        source=str(document["source"]),
        compiled=str(document["compiled"]),
        regions=regions,
        approximate=frozenset(document.get("approximate", ())),
    )


@lru_cache(maxsize=1)
def shipped_catalog() -> PriceCatalog:
    """The catalog in the package (read once)."""
    raw = resources.files("skyward_aws").joinpath("data", CATALOG_FILE).read_text(encoding="utf-8")
    return parse_catalog(json.loads(raw))


# -- regenerating the catalog from the Price List API -------------------------------------


def on_demand_price_of(product_document: str | Mapping[str, Any]) -> tuple[str, float] | None:
    """(instance type, USD per hour) from one ``pricing.get_products`` PriceList item;
    ``None`` when it is not a plain hourly on-demand Linux price."""
    product = json.loads(product_document) if isinstance(product_document, str) else product_document
    attributes = product.get("product", {}).get("attributes", {})
    instance_type = attributes.get("instanceType")
    if not instance_type:
        return None
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            if dimension.get("unit") not in ("Hrs", "Hours"):
                continue
            usd = dimension.get("pricePerUnit", {}).get("USD")
            if usd is not None and float(usd) > 0:
                return str(instance_type), float(usd)
    return None


PRICE_FILTERS = (
    ("operatingSystem", "Linux"),
    ("tenancy", "Shared"),
    ("preInstalledSw", "NA"),
    ("capacitystatus", "Used"),
    ("licenseModel", "No License required"),
)


def fetch_region_prices(pricing: Any, region: str, instance_types: Iterable[str]) -> dict[str, float]:
    """Current on-demand prices of ``instance_types`` in ``region`` (Price List API)."""
    found: dict[str, float] = {}
    for instance_type in instance_types:
        filters = [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in PRICE_FILTERS]
        filters += [
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
        ]
        paginator = pricing.get_paginator("get_products")
        for page in paginator.paginate(ServiceCode="AmazonEC2", Filters=filters):
            for item in page.get("PriceList", []):
                parsed = on_demand_price_of(item)
                if parsed is not None:
                    found[parsed[0]] = parsed[1]
    return dict(sorted(found.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print a fresh on-demand price catalog for skyward-aws.")
    parser.add_argument("--region", action="append", default=None, help="region(s) to price (default us-east-1)")
    args = parser.parse_args(argv)
    regions = args.region or [FALLBACK_REGION]
    # The Price List API lives in a few regions only; us-east-1 answers for all of them.
    pricing = new_session("us-east-1").client("pricing")
    types = sorted({t for prices in shipped_catalog().regions.values() for t in prices})
    document = {
        "source": "AWS Price List API (pricing:GetProducts, AmazonEC2), Linux, shared tenancy, USD per hour",
        "compiled": datetime.date.today().isoformat(),
        "notes": ["Generated by python -m skyward_aws.pricing."],
        "approximate": [],
        "regions": {region: fetch_region_prices(pricing, region, types) for region in regions},
    }
    json.dump(document, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
