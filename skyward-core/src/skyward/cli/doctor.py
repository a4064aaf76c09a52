"""``skyward doctor``: what is ready, what is not set up, what is broken, and what to fix.

Only a broken thing is a fix and makes the exit status 1: credentials refused, an API
that cannot be reached while its credentials are set, a failed account check, a
configuration refused. A cloud with no credentials is "not configured": on a fresh
machine Local is ready and nothing is broken, so doctor exits 0 and says how to set each
cloud up. The public address (what a cloud firewall opens the agent port to) is asked
once for the whole run (:func:`~skyward.providers.cloud.addresses.one_lookup_per_url`),
not once per cloud. The run's own lookup is information (Local needs no network); what
is a fix is a configured cloud that cannot be reached or whose firewall address cannot
be found.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from typing import Any

from rich.console import Console

from skyward.cli import cache as envcache
from skyward.cli import render
from skyward.cli import sweep as sweeper
from skyward.cli.opening import Opened, State
from skyward.errors import SkywardError
from skyward.plugins.registry import get_plugin_manager
from skyward.providers import buckets
from skyward.providers.checks import AccountCheck, AccountChecks
from skyward.providers.cloud.addresses import discover_client_address, firewall_source, one_lookup_per_url
from skyward.providers.cloud.settings import DEFAULT_ADDRESS_URL
from skyward.providers.reachability import unreachable
from skyward.providers.resources import AddressSource
from skyward.providers.sweeping import read_marker
from skyward.storage import S3Compatible
from skyward.storage_probe import check_bucket

ADDRESS_TIMEOUT = 5.0  # seconds: an offline machine must not hold doctor up


def plugin_versions() -> list[dict[str, str]]:
    """Every distribution that registers ``skyward`` plugins, with its version."""
    seen: dict[str, str] = {"skyward-core": metadata.version("skyward-core")}
    for _plugin, dist in get_plugin_manager().list_plugin_distinfo():
        seen[str(dist.project_name)] = str(dist.version)
    return [{"distribution": k, "version": v} for k, v in sorted(seen.items())]


def public_address(ask: Callable[[], str]) -> dict[str, Any]:
    """This machine's public address as the default address service sees it, or why not."""
    try:
        return {"address": ask(), "detail": f"as {DEFAULT_ADDRESS_URL} sees it"}
    except (OSError, SkywardError) as error:
        offline = unreachable(error, DEFAULT_ADDRESS_URL.split("//", 1)[-1])
        return {"address": None, "detail": str(offline) if offline is not None else str(error)}


def _default_lookup() -> str:
    return firewall_source(discover_client_address(DEFAULT_ADDRESS_URL, ADDRESS_TIMEOUT, "AWS"))


def account_checks(session: AccountChecks, provider: str) -> list[AccountCheck]:
    """The session's account checks; one that cannot run at all is one failed check."""
    try:
        return session.account_checks()
    except Exception as error:
        offline = unreachable(error)
        detail = str(offline) if offline is not None else f"{type(error).__name__}: {error}"
        return [AccountCheck(provider, "account", False, detail, "run doctor again later")]


