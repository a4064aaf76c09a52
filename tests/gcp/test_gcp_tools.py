"""``skyward doctor`` and ``skyward offers`` for Google Cloud against the fake: doctor checks
the credentials, the project, the two APIs and the request shapes; offers come from the
shipped catalog (asked, like every provider's, once the credentials are accepted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import gcp_config
from fakes.gcp import FakeGCP
from typer.testing import CliRunner

import skyward as sky
from skyward.cli.app import make_app

runner = CliRunner()


@pytest.mark.cloud
def test_doctor_accepts_the_fake_s_key_and_checks_the_project_and_its_apis(
    fake_gcp: FakeGCP, gcp_credentials: Path
) -> None:
    config = gcp_config(fake_gcp, region="us-central1", client_address="203.0.113.7")
    result = runner.invoke(make_app(configs={"gcp": config}), ["doctor", "--json", "-p", "gcp"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)["providers"]
    assert entry["credentials_valid"] is True
    checks = {c["name"]: c for c in entry["checks"]}
    assert checks["project"]["ok"] and "skyward-test" in checks["project"]["detail"]
    assert checks["Compute Engine API"]["ok"] and "us-central1-a" in checks["Compute Engine API"]["detail"]
    assert checks["Cloud TPU API"]["ok"]
    assert checks["firewall rule and label shape"]["ok"]
    assert "private_key" not in result.output


def test_doctor_without_credentials_says_how_to_provide_them(no_google_credentials: None) -> None:
    result = runner.invoke(make_app(configs={"gcp": sky.GCP()}), ["doctor", "--json", "-p", "gcp"])
    assert "Traceback" not in result.output
    assert "GOOGLE_APPLICATION_CREDENTIALS" in result.output
    assert "gcloud auth application-default login" in result.output


@pytest.mark.cloud
def test_offers_list_gcp_gpus_and_tpus_from_the_catalog_with_spot_prices(
    fake_gcp: FakeGCP, gcp_credentials: Path
) -> None:
    config = gcp_config(fake_gcp, region="us-central1")
    table = sky.offers("L4", spot=True, providers=[config])
    assert next(o.instance for o in table) == "g2-standard-4"
    assert all(o.spot_hourly is not None and o.provider == "gcp" for o in table)
    slices = sky.offers("v5p-32", nodes=4, providers=[config])
    assert [o.instance for o in slices] == ["v5p-32", "v5p-64", "v5p-128"]
    shown = runner.invoke(make_app(configs={"gcp": config}), ["offers", "H100:8", "--json", "-p", "gcp"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["offers"][0]["instance"] == "a3-highgpu-8g"
