"""The ``skyward`` command on a fresh machine: no cloud credentials, no network.

What a newcomer runs first must answer: ``offers`` from the catalogs the plugins ship,
``doctor`` saying Local is ready and exiting 0, ``ls`` as JSON, ``--version``, and help
without Python types as placeholders. The installed plugins are used as they are; the
environment is emptied of every credential (``fresh`` below), so nothing here reaches a
cloud, and an unreachable API is made with a closed loopback port.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import skyward as sky
from skyward.cli.app import _provider_names, make_app
from skyward.cli.offers import LIVE, Row, SortKey, ordered
from skyward.errors import ProvisioningError
from skyward.providers import (
    CredentialCheck,
    Offer,
    ProviderTools,
    Removal,
    Resource,
    credential_check,
    for_one_check,
    unreachable,
)
from skyward.providers.cloud.addresses import client_address, firewall_source
from skyward_aws.pricing import shipped_catalog
from skyward_aws.tools import shipped_instance_types
from skyward_digitalocean import DigitalOcean
from skyward_runpod import RunPod
from skyward_vastai import VastAI
from skyward_verda import Verda

runner = CliRunner()

CREDENTIAL_VARIABLES = (
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION", "DIGITALOCEAN_TOKEN", "VERDA_CLIENT_ID",
    "VERDA_CLIENT_SECRET", "RUNPOD_API_KEY", "VAST_API_KEY",
)  # fmt: skip
OFFLINE = "203.0.113.250/32"  # what the injected address lookup would answer; it must not be asked twice


@pytest.fixture
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A machine with no credentials: an empty home (no ~/.aws, no vastai key file), no
    credential variables, and boto3 kept off the EC2 metadata service."""
    for name in CREDENTIAL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path / ".skyward"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    return tmp_path


def offline_address() -> str:
    raise ProvisioningError("could not discover this client's public address (offline)")


