"""The ``skyward`` command with an in-memory provider (what a third-party plugin gives
it), and the pure rules under it: which resources ``down --expired`` takes, tallies, the
environment cache."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from skyward.api.kept.record import PoolStore
from skyward.cli import cache as envcache
from skyward.cli import render
from skyward.cli.app import make_app, tally
from skyward.providers import (
    INSTANCE,
    SECURITY_GROUP,
    AccountCheck,
    CredentialCheck,
    Offer,
    OfferQuery,
    ProviderTools,
    Removal,
    Resource,
    parse_time,
)
from skyward.providers.cloud.reaping import doomed_resources

NOW = 1_900_000_000.0


def res(kind: str, ident: str, pool: str, expires: float | None, **more: object) -> Resource:
    return Resource(
        provider=str(more.get("provider", "moon")),
        region="r1",
        pool_id=pool,
        kind=kind,
        id=ident,
        state=str(more.get("state", "running")),
        created=NOW - 3600,
        expires_at=expires,
        hourly_price=more.get("price"),  # type: ignore[arg-type]
        idle=bool(more.get("idle", False)),
    )


@dataclass
class MoonSession:
    """A provider in memory: it lists what it holds and deletes what it is asked, except
    ids in ``stuck``."""

    held: list[Resource]
    has_credentials: bool = True
    stuck: set[str] = field(default_factory=set)
    provider: str = "moon"
    region: str = "r1"

    def check(self) -> CredentialCheck:
        if not self.has_credentials:
            return CredentialCheck(self.provider, False, False, "MOON_TOKEN is not set", "export MOON_TOKEN")
        return CredentialCheck(self.provider, True, True, "ok")

    def resources(self) -> list[Resource]:
        return list(self.held)

    def delete(self, resources: Sequence[Resource]) -> list[Removal]:
        asked = {r.id for r in resources}
        self.held = [r for r in self.held if r.id not in asked or r.id in self.stuck]
        left = {r.id for r in self.held}
        return [Removal(r, r.id not in left, "stuck" if r.id in left else "") for r in resources]

    def offers(self, query: OfferQuery) -> list[Offer]:
        return [Offer("moon", "r1", "moon.gpu", "A100-40GB", 1, 8, 32.0, 3.0, 1.0)]

    def client_address(self) -> str:
        return "203.0.113.9/32"


NO_POOLS = PoolStore(Path("/nonexistent/skyward-home"))  # a home with no pool recorded (only read)


def app_for(*sessions: MoonSession, now: float = NOW):  # type: ignore[no-untyped-def]
    tools = [ProviderTools(s.provider, "skyward-core", lambda _config, s=s: s) for s in sessions]
    return make_app(tools=tools, clock=lambda: now, address=lambda: "198.51.100.4/32", store=NO_POOLS)


runner = CliRunner()


def test_ls_lists_a_third_party_providers_resources_with_price_and_marks_the_expired() -> None:
    moon = MoonSession([res(INSTANCE, "i-1", "sky-a", NOW - 5, price=2.0), res(INSTANCE, "i-2", "sky-b", NOW + 600)])
    result = runner.invoke(app_for(moon), ["ls", "--json"])
    assert result.exit_code == 0, result.output
    listed = {r["id"]: r for r in json.loads(result.stdout)["resources"]}
    assert listed["i-1"]["expired"] is True and listed["i-2"]["expired"] is False
    assert listed["i-1"]["cost_so_far"] == pytest.approx(2.0)  # an hour at $2/h
    table = runner.invoke(app_for(moon), ["ls"])
    assert table.exit_code == 0 and "EXPIRED" in table.stdout and "sky-b" in table.stdout


def test_down_a_pool_removes_only_that_pool_and_reports_counts() -> None:
    moon = MoonSession([res(INSTANCE, "i-1", "sky-a", NOW + 60), res(SECURITY_GROUP, "sg-1", "sky-a", NOW + 60)])
    moon.held.append(res(INSTANCE, "i-2", "sky-b", NOW + 60))
    result = runner.invoke(app_for(moon), ["down", "sky-a"])
    assert result.exit_code == 0, result.output
    assert [r.id for r in moon.held] == ["i-2"]
    assert "moon: found 2, removed 2, left 0" in result.stdout


def test_down_exits_non_zero_and_names_what_is_left() -> None:
    moon = MoonSession([res(INSTANCE, "i-1", "sky-a", NOW + 60)], stuck={"i-1"})
    result = runner.invoke(app_for(moon), ["down", "sky-a", "--json"])
    assert result.exit_code == 1
    (removal,) = json.loads(result.stdout)["removals"]
    assert removal["removed"] is False and removal["detail"] == "stuck"


def test_an_unknown_pool_id_is_one_line_and_a_non_zero_exit() -> None:
    result = runner.invoke(app_for(MoonSession([])), ["down", "sky-nope"])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "skyward: no resources of pool 'sky-nope' on moon, and no pool of that name recorded here "
        "(recorded: none): `skyward ls` lists the pools there are"
    ]
    assert "Traceback" not in result.output


def test_an_unknown_provider_is_one_line_and_exit_2() -> None:
    result = runner.invoke(app_for(MoonSession([])), ["ls", "--provider", "mars"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "skyward: unknown provider 'mars': --provider takes one of moon (another cloud needs its plugin installed)"
    )


def test_no_credentials_anywhere_is_one_line_and_exit_2() -> None:
    result = runner.invoke(app_for(MoonSession([], has_credentials=False)), ["ls"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert lines[-1] == "skyward: no provider has usable credentials (moon: export MOON_TOKEN)"
    assert "Traceback" not in result.output


def test_down_all_asks_first_and_a_no_deletes_nothing() -> None:
    moon = MoonSession([res(INSTANCE, "i-1", "sky-a", NOW + 60)])
    refused = runner.invoke(app_for(moon), ["down", "--all"], input="n\n")
    assert refused.exit_code == 1 and [r.id for r in moon.held] == ["i-1"]
    agreed = runner.invoke(app_for(moon), ["down", "--all"], input="y\n")
    assert agreed.exit_code == 0 and moon.held == []


def test_down_needs_exactly_one_selection() -> None:
    for args in (["down"], ["down", "sky-a", "--expired"], ["down", "--all", "--expired"]):
        result = runner.invoke(app_for(MoonSession([])), args)
        assert result.exit_code == 2, args
        assert result.stderr.strip() == "skyward: give exactly one of NAME|POOL_ID, --expired or --all"


def test_down_expired_follows_the_clock() -> None:
    held = [res(INSTANCE, "i-1", "sky-a", NOW + 60), res(SECURITY_GROUP, "sg-1", "sky-a", NOW + 60)]
    moon = MoonSession(list(held))
    early = runner.invoke(app_for(moon), ["down", "--expired"])
    assert early.exit_code == 0 and len(moon.held) == 2
    late = runner.invoke(app_for(moon, now=NOW + 61), ["down", "--expired"])
    assert late.exit_code == 0 and moon.held == []


def test_offers_and_doctor_use_the_optional_abilities() -> None:
    moon = MoonSession([])
    offers = runner.invoke(app_for(moon), ["offers", "A100", "--nodes", "2", "--spot", "--json"])
    assert offers.exit_code == 0, offers.output
    (offer,) = json.loads(offers.stdout)["offers"]
    assert offer["pool_hourly"] == 2.0 and offer["spot_hourly"] == 1.0
    doctor = runner.invoke(app_for(moon), ["doctor", "--json"])
    assert doctor.exit_code == 0, doctor.output
    report = json.loads(doctor.stdout)
    assert report["providers"][0]["client_address"] == "203.0.113.9/32" and report["fixes"] == []
    assert any(p["distribution"] == "skyward-core" for p in report["plugins"])


def test_offers_refuses_an_unknown_accelerator_in_one_line() -> None:
    result = runner.invoke(app_for(MoonSession([])), ["offers", "Z9000"])
    assert result.exit_code == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Z9000" in result.stderr


@dataclass
class CheckedMoon(MoonSession):
    """A provider that also checks its account: one check passes, one fails, or it cannot read."""

    unreadable: bool = False

    def account_checks(self) -> list[AccountCheck]:
        if self.unreadable:
            raise RuntimeError("the quota API timed out")
        return [
            AccountCheck(self.provider, "quota", True, "3 of 10 used"),
            AccountCheck(self.provider, "balance", False, "0 USD", "add credit"),
        ]


def test_doctor_runs_a_providers_account_checks_and_lists_each_failed_one_as_a_fix() -> None:
    result = runner.invoke(app_for(CheckedMoon([])), ["doctor", "--json"])
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert [(c["name"], c["ok"]) for c in report["providers"][0]["checks"]] == [("quota", True), ("balance", False)]
    assert report["fixes"] == ["moon: balance: add credit"]
    shown = runner.invoke(app_for(CheckedMoon([], unreadable=True)), ["doctor"])
    assert shown.exit_code == 1 and "FAIL account: RuntimeError: the quota API timed out" in shown.stdout
    assert (
        "checks" not in json.loads(runner.invoke(app_for(MoonSession([])), ["doctor", "--json"]).stdout)["providers"][0]
    )  # a session without the ability is not asked


def test_a_failed_account_check_must_say_what_to_fix() -> None:
    with pytest.raises(ValueError, match="must say what to fix"):
        AccountCheck("moon", "quota", False, "10 of 10 used")
    with pytest.raises(ValueError, match="name and a detail"):
        AccountCheck("moon", "", True, "x")


def test_doctor_counts_a_cloud_without_credentials_as_not_configured_and_exits_0() -> None:
    result = runner.invoke(app_for(MoonSession([], has_credentials=False)), ["doctor"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[lines.index("not configured (no credentials: set one up to use it)") + 1].split() == [
        "moon",
        "export",
        "MOON_TOKEN",
    ]
    assert "nothing to fix" in result.stdout and "to fix" not in result.stdout.replace("nothing to fix", "")


# -- pure rules ------------------------------------------------------------------------------


def test_expired_instances_go_with_their_pools_group_but_a_live_pool_keeps_its_group() -> None:
    resources = [
        res(INSTANCE, "i-dead", "sky-a", NOW - 1),
        res(SECURITY_GROUP, "sg-a", "sky-a", NOW - 1),
        res(INSTANCE, "i-live", "sky-b", NOW + 100),
        res(SECURITY_GROUP, "sg-b", "sky-b", NOW + 100),
        res(SECURITY_GROUP, "sg-c", "sky-c", NOW - 1),  # expired, no instance left
        res(SECURITY_GROUP, "sg-own", "sky-own", NOW - 1),
    ]
    doomed = [r.id for r in doomed_resources(resources, NOW, own_pool="sky-own")]
    assert doomed == ["i-dead", "sg-a", "sg-c"]


resource_lists = st.lists(
    st.builds(
        res,
        st.sampled_from([INSTANCE, SECURITY_GROUP, "role"]),
        st.text("abc123", min_size=1, max_size=4),
        st.sampled_from(["sky-a", "sky-b", "sky-c", ""]),
        st.one_of(st.none(), st.floats(NOW - 1000, NOW + 1000)),
        idle=st.booleans(),
    ),
    max_size=12,
)


@given(resource_lists, st.sampled_from([None, "sky-a"]))
def test_nothing_unexpired_unmarked_or_of_the_own_pool_is_ever_doomed(
    resources: list[Resource], own: str | None
) -> None:
    doomed = doomed_resources(resources, NOW, own_pool=own)
    going = {r.id for r in doomed if r.kind == INSTANCE}
    for r in doomed:
        assert r.pool_id and r.pool_id != own
        assert r.expired(NOW) or (r.kind == INSTANCE and r.idle)
        if r.kind != INSTANCE:  # never a group whose pool still has an instance that stays
            assert not any(i.kind == INSTANCE and i.pool_id == r.pool_id and i.id not in going for i in resources)


def test_an_idle_machine_goes_before_its_expiry_but_its_pools_group_waits() -> None:
    resources = [res(INSTANCE, "i-off", "sky-a", NOW + 100, idle=True), res(SECURITY_GROUP, "sg-a", "sky-a", NOW + 100)]
    assert [r.id for r in doomed_resources(resources, NOW)] == ["i-off"]


@pytest.mark.parametrize(
    ("price", "shown"),
    [(0.5, "off (idle, billing)"), (0.0, "off (idle)"), (None, "off (idle, price unknown)")],
)
def test_an_idle_machine_says_billing_only_when_it_has_a_price(price: float | None, shown: str) -> None:
    assert render.state_text(res(INSTANCE, "i-off", "sky-a", None, idle=True, state="off", price=price)) == shown
    assert render.state_text(res(INSTANCE, "i-on", "sky-a", None, state="running", price=price)) == "running"


def test_tally_counts_removed_and_left_per_provider() -> None:
    a, b = res(INSTANCE, "1", "p", None), res(INSTANCE, "2", "p", None, provider="sun")
    assert tally([Removal(a, True), Removal(a, False), Removal(b, True)]) == {"moon": (1, 1), "sun": (1, 0)}


def test_parse_time_reads_cloud_timestamps_and_refuses_the_rest() -> None:
    assert parse_time("2030-03-17T17:46:40Z") == 1_900_000_000.0
    assert parse_time("2030-03-17T17:46:40+00:00") == 1_900_000_000.0
    assert parse_time("yesterday") is None and parse_time(None) is None


# -- cache -----------------------------------------------------------------------------------


def make_env(home: Path, name: str, used: float, size: int = 4096) -> Path:
    env = home / "envs" / name
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").write_bytes(b"x" * size)
    (env / ".skyward-complete").touch()
    lock = home / "envs" / f"{name}.lock"
    lock.touch()
    os.utime(lock, (used, used))
    return env


def test_cache_ls_shows_size_and_last_use_and_clear_removes_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path))
    now = time.time()
    make_env(tmp_path, "aaa-111", now - 7200, size=100_000)
    make_env(tmp_path, "bbb-222", now - 60)
    listed = runner.invoke(app_for(MoonSession([])), ["cache", "ls", "--json"])
    envs = json.loads(listed.stdout)["environments"]
    assert [e["name"] for e in envs] == ["bbb-222", "aaa-111"]  # most recent first
    assert envs[1]["size"] >= 100_000 and envs[1]["last_used"] == pytest.approx(now - 7200)
    cleared = runner.invoke(app_for(MoonSession([])), ["cache", "clear", "--yes"])
    assert cleared.exit_code == 0, cleared.output
    assert list((tmp_path / "envs").iterdir()) == []


def make_wheel(home: Path, name: str, built: float) -> Path:
    entry = home / "wheels" / name
    entry.mkdir(parents=True)
    (entry / f"{name}-py3-none-any.whl").write_bytes(b"w" * 5000)
    record = entry / "wheel.json"
    record.write_text("{}")
    os.utime(record, (built, built))
    (home / "wheels" / f"{name}.lock").touch()
    return entry


def test_cache_lists_and_clears_the_wheels_built_for_cloud_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYWARD_HOME", str(tmp_path))
    now = time.time()
    make_env(tmp_path, "aaa-111", now - 60)
    make_wheel(tmp_path, "skyward_core-0123abcd", now - 3600)
    make_wheel(tmp_path, "skyward_aws-4567ef01", now - 10)
    (tmp_path / "wheels" / ".build-xyz").mkdir()  # a build under way is not an entry
    listed = runner.invoke(app_for(MoonSession([])), ["cache", "ls", "--json"])
    shown = json.loads(listed.stdout)
    assert [e["name"] for e in shown["environments"]] == ["aaa-111"]
    assert [w["name"] for w in shown["wheels"]] == ["skyward_aws-4567ef01", "skyward_core-0123abcd"]
    assert all(w["kind"] == "wheel" and w["complete"] and w["size"] >= 5000 for w in shown["wheels"])
    table = runner.invoke(app_for(MoonSession([])), ["cache", "ls"])
    assert "cached wheels" in table.stdout and "1 environment(s), 2 wheel(s)" in table.stdout
    one = runner.invoke(app_for(MoonSession([])), ["cache", "clear", "--yes", "skyward_core-0123abcd"])
    assert one.exit_code == 0, one.output
    assert sorted(p.name for p in (tmp_path / "wheels").iterdir()) == [
        ".build-xyz",
        "skyward_aws-4567ef01",
        "skyward_aws-4567ef01.lock",
    ]
    everything = runner.invoke(app_for(MoonSession([])), ["cache", "clear", "--yes"])
    assert everything.exit_code == 0, everything.output
    assert list((tmp_path / "envs").iterdir()) == [] and [p.name for p in (tmp_path / "wheels").iterdir()] == [
        ".build-xyz"
    ]


def test_cache_clear_keeps_an_environment_a_process_runs_in(tmp_path: Path) -> None:
    env = make_env(tmp_path, "ccc-333", time.time())
    (cached,) = envcache.environments(tmp_path)
    assert envcache.in_use(cached, [str(env / "bin" / "python")])
    assert not envcache.in_use(cached, [str(tmp_path / "envs" / "ccc-3334" / "bin" / "python")])
    assert not envcache.in_use(replace(cached, path=tmp_path / "other"), [str(env / "bin" / "python")])


def test_a_provider_registered_through_the_hook_shows_up_in_every_command() -> None:
    """What a third-party plugin does: implement ``skyward_provider_tools``; the command
    finds it through pluggy, with no change to the core."""
    from skyward.plugins.hookspecs import hookimpl
    from skyward.plugins.registry import registry

    moon = MoonSession([res(INSTANCE, "i-9", "sky-z", NOW - 1, provider="moon")])

    class MoonPlugin:
        @hookimpl
        def skyward_provider_tools(self) -> list[ProviderTools]:
            return [ProviderTools("moon", "skyward-core", lambda _config: moon)]

    plugin = MoonPlugin()
    registry.register(plugin, name="moon-test-plugin")
    try:
        app = make_app(clock=lambda: NOW)
        listed = runner.invoke(app, ["ls", "--json", "-p", "moon"])
        assert listed.exit_code == 0, listed.output
        assert [r["id"] for r in json.loads(listed.stdout)["resources"]] == ["i-9"]
        assert runner.invoke(app, ["down", "--expired", "-p", "moon"]).exit_code == 0
        assert moon.held == []
        help_text = runner.invoke(app, ["--help"]).stdout
        assert all(command in help_text for command in ("ls", "logs", "down", "offers", "doctor", "cache"))
    finally:
        registry.unregister(plugin)


class BrokenSession(MoonSession):
    def resources(self) -> list[Resource]:
        raise ConnectionError("the API hung up")


def test_a_provider_that_fails_is_one_line_and_the_others_are_still_listed() -> None:
    broken = BrokenSession([], provider="sun")
    moon = MoonSession([res(INSTANCE, "i-1", "sky-a", NOW + 60)])
    result = runner.invoke(app_for(broken, moon), ["ls", "--json"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert [r["id"] for r in json.loads(result.stdout)["resources"]] == ["i-1"]
    assert "sun: could not list: the API hung up" in result.stderr


def test_a_provider_whose_configuration_is_refused_is_said_and_skipped() -> None:
    def refuse(_config: object) -> MoonSession:
        raise ValueError("no such region")

    tools = [ProviderTools("sun", "skyward-core", refuse)]
    result = runner.invoke(make_app(tools=tools, clock=lambda: NOW), ["ls"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "sun: could not check the credentials: ValueError: no such region" in result.stderr
    doctor = runner.invoke(make_app(tools=tools, clock=lambda: NOW), ["doctor"])
    assert doctor.exit_code == 1 and "sun: ValueError: no such region" in doctor.stdout


def test_the_console_script_is_installed_with_skyward_core_and_lists_the_commands() -> None:
    import subprocess
    import sys
    from importlib import metadata

    (entry,) = metadata.entry_points(group="console_scripts", name="skyward")
    assert entry.value == "skyward.cli.app:main" and entry.dist is not None and entry.dist.name == "skyward-core"
    assert any(r.startswith("typer") for r in metadata.requires("skyward-core") or [])
    script = Path(sys.executable).parent / "skyward"
    shown = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
    assert all(f" {command} " in shown.stdout for command in ("ls", "logs", "down", "offers", "doctor", "cache"))


droplet_cases = st.tuples(
    st.integers(1, 50),  # id
    st.sampled_from(["new", "active", "off"]),  # status
    st.sampled_from(["sky-0000000a", "sky-0000000b", None]),  # pool
    st.integers(1_899_999_000, 1_900_001_000),  # expiry
    st.booleans(),  # carries the common ``skyward`` tag
)


@given(st.lists(droplet_cases, max_size=8, unique_by=lambda d: d[0]), st.sampled_from([None, "sky-0000000a"]))
def test_skyward_down_expired_and_the_digitalocean_pool_start_reaper_take_the_same_droplets(
    droplets: list[tuple[int, str, str | None, int, bool]], own: str | None
) -> None:
    """Two callers, one rule: what ``down --expired`` takes is what the reaper at every
    DigitalOcean pool start takes."""
    from skyward_digitalocean.naming import COMMON_TAG, DropletView, droplets_to_reap, pool_tag
    from skyward_digitalocean.resources import resource_of_droplet

    views = []
    for ident, status, pool, expires, common in droplets:
        tags = ([COMMON_TAG] if common else []) + ([pool_tag(pool, expires)] if pool else [])
        views.append(DropletView(ident, f"d{ident}", status, tuple(tags)))
    by_reaper = {str(d.droplet.id) for d in droplets_to_reap(views, NOW, own)}
    raw = [{"id": v.id, "name": v.name, "status": v.status, "tags": list(v.tags)} for v in views]
    listed = [r for r in (resource_of_droplet(x) for x in raw) if r is not None]
    by_command = {r.id for r in doomed_resources(listed, NOW, own) if r.kind == INSTANCE}
    assert by_command == by_reaper


verda_cases = st.tuples(
    st.integers(1, 50),  # id
    st.sampled_from(["running", "provisioning", "offline", "error", "discontinued"]),  # status
    st.sampled_from(["sky-0000000a", "sky-0000000b", None]),  # pool
    st.integers(1_899_999_000, 1_900_001_000),  # expiry
)


@given(st.lists(verda_cases, max_size=8, unique_by=lambda c: c[0]), st.sampled_from([None, "sky-0000000a"]))
def test_skyward_down_expired_and_the_verda_pool_start_reaper_take_the_same_instances(
    instances: list[tuple[int, str, str | None, int]], own: str | None
) -> None:
    from skyward_verda.naming import InstanceView, description, instances_to_reap
    from skyward_verda.resources import resource_of_instance

    views = [
        InstanceView(str(i), f"h{i}", status, description(pool, expires) if pool else "my own box", None)
        for i, status, pool, expires in instances
    ]
    by_reaper = {d.instance.id for d in instances_to_reap(views, NOW, own)}
    raw = [{"id": v.id, "hostname": v.hostname, "status": v.status, "description": v.description} for v in views]
    listed = [r for r in (resource_of_instance(x) for x in raw) if r is not None]
    by_command = {r.id for r in doomed_resources(listed, NOW, own) if r.kind == INSTANCE}
    assert by_command == by_reaper