def provider_entry(item: Opened, fixes: list[str]) -> dict[str, Any]:
    """One provider's part of the report; its problems are added to ``fixes``."""
    session = item.session
    entry: dict[str, Any] = {
        "provider": item.name,
        "state": str(item.state),
        "region": session.region if session is not None else None,
        "credentials_found": item.state is not State.NOT_CONFIGURED,
        "credentials_valid": item.state is State.READY,
        "reachable": item.state is not State.UNREACHABLE,
        "detail": item.detail,
        "fix": item.fix,
    }
    if item.state in (State.UNREACHABLE, State.REFUSED, State.BROKEN):
        fixes.append(f"{item.name}: {item.fix or item.detail}")
    if item.state is not State.READY or session is None:
        return entry
    if isinstance(session, AccountChecks):
        checks = account_checks(session, item.name)
        fixes += [f"{item.name}: {c.name}: {c.fix}" for c in checks if not c.ok]
        entry["checks"] = [{"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix} for c in checks]
    if isinstance(session, AddressSource):
        try:
            entry["client_address"] = session.client_address()
        except Exception as error:
            entry["client_address"] = None
            offline = unreachable(error)
            fixes.append(f"{item.name}: {offline or error}")
    return entry


def bucket_entry(bucket: str, storage: S3Compatible) -> dict[str, Any]:
    """``--bucket NAME[/PREFIX]`` listed with ``storage`` (one signed request, from here)."""
    name, _, prefix = bucket.partition("/") if "://" not in bucket else (bucket, "", "")  # a URL: refused whole
    buckets.bucket_name("--bucket {!r}", name)
    check = check_bucket(storage, name, buckets.key_prefix("--bucket prefix {!r}", prefix))
    return {"bucket": bucket, "storage": storage.name, "ok": check.ok, "detail": check.detail}


def diagnose(
    opened: Sequence[Opened], ask_address: Callable[[], str] = _default_lookup, now: Callable[[], float] = time.time
) -> dict[str, Any]:
    """The whole report (JSON-ready); ``ask_address`` is the one public-address lookup.
    The sweep's entry is read from its marker and log only (``skyward sweep`` checks the
    crontab or timer itself): not installed, or a run that stopped, is said, not a fix."""
    fixes: list[str] = []
    with one_lookup_per_url():
        network = public_address(ask_address)
        providers = [provider_entry(item, fixes) for item in opened]
    home = envcache.skyward_home()
    envs = envcache.environments(home)
    return {
        "ready": [p["provider"] for p in providers if p["state"] == State.READY],
        "plugins": plugin_versions(),
        "providers": providers,
        "network": network,
        "skyward_home": str(home),
        "environments": [render.environment_json(e) for e in envs],
        "cache_size": sum(e.size for e in envs),
        "sweep": sweeper.report(home, read_marker(home), now()),
        "fixes": fixes,
    }


def _section(out: Console, title: str, rows: Sequence[tuple[str, str]]) -> None:
    if not rows:
        return
    out.print(f"[bold]{title}[/bold]")
    width = max(len(name) for name, _ in rows)
    for name, text in rows:
        out.print(f"  {name:<{width}}  {text}", markup=False, highlight=False)


def print_diagnosis(out: Console, report: Mapping[str, Any]) -> None:
    providers = report["providers"]
    by_state: dict[str, list[Mapping[str, Any]]] = {}
    for p in providers:
        by_state.setdefault(p["state"], []).append(p)
    ready_rows = []
    for p in by_state.get(State.READY, []):
        text = p["detail"] if p["provider"] == "local" else f"{p['region']}: {p['detail']}"
        if p.get("client_address"):
            text += f"; firewall opens to {p['client_address']}"
        ready_rows.append((p["provider"], text))
    _section(out, "ready", ready_rows)
    for p in by_state.get(State.READY, []):
        for check in p.get("checks", ()):
            mark = "ok" if check["ok"] else "FAIL"
            out.print(f"    {p['provider']}: {mark} {check['name']}: {check['detail']}", markup=False, highlight=False)
    _section(
        out,
        "not configured (no credentials: set one up to use it)",
        [(p["provider"], p["fix"] or p["detail"]) for p in by_state.get(State.NOT_CONFIGURED, [])],
    )
    broken = [p for s in (State.UNREACHABLE, State.REFUSED, State.BROKEN) for p in by_state.get(s, [])]
    _section(out, "not working", [(p["provider"], f"{p['state']}: {p['detail']}") for p in broken])
    network = report["network"]
    shown = network["address"] or network["detail"]
    suffix = f" ({network['detail']})" if network["address"] else " (cloud pools need it; Local does not)"
    out.print(f"[bold]network[/bold] public address: {shown}{suffix}", highlight=False)
    out.print("[bold]plugins[/bold] " + ", ".join(f"{p['distribution']} {p['version']}" for p in report["plugins"]),
              highlight=False)  # fmt: skip
    envs = report["environments"]
    out.print(
        f"[bold]cache[/bold] {report['skyward_home']}: {len(envs)} environment(s), "
        f"{render.size_text(report['cache_size'])}",
        highlight=False,
    )
    for volume in report.get("volumes", ()):
        mark = "ok" if volume["ok"] else "FAIL"
        out.print(f"volume {mark} {volume['detail']}", highlight=False, markup=False)
    for line in sweeper.status_lines(report["sweep"]):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    if report["fixes"]:
        out.print("[bold]to fix[/bold]")
        for fix in report["fixes"]:
            out.print(f"  {fix}", markup=False, highlight=False)
    else:
        ready = ", ".join(report["ready"]) or "nothing"
        out.print(f"nothing to fix; ready: {ready}", highlight=False)