def closed_port() -> int:
    """A loopback port nothing listens on: a connection to it is refused at once."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- offers ----------------------------------------------------------------------------------


def test_offers_a100_without_any_account_lists_aws_from_its_shipped_catalog_and_exits_0(fresh: Path) -> None:
    result = runner.invoke(make_app(), ["offers", "A100", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    rows = [(o["provider"], o["instance"], o["accelerator"], o["source"]) for o in shown["offers"]]
    assert ("aws", "p4d.24xlarge", "A100-40GB", "shipped") in rows
    assert ("aws", "p4de.24xlarge", "A100-80GB", "shipped") in rows
    assert all(o["on_demand_hourly"] > 0 and o["spot_hourly"] is None for o in shown["offers"])
    assert shown["errors"] == []
    needs = {n["provider"]: n["for"] for n in shown["needs_account"]}
    assert needs["aws"] == "live offers and spot prices" and needs["digitalocean"] == "its offers"
    assert "local" not in needs  # Local lists no offers and needs no account
    table = runner.invoke(make_app(), ["offers", "A100"])
    assert table.exit_code == 0 and "aws*" in table.stdout and "p4d.24xlarge" in table.stdout
    assert "list prices from the catalog its plugin ships" in table.stderr
    assert "skipped" not in table.stderr and "no provider has usable credentials" not in table.stderr


def test_offers_all_lists_the_accelerator_names_to_ask_for(fresh: Path) -> None:
    result = runner.invoke(make_app(), ["offers", "--all", "--json"])
    assert result.exit_code == 0, result.output
    variants = {a["variant"]: a for a in json.loads(result.stdout)["accelerators"]}
    assert variants["A100-80GB"]["model"] == "A100" and variants["A100-80GB"]["memory_gb"] == 80
    assert {"H100", "T4", "L4"} <= {a["model"] for a in variants.values()}
    table = runner.invoke(make_app(), ["offers", "--all"])
    assert table.exit_code == 0 and "A100-80GB" in table.stdout
    both = runner.invoke(make_app(), ["offers", "A100", "--all"])
    assert both.exit_code == 2 and "without ACCELERATOR" in both.stderr


def test_offers_region_and_sort_narrow_and_order_the_rows(fresh: Path) -> None:
    app = make_app()
    elsewhere = runner.invoke(app, ["offers", "T4", "--region", "eu-west-1", "--json"])
    assert elsewhere.exit_code == 1  # the shipped catalog prices us-east-1 only
    assert json.loads(elsewhere.stdout)["offers"] == []
    assert "no offer matches T4 in eu-west-1" in json.loads(elsewhere.stdout)["errors"][-1]
    here = json.loads(runner.invoke(app, ["offers", "T4", "--region", "us-east-1", "--json"]).stdout)["offers"]
    assert here and {o["region"] for o in here} == {"us-east-1"}
    by_memory = json.loads(runner.invoke(app, ["offers", "T4", "--sort", "memory", "--json"]).stdout)["offers"]
    memories = [o["memory_gib"] for o in by_memory]
    assert memories == sorted(memories, reverse=True) and memories[0] > memories[-1]
    by_gpu = json.loads(runner.invoke(app, ["offers", "--sort", "gpu", "--json", "V100"]).stdout)["offers"]
    assert [o["accelerator_count"] for o in by_gpu if o["accelerator"] == "V100-16GB"] == [1, 4, 8]
    bad = runner.invoke(app, ["offers", "T4", "--sort", "colour"])
    assert bad.exit_code == 2 and "price" in bad.output and "memory" in bad.output


def test_offers_on_spot_without_an_account_finds_nothing_and_says_spot_needs_one(fresh: Path) -> None:
    result = runner.invoke(make_app(), ["offers", "A100", "--spot", "--json"])
    assert result.exit_code == 1
    shown = json.loads(result.stdout)
    assert shown["offers"] == [] and "no offer matches A100 on spot" in shown["errors"][-1]
    assert any(n["provider"] == "aws" and "spot" in n["for"] for n in shown["needs_account"])


def offer(name: str, price: float | None, memory: float, accelerator: str | None, count: int) -> Row:
    return Row(Offer("p", "r", name, accelerator, count, 4, memory, price, None), LIVE)


rows = st.lists(
    st.builds(
        offer,
        st.text("abc", min_size=1, max_size=3),
        st.one_of(st.none(), st.floats(0.01, 100)),
        st.floats(1, 2048),
        st.sampled_from([None, "A100-80GB", "T4-16GB"]),
        st.integers(1, 8),
    ),
    max_size=10,
)


@given(rows)
def test_sorting_by_price_puts_the_cheapest_first_and_unknown_prices_last(found: list[Row]) -> None:
    prices = [r.offer.on_demand_hourly for r in ordered(found, SortKey.PRICE, spot=False, nodes=1)]
    known = [p for p in prices if p is not None]
    assert known == sorted(known) and prices == known + [None] * (len(prices) - len(known))


@given(rows)
def test_sorting_by_memory_puts_the_most_memory_first_and_keeps_every_row(found: list[Row]) -> None:
    shown = ordered(found, SortKey.MEMORY, spot=False, nodes=1)
    assert sorted(map(id, shown)) == sorted(map(id, found))
    memories = [r.offer.memory_gib for r in shown]
    assert memories == sorted(memories, reverse=True)


# -- doctor ------------------------------------------------------------------------------------


def test_doctor_on_a_fresh_machine_says_local_is_ready_first_and_exits_0(fresh: Path) -> None:
    asked: list[str] = []

    def lookup() -> str:
        asked.append("once")
        return offline_address()

    result = runner.invoke(make_app(address=lookup), ["doctor"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "ready" and lines[1].split()[0] == "local" and "needs no account" in lines[1]
    assert "not configured (no credentials: set one up to use it)" in lines
    assert "firewall opens to ?" not in result.stdout and "to fix" not in result.stdout.replace("nothing to fix", "")
    assert lines[-1] == "nothing to fix; ready: local"
    assert asked == ["once"]
    report = json.loads(runner.invoke(make_app(address=lookup), ["doctor", "--json"]).stdout)
    assert report["providers"][0]["provider"] == "local" and report["ready"] == ["local"]
    assert {p["state"] for p in report["providers"][1:]} == {"not configured"}
    assert report["fixes"] == [] and report["errors"] == [] and report["network"]["address"] is None


class CountingAddressService(BaseHTTPRequestHandler):
    asked = 0

    def do_GET(self) -> None:
        type(self).asked += 1
        body = b"203.0.113.77\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def address_service() -> Iterator[tuple[str, type[CountingAddressService]]]:
    handler = type("Counting", (CountingAddressService,), {"asked": 0})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", handler
    finally:
        server.shutdown()
        server.server_close()


@dataclass
class FirewalledCloud:
    """A configured cloud whose firewall opens to the address one URL reports."""

    provider: str
    url: str
    region: str = "r1"

    def check(self) -> CredentialCheck:
        return CredentialCheck(self.provider, True, True, "token accepted")

    def resources(self) -> list[Resource]:
        return []

    def delete(self, resources: list[Resource]) -> list[Removal]:
        return []

    def client_address(self) -> str:
        return firewall_source(client_address(None, self.url, 5.0, "Cloud"))


def test_doctor_asks_the_public_address_once_for_every_cloud_that_needs_it(
    address_service: tuple[str, type[CountingAddressService]],
) -> None:
    url, service = address_service
    clouds = [FirewalledCloud(name, url) for name in ("sun", "moon", "star")]
    tools = [ProviderTools(c.provider, "skyward-core", lambda _config, c=c: c) for c in clouds]
    result = runner.invoke(
        make_app(tools=tools, address=lambda: firewall_source(client_address(None, url, 5.0, "Cloud"))),
        ["doctor", "--json"],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert [p["client_address"] for p in report["providers"]] == ["203.0.113.77/32"] * 3
    assert report["network"]["address"] == "203.0.113.77/32"
    assert service.asked == 1
    client_address(None, url, 5.0, "Cloud")  # outside doctor's run: asked afresh
    assert service.asked == 2


# -- unreachable is not refused ------------------------------------------------------------------


class ServiceRequestError(Exception):
    """Named as azure-core's: a request that got no response."""


