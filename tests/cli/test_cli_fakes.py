"""``skyward offers`` and ``skyward doctor`` against the fake DigitalOcean and Verda APIs,
and what a refused credential looks like."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fakes.digitalocean import FakeDigitalOcean
from typer.testing import CliRunner

from skyward.cli.app import make_app
from skyward_digitalocean.naming import COMMON_TAG, pool_tag

pytestmark = pytest.mark.cloud

runner = CliRunner()


def test_offers_h100_on_digitalocean_and_verda_cheapest_first(do_config: Any, verda_config: Any) -> None:
    app = make_app(configs={"digitalocean": do_config, "verda": verda_config})
    result = runner.invoke(app, ["offers", "H100", "--nodes", "2", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)["offers"]
    # AWS has no credentials here: its rows come from the catalog skyward-aws ships, marked so
    assert {o["source"] for o in listed if o["provider"] == "aws"} == {"shipped"}
    offers = [(o["provider"], o["instance"], o["pool_hourly"]) for o in listed if o["source"] == "live"]
    assert offers == [
        ("verda", "1H100.80S.30V", pytest.approx(4.38)),
        ("digitalocean", "gpu-h100x1-80gb", pytest.approx(6.78)),
        ("verda", "8H100.80S.176V", pytest.approx(35.04)),
        ("digitalocean", "gpu-h100x8-640gb", pytest.approx(47.84)),
    ]
    eight = runner.invoke(app, ["offers", "H100:8", "--spot", "--json"])
    assert [(o["instance"], o["spot_hourly"]) for o in json.loads(eight.stdout)["offers"]] == [
        ("8H100.80S.176V", 6.0)  # DigitalOcean has no spot market
    ]


def test_doctor_reports_credentials_and_the_address_each_firewall_opens(do_config: Any, verda_config: Any) -> None:
    app = make_app(configs={"digitalocean": do_config, "verda": verda_config})
    result = runner.invoke(app, ["doctor", "--json", "-p", "digitalocean", "-p", "verda"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [(p["provider"], p["credentials_valid"]) for p in report["providers"]] == [
        ("digitalocean", True),
        ("verda", True),
    ]
    assert all(p["client_address"].endswith("/32") for p in report["providers"])
    versions = {p["distribution"] for p in report["plugins"]}
    assert {"skyward-core", "skyward-aws", "skyward-digitalocean", "skyward-verda"} <= versions


def test_down_expired_takes_a_powered_off_droplet_before_its_expiry_and_spares_the_rest(
    fake_do: FakeDigitalOcean, do_config: Any
) -> None:
    future = int(time.time()) + 3600
    off = fake_do.add_droplet(name="sky-0000000e-0", tags=[COMMON_TAG, pool_tag("sky-0000000e", future)], status="off")
    alive = fake_do.add_droplet(name="sky-0000000f-0", tags=[COMMON_TAG, pool_tag("sky-0000000f", future)])
    foreign = fake_do.add_droplet(name="my-web-server", tags=["web"], status="off")
    app = make_app(configs={"digitalocean": do_config})
    listed = json.loads(runner.invoke(app, ["ls", "--json"]).stdout)["resources"]
    instances = {(r["id"], r["idle"]) for r in listed if r["kind"] == "instance"}
    assert instances == {(str(off), True), (str(alive), False)}
    result = runner.invoke(app, ["down", "--expired", "-p", "digitalocean"])
    assert result.exit_code == 0, result.output
    assert "digitalocean: found 1, removed 1, left 0" in result.stdout
    statuses = {i: fake_do.droplets[i].status for i in (off, alive, foreign)}
    assert statuses == {off: "deleted", alive: "active", foreign: "off"}


def test_a_refused_token_is_one_line_per_provider_and_a_non_zero_exit(
    fake_do: FakeDigitalOcean, do_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "dop_v1_not-the-fakes-token")
    result = runner.invoke(make_app(configs={"digitalocean": do_config}), ["ls", "-p", "digitalocean"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    first, last = result.stderr.strip().splitlines()
    assert first.startswith("digitalocean: credentials not accepted: ") and "401" in first
    assert last.startswith("skyward: no provider has usable credentials")
    # The wrong token was sent on purpose: the fake must have seen it (and nothing else wrong).
    assert fake_do.violations and all("without the right bearer token" in v for v in fake_do.violations)
    fake_do.violations.clear()


def test_doctor_checks_each_account_and_says_what_to_fix(
    fake_do: FakeDigitalOcean, do_config: Any, verda_config: Any, fake_verda: Any
) -> None:
    app = make_app(configs={"digitalocean": do_config, "verda": verda_config})
    healthy = runner.invoke(app, ["doctor", "--json", "-p", "digitalocean", "-p", "verda"])
    assert healthy.exit_code == 0, healthy.output
    checks = {p["provider"]: {c["name"]: c for c in p["checks"]} for p in json.loads(healthy.stdout)["providers"]}
    assert set(checks["digitalocean"]) == {"account status", "droplet limit", "region", "firewall rule shape"}
    assert checks["digitalocean"]["droplet limit"]["detail"] == "0 of 25 droplets in use"
    assert set(checks["verda"]) == {"balance", "startup scripts"}
    assert all(c["ok"] for provider in checks.values() for c in provider.values())
    # the limit reached (a GPU droplet counts: the plain listing leaves it out), no credit left
    fake_do.droplet_limit = 1
    fake_do.add_droplet(name="gpu-box", tags=["mine"], size="gpu-h100x1-80gb")
    fake_verda.balance = 0.0
    broke = runner.invoke(app, ["doctor", "-p", "digitalocean", "-p", "verda"])
    assert broke.exit_code == 1
    assert "FAIL droplet limit: 1 of 1 droplets in use" in broke.stdout
    assert "digitalocean: droplet limit: delete droplets you no longer need" in broke.stdout
    assert "verda: balance: add credit in the Verda console" in broke.stdout
