"""Rebuild skyward_gcp/data/catalog.json's prices from Google's Cloud Billing Catalog API.

    GOOGLE_APPLICATION_CREDENTIALS=key.json python skyward-gcp/tools/refresh_catalog.py [--region us-central1]

Not run by the tests (it needs credentials and Google's network). It keeps every row of the
catalog (the shapes: vCPUs, memory, GPUs, TPU chips and hosts, the regions) and rewrites only
the prices, from the SKUs of two services: Compute Engine (``6F81-5844-456A``: a machine
family's "Instance Core" and "Instance Ram" per hour, each GPU model per hour, each with a
"Spot Preemptible" twin) and Cloud TPU (``E000-3F24-B8AA``: per chip-hour, on-demand and
spot). A VM's price is cores x core price + GiB x RAM price (+ GPUs x GPU price); a row whose
SKUs it cannot find keeps its old price and is named on stderr, so a renamed SKU shows.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import google.auth
from google.auth.transport.requests import AuthorizedSession

CATALOG = Path(__file__).resolve().parents[1] / "src" / "skyward_gcp" / "data" / "catalog.json"
API = "https://cloudbilling.googleapis.com/v1"
COMPUTE, TPU = "6F81-5844-456A", "E000-3F24-B8AA"
GPU_WORDS = {
    "nvidia-l4": "L4", "nvidia-tesla-t4": "T4", "nvidia-tesla-v100": "V100",
    "nvidia-tesla-a100": "A100 40GB", "nvidia-a100-80gb": "A100 80GB", "nvidia-h100-80gb": "H100 80GB",
}  # fmt: skip
TPU_WORDS = {"v5p": "v5p", "v5e": "v5e", "v6e": "v6e", "v4": "v4"}


def skus(session: AuthorizedSession, service: str) -> Iterator[dict[str, Any]]:
    token = ""
    while True:
        answer = session.get(f"{API}/services/{service}/skus", params={"pageToken": token, "pageSize": "5000"})
        answer.raise_for_status()
        body = answer.json()
        yield from body.get("skus", [])
        token = body.get("nextPageToken", "")
        if not token:
            return


def hourly(sku: dict[str, Any]) -> float:
    rate = sku["pricingInfo"][0]["pricingExpression"]["tieredRates"][-1]["unitPrice"]
    return int(rate.get("units") or 0) + int(rate.get("nanos") or 0) / 1e9


def price_table(session: AuthorizedSession, service: str, region: str) -> dict[str, float]:
    """SKU description (lowercased) -> USD per unit-hour, for SKUs sold in ``region``."""
    return {
        str(s["description"]).lower(): hourly(s)
        for s in skus(session, service)
        if region in s.get("serviceRegions", [])
        and s.get("category", {}).get("usageType") in ("OnDemand", "Preemptible")
    }


def find(table: dict[str, float], *words: str) -> float | None:
    pattern = re.compile(".*".join(re.escape(w.lower()) for w in words))
    found = [price for description, price in table.items() if pattern.search(description)]
    return min(found) if found else None


def vm_price(table: dict[str, float], row: dict[str, Any], spot: bool) -> float | None:
    family = str(row["name"]).split("-", 1)[0].upper()
    prefix = ("spot preemptible",) if spot else ()
    core = find(table, *prefix, f"{family} ", "instance core")
    ram = find(table, *prefix, f"{family} ", "instance ram")
    if core is None or ram is None:
        return None
    total = core * float(row["vcpus"]) + ram * float(row["memory_gib"])
    if row.get("accelerator_type"):
        gpu = find(table, *prefix, "nvidia", GPU_WORDS.get(row["accelerator_type"], row["accelerator_type"]), "gpu")
        if gpu is None:
            return None
        total += gpu * float(row["accelerator_count"])
    return round(total, 4)


def tpu_price(table: dict[str, float], row: dict[str, Any], spot: bool) -> float | None:
    words = ("spot",) if spot else ()
    chip = find(table, *words, "tpu", TPU_WORDS[row["version"]])
    return None if chip is None else round(chip * float(row["chips"]), 4)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", default="us-central1")
    region = parser.parse_args().region
    credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    session = AuthorizedSession(credentials)  # type: ignore[no-untyped-call]
    compute, tpus = price_table(session, COMPUTE, region), price_table(session, TPU, region)
    doc = json.loads(CATALOG.read_text())
    missing = []
    for kind, table, price in (("machines", compute, vm_price), ("tpus", tpus, tpu_price)):
        for row in doc[kind]:
            for field, spot in (("on_demand", False), ("spot", True)):
                new = price(table, row, spot)
                if new is None:
                    missing.append(f"{row['name']} {field}")
                else:
                    row[field] = new
    doc["updated"] = datetime.now(UTC).date().isoformat()
    doc["unit"] = f"per hour, {region} list prices (other regions differ by a few percent; see refresh_catalog.py)"
    CATALOG.write_text(json.dumps(doc, indent=1) + "\n")
    for name in missing:
        print(f"no SKU found for {name}: kept the old price", file=sys.stderr)
    print(f"wrote {CATALOG} ({len(doc['machines'])} machines, {len(doc['tpus'])} TPU slices)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