class Unauthorized(Exception):
    pass


def test_an_error_caused_by_a_name_that_does_not_resolve_is_unreachable_and_names_the_host() -> None:
    try:
        try:
            raise socket.gaierror(-3, "Temporary failure in name resolution")
        except socket.gaierror as cause:
            raise ServiceRequestError("HTTPSConnection(host='api.example.com', port=443): Failed to resolve") from cause
    except ServiceRequestError as wrapped:
        found = unreachable(wrapped)
    assert found is not None
    assert (
        str(found)
        == "could not reach api.example.com: the name does not resolve (Temporary failure in name resolution)"
    )
    assert unreachable(Unauthorized("HTTP 401: Unable to authenticate you")) is None


def test_credential_check_tells_an_offline_read_from_a_refused_one() -> None:
    def offline() -> object:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise Unauthorized("no answer") from cause

    def refused() -> object:
        raise Unauthorized("HTTP 401")

    common = {"find": lambda: "token", "error": Unauthorized, "missing": "X is not set", "accepted": "ok"}
    down = credential_check("moon", read=offline, fix="make a new token", host="api.moon", **common)  # type: ignore[arg-type]
    assert (down.found, down.valid, down.reachable) == (True, False, False)
    assert down.detail == "could not reach api.moon: connection refused" and "new token" not in down.fix
    no = credential_check("moon", read=refused, fix="make a new token", **common)  # type: ignore[arg-type]
    assert (no.found, no.valid, no.reachable, no.fix) == (True, False, True, "make a new token")


def test_digitalocean_offline_is_could_not_reach_not_credentials_not_accepted(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIGITALOCEAN_TOKEN", "dop_v1_x")
    config = DigitalOcean(api_url=f"http://127.0.0.1:{closed_port()}", api_retries=1, api_backoff=0.0, api_timeout=5.0)
    app = make_app(configs={"digitalocean": config}, address=offline_address)
    result = runner.invoke(app, ["ls", "-p", "digitalocean", "--json"])
    assert result.exit_code == 2
    first = result.stderr.splitlines()[0]
    assert first.startswith("digitalocean: could not reach 127.0.0.1: connection refused")
    assert "credentials not accepted" not in result.stderr and "create an API token" not in result.stderr
    assert json.loads(result.stdout)["errors"][0].startswith("digitalocean: could not reach 127.0.0.1")
    doctor = runner.invoke(app, ["doctor", "-p", "digitalocean", "--json"])
    assert doctor.exit_code == 1  # credentials set but the API cannot be reached: that is broken
    (entry,) = json.loads(doctor.stdout)["providers"]
    assert (entry["state"], entry["credentials_found"], entry["reachable"]) == ("unreachable", True, False)


def test_aws_offline_is_could_not_reach_not_credentials_not_accepted(
    fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{closed_port()}")
    result = runner.invoke(make_app(address=offline_address), ["ls", "-p", "aws"])
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0].startswith("aws: could not reach 127.0.0.1: connection refused")
    assert "credentials not accepted" not in result.stderr and "aws configure" not in result.stderr


# -- JSON, version, help, Local ----------------------------------------------------------------------


@dataclass
class NoAccount:
    provider: str = "moon"
    region: str = "r1"

    def check(self) -> CredentialCheck:
        return CredentialCheck(self.provider, False, False, "MOON_TOKEN is not set", "export MOON_TOKEN")

    def resources(self) -> list[Resource]:
        return []

    def delete(self, resources: list[Resource]) -> list[Removal]:
        return []


def test_ls_json_with_no_usable_provider_is_still_json_with_the_error() -> None:
    app = make_app(tools=[ProviderTools("moon", "skyward-core", lambda _config: NoAccount())])
    result = runner.invoke(app, ["ls", "--json"])
    assert result.exit_code == 2
    shown = json.loads(result.stdout)
    assert shown["resources"] == [] and shown["skipped"] == []
    assert shown["errors"] == ["no provider has usable credentials (moon: export MOON_TOKEN)"]
    down = runner.invoke(app, ["down", "--expired", "--json"])
    assert down.exit_code == 2 and json.loads(down.stdout)["removals"] == []
    bad = runner.invoke(app, ["offers", "Z9000", "--json"])
    assert bad.exit_code == 2 and "Z9000" in json.loads(bad.stdout)["errors"][-1]


def test_ls_on_a_fresh_machine_looks_at_local_and_names_the_clouds_not_configured(fresh: Path) -> None:
    result = runner.invoke(make_app(), ["ls", "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert shown["resources"] == [] and shown["errors"] == []
    assert {s["provider"] for s in shown["skipped"]} >= {"aws", "digitalocean"}
    assert all(s["reason"].startswith("not configured: ") for s in shown["skipped"])
    local = runner.invoke(make_app(), ["ls", "-p", "local", "--json"])
    assert local.exit_code == 0, local.output
    assert json.loads(local.stdout) == {"errors": [], "pools": [], "resources": [], "skipped": []}


def test_version_names_the_core_and_each_plugin() -> None:
    result = runner.invoke(make_app(), ["--version"])
    assert result.exit_code == 0
    assert result.stdout.startswith("skyward 0.1.0 (") and "skyward-aws 0.1.0" in result.stdout


@pytest.mark.parametrize(
    "command",
    [[], ["ls"], ["logs"], ["down"], ["offers"], ["doctor"], ["cache"], ["cache", "ls"], ["cache", "clear"]],
)
def test_help_shows_no_python_types_as_placeholders(command: list[str]) -> None:
    shown = runner.invoke(make_app(), [*command, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    for python_type in ("<bool>", "<list[", "<int>", "<str>", "<float>", "<sortkey>"):
        assert python_type not in shown.stdout.lower(), (command, python_type)


def test_provider_help_and_completion_list_the_valid_names_local_first() -> None:
    shown = runner.invoke(make_app(), ["ls", "--help"], env={"COLUMNS": "200"})
    assert "Only this provider (repeatable): local, aws, digitalocean" in shown.stdout
    assert "--install-completion" in runner.invoke(make_app(), ["--help"], env={"COLUMNS": "200"}).stdout
    assert _provider_names("d") == ["digitalocean"] and _provider_names("")[0] == "local"


def test_the_console_script_answers_a_usage_error_under_json_in_json(fresh: Path) -> None:
    script = Path(sys.executable).parent / "skyward"
    env = {**os.environ, "HOME": str(fresh), "AWS_EC2_METADATA_DISABLED": "true"}
    shown = subprocess.run(
        [str(script), "ls", "--json", "--colour"], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert shown.returncode == 2
    assert "--colour" in json.loads(shown.stdout)["errors"][0]
    refused = subprocess.run(
        [str(script), "offers", "Z9000", "--json"], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert refused.returncode == 2 and "Z9000" in json.loads(refused.stdout)["errors"][-1]
    found = subprocess.run(
        [str(script), "offers", "A100", "--json"], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    assert found.returncode == 0 and json.loads(found.stdout)["offers"]


@pytest.mark.parametrize("provider", ["runpod", "vastai", "verda"])
def test_every_marketplace_offline_is_unreachable_not_refused(
    provider: str, fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("RUNPOD_API_KEY", "k"), ("VAST_API_KEY", "k"), ("VERDA_CLIENT_ID", "i")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("VERDA_CLIENT_SECRET", "s")
    url = f"http://127.0.0.1:{closed_port()}"
    configs = {
        "runpod": RunPod(api_url=url),
        "vastai": VastAI(api_url=f"{url}/api/v0"),
        "verda": Verda(api_url=f"{url}/v1"),
    }
    result = runner.invoke(make_app(configs=configs, address=offline_address), ["doctor", "-p", provider, "--json"])
    assert result.exit_code == 1
    (entry,) = json.loads(result.stdout)["providers"]
    assert (entry["state"], entry["reachable"]) == ("unreachable", False)
    assert entry["detail"] == "could not reach 127.0.0.1: connection refused"


def test_a_credential_check_reads_with_few_retries_and_a_short_timeout_but_never_more_than_configured() -> None:
    quick = for_one_check(RunPod())
    assert (quick.api_retries, quick.api_timeout) == (2, 15.0)
    assert (RunPod().api_retries, RunPod().api_timeout) == (8, 60.0)  # the pool's own calls keep theirs
    already = for_one_check(RunPod(api_retries=1, api_timeout=3.0))
    assert (already.api_retries, already.api_timeout) == (1, 3.0)


def test_sky_offers_does_not_name_local_among_the_providers_that_could_not_answer(fresh: Path) -> None:
    skipped = dict(sky.offers("A100").skipped)
    assert "local" not in skipped and "aws" in skipped  # sky.offers is live only: AWS needs its account


def test_skyward_aws_ships_a_description_for_every_type_it_prices() -> None:
    described = [d["InstanceType"] for d in shipped_instance_types()]
    assert len(described) == len(set(described))
    assert sorted(described) == sorted(shipped_catalog().regions["us-east-1"])
