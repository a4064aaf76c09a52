"""The ``skyward`` command (Typer): ``ls``, ``down``, ``offers``, ``doctor``, ``cache``.

The provider-specific parts come from each installed plugin through the
``skyward_provider_tools`` hook (see :mod:`skyward.providers.resources`), so a third-party
provider's resources show up here as AWS's do. :func:`make_app` takes its seams (the
tools, a configuration per provider, the clock) as arguments: ``main`` uses the
installed plugins, each provider's defaults and the environment.

Tables and JSON go to stdout (they are what was asked for); progress, skipped providers
and errors go to stderr, each one line. Bad input exits 2, anything left behind 1.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from skyward.cli import cache as envcache
from skyward.cli import render
from skyward.errors import ConfigurationError, SkywardError
from skyward.offer_table import collect, query
from skyward.plugins.registry import get_plugin_manager
from skyward.providers.checks import AccountCheck, AccountChecks
from skyward.providers.cloud.reaping import doomed_resources
from skyward.providers.resources import (
    AddressSource,
    CredentialCheck,
    ProviderTools,
    Removal,
    Resource,
    ResourceSession,
)

BAD_INPUT = 2
LEFT_BEHIND = 1
DEBUG_ENV = "SKYWARD_DEBUG"


class CommandError(Exception):
    """One line for the user and the exit status."""

    def __init__(self, message: str, status: int = LEFT_BEHIND) -> None:
        super().__init__(message)
        self.status = status


def installed_tools() -> list[ProviderTools]:
    groups = get_plugin_manager().hook.skyward_provider_tools()
    return [tools for group in groups for tools in group]


PIPE_WIDTH = 200  # columns for tables written to a pipe or file, where nothing wraps them


def console(*, stderr: bool) -> Console:
    """A terminal's own width; a pipe gets wide tables rather than truncated ids."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=PIPE_WIDTH)


@dataclass
class Settings:
    """What every command reads: the providers' tools and configurations, the clock."""

    tools: Sequence[ProviderTools] | None = None
    configs: Mapping[str, object] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    out: Console = field(default_factory=lambda: console(stderr=False))
    err: Console = field(default_factory=lambda: console(stderr=True))
    now_override: float | None = None

    def now(self) -> float:
        return self.clock() if self.now_override is None else self.now_override

    def all_tools(self) -> list[ProviderTools]:
        return list(self.tools) if self.tools is not None else installed_tools()

    def chosen(self, names: Sequence[str] | None) -> list[ProviderTools]:
        every = self.all_tools()
        if not every:
            raise CommandError(
                "no provider plugin is installed: pip install 'skyward[aws]' (or digitalocean, verda)", BAD_INPUT
            )
        if not names:
            return every
        known = {t.name: t for t in every}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise CommandError(
                f"unknown provider {', '.join(map(repr, unknown))}: installed are {', '.join(sorted(known))}",
                BAD_INPUT,
            )
        return [known[n] for n in dict.fromkeys(names)]

    def open(self, tools: ProviderTools) -> ResourceSession:
        session = tools.open(self.configs.get(tools.name))
        if not isinstance(session, ResourceSession):
            raise CommandError(f"the {tools.name} plugin's tools do not list resources (a plugin bug)")
        return session

    def say(self, message: str) -> None:
        self.err.print(message, markup=False, highlight=False, soft_wrap=True)

    def emit_json(self, value: object) -> None:
        self.out.file.write(json.dumps(value, indent=2, sort_keys=True) + "\n")


@dataclass(frozen=True, slots=True)
class Opened:
    tools: ProviderTools
    session: ResourceSession
    check: CredentialCheck


def with_credentials(settings: Settings, names: Sequence[str] | None) -> Iterator[Opened]:
    """The chosen providers whose credentials are found, each said on stderr when skipped;
    none at all is a CommandError."""
    checks: list[CredentialCheck] = []
    yielded = 0
    for tools in settings.chosen(names):
        try:
            session = settings.open(tools)
            check = session.check()
        except CommandError:
            raise
        except Exception as error:  # a bad configuration, an unreachable API: that provider only
            check = CredentialCheck(tools.name, True, False, f"{type(error).__name__}: {error}")
            checks.append(check)
            settings.say(f"{tools.name}: could not check the credentials: {check.detail}")
            continue
        checks.append(check)
        if not check.found:
            settings.say(f"{tools.name}: skipped, {check.detail} ({check.fix})")
            continue
        if not check.valid:
            settings.say(f"{tools.name}: credentials not accepted: {check.detail}")
            continue
        yielded += 1
        yield Opened(tools, session, check)
    if yielded == 0:
        fixes = "; ".join(f"{c.provider}: {c.fix or c.detail}" for c in checks)
        raise CommandError(f"no provider has usable credentials ({fixes})", BAD_INPUT)


def list_everything(
    settings: Settings, names: Sequence[str] | None
) -> tuple[list[tuple[Opened, list[Resource]]], list[str]]:
    found: list[tuple[Opened, list[Resource]]] = []
    errors: list[str] = []
    for opened in with_credentials(settings, names):
        try:
            found.append((opened, opened.session.resources()))
        except Exception as error:
            errors.append(f"{opened.tools.name}: {error}")
            settings.say(f"{opened.tools.name}: could not list: {error}")
    return found, errors


# -- selection (pure) ----------------------------------------------------------------------


def select(
    resources: Sequence[Resource], *, pool_id: str | None, expired: bool, every: bool, now: float
) -> list[Resource]:
    if every:
        return list(resources)
    if expired:
        return doomed_resources(resources, now)
    return [r for r in resources if r.pool_id == pool_id]


def tally(removals: Sequence[Removal]) -> dict[str, tuple[int, int]]:
    """(removed, left) per provider (pure)."""
    counts: dict[str, tuple[int, int]] = {}
    for item in removals:
        removed, left = counts.get(item.resource.provider, (0, 0))
        counts[item.resource.provider] = (removed + item.removed, left + (not item.removed))
    return counts


# -- the app --------------------------------------------------------------------------------

ProviderOption = Annotated[list[str] | None, typer.Option("--provider", "-p", help="Only this provider (repeatable).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table.")]


def _fail(settings: Settings, error: BaseException) -> NoReturn:
    status = error.status if isinstance(error, CommandError) else BAD_INPUT
    settings.say(f"skyward: {error}")
    raise typer.Exit(status)


def make_app(
    *,
    tools: Sequence[ProviderTools] | None = None,
    configs: Mapping[str, object] | None = None,
    clock: Callable[[], float] = time.time,
) -> typer.Typer:
    """The command. ``tools`` replaces the installed plugins' (tests, embedding);
    ``configs`` maps a provider name to the configuration its tools open (default: the
    provider's defaults and the environment); ``clock`` gives the time."""
    settings = Settings(tools=tools, configs=dict(configs or {}), clock=clock)
    app = typer.Typer(
        name="skyward",
        help="See what Skyward pools left on your cloud accounts and what it costs, remove it, "
        "compare offers, and check the set-up.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )

    def guarded(body: Callable[[], None]) -> None:
        try:
            body()
        except (CommandError, ConfigurationError, SkywardError) as error:
            _fail(settings, error)
        except (typer.Exit, typer.Abort):
            raise
        except Exception as error:
            if os.environ.get(DEBUG_ENV):
                raise
            _fail(
                settings,
                CommandError(f"{type(error).__name__}: {error} (set {DEBUG_ENV}=1 to see the traceback)", LEFT_BEHIND),
            )

    @app.callback()
    def _root(
        now: Annotated[
            float | None, typer.Option("--now", hidden=True, help="Pretend it is this Unix time (expiry checks).")
        ] = None,
    ) -> None:
        settings.now_override = now

    @app.command("ls")
    def ls(provider: ProviderOption = None, as_json: JsonOption = False) -> None:
        """Every resource Skyward pools made, on every provider with credentials."""

        def body() -> None:
            found, errors = list_everything(settings, provider)
            now = settings.now()
            everything = [r for _, listed in found for r in listed]
            if as_json:
                settings.emit_json({"resources": [render.resource_json(r, now) for r in everything], "errors": errors})
            else:
                settings.out.print(render.resources_table(everything, now))
                cost = sum(c for r in everything if (c := r.cost_so_far(now)) is not None)
                hourly = sum(r.hourly_price or 0.0 for r in everything)
                expired = sum(r.expired(now) for r in everything)
                settings.out.print(
                    f"{len(everything)} resource(s), {expired} past expiry; "
                    f"{render._maybe_rate(hourly)} now, {render._maybe_money(cost)} so far"
                )
            if errors:
                raise CommandError(f"{len(errors)} provider(s) could not be listed")

        guarded(body)

    @app.command("down")
    def down(
        pool_id: Annotated[str | None, typer.Argument(help="The pool whose resources to delete.")] = None,
        expired: Annotated[
            bool,
            typer.Option(
                "--expired", help="Delete what is past its pool's expiry, and stopped machines that still bill."
            ),
        ] = False,
        every: Annotated[bool, typer.Option("--all", help="Delete every Skyward resource (asks first).")] = False,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask before --all.")] = False,
        provider: ProviderOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """Delete a pool's resources (or the expired ones, or all), verify they are gone, exit 1 if any is left."""

        def body() -> None:
            chosen = sum((pool_id is not None, expired, every))
            if chosen != 1:
                raise CommandError("give exactly one of POOL_ID, --expired or --all", BAD_INPUT)
            found, errors = list_everything(settings, provider)
            now = settings.now()
            plan = [(o, select(listed, pool_id=pool_id, expired=expired, every=every, now=now)) for o, listed in found]
            total = sum(len(items) for _, items in plan)
            searched = ", ".join(o.tools.name for o, _ in found) or "no provider"
            if total == 0:
                if pool_id is not None:
                    raise CommandError(
                        f"no resources of pool {pool_id!r} on {searched}: `skyward ls` lists the pools there are",
                    )
                settings.say(f"nothing to delete on {searched}")
                if as_json:
                    settings.emit_json({"removals": [], "errors": errors})
                if errors:
                    raise CommandError(f"{len(errors)} provider(s) could not be listed")
                return
            if every and not yes:
                settings.err.print(render.resources_table([r for _, items in plan for r in items], now))
                if not typer.confirm(f"Delete these {total} resource(s)?", err=True):
                    raise CommandError("nothing deleted", LEFT_BEHIND)
            removals: list[Removal] = []
            for opened, items in plan:
                if not items:
                    continue
                settings.say(f"{opened.tools.name}: deleting {len(items)} resource(s)...")
                try:
                    removals += opened.session.delete(items)
                except Exception as error:
                    errors.append(f"{opened.tools.name}: {error}")
                    removals += [Removal(r, removed=False, detail=str(error)) for r in items]
            if as_json:
                settings.emit_json({"removals": [render.removal_json(r, now) for r in removals], "errors": errors})
            else:
                settings.out.print(render.removals_table(removals))
                for name, (removed, left) in tally(removals).items():
                    settings.out.print(f"{name}: found {removed + left}, removed {removed}, left {left}")
            left_over = [r for r in removals if not r.removed]
            if left_over or errors:
                raise CommandError(f"{len(left_over)} resource(s) are left; see above")

        guarded(body)

    @app.command("offers")
    def offers(
        accelerator: Annotated[
            str | None, typer.Argument(help="An accelerator such as A100, A100:8 or H100-80GB (none: CPU machines).")
        ] = None,
        nodes: Annotated[int, typer.Option("--nodes", "-n", help="Nodes in the pool (prices times this).")] = 1,
        spot: Annotated[bool, typer.Option("--spot", help="Only offers with a spot market, priced on spot.")] = False,
        provider: ProviderOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """What each provider offers for one node, cheapest first."""

        def body() -> None:
            wanted = query(accelerator, nodes=nodes, spot=spot)
            errors: list[str] = []

            def skipped(name: str, why: str) -> None:
                settings.say(f"{name}: {why}")
                if why != "this plugin lists no offers":
                    errors.append(f"{name}: {why}")

            sources = ((opened.tools.name, opened.session) for opened in with_credentials(settings, provider))
            found = list(collect(sources, wanted, on_skip=skipped))
            if as_json:
                settings.emit_json({"offers": [render.offer_json(o, nodes, spot) for o in found], "errors": errors})
            else:
                settings.out.print(render.offers_table(found, nodes, spot))
            if errors:
                raise CommandError(f"{len(errors)} provider(s) could not list offers")
            if not found:
                raise CommandError(f"no offer matches {accelerator or 'a CPU machine'}{' on spot' if spot else ''}")

        guarded(body)

    @app.command("doctor")
    def doctor(provider: ProviderOption = None, as_json: JsonOption = False) -> None:
        """Plugins, each provider's credentials, client address and account checks, the cache, and what to fix."""

        def body() -> None:
            report = diagnose(settings, provider)
            if as_json:
                settings.emit_json(report)
            else:
                print_diagnosis(settings, report)
            if report["fixes"]:
                raise typer.Exit(LEFT_BEHIND)

        guarded(body)

    cache_app = typer.Typer(
        help="The environments built for Local pools and the wheels built for cloud nodes.", no_args_is_help=True
    )
    app.add_typer(cache_app, name="cache")

    @cache_app.command("ls")
    def cache_ls(as_json: JsonOption = False) -> None:
        """Cached environments and wheels with their size and last use."""
        home = envcache.skyward_home()
        envs, built = envcache.environments(home), envcache.wheels(home)
        if as_json:
            settings.emit_json(
                {
                    "environments": [render.environment_json(e) for e in envs],
                    "wheels": [render.environment_json(w) for w in built],
                }
            )
        else:
            settings.out.print(render.environments_table(envs, settings.now()))
            if built:
                settings.out.print(render.environments_table(built, settings.now(), kind="wheel"))
            total = sum(e.size for e in (*envs, *built))
            settings.out.print(
                f"{len(envs)} environment(s), {len(built)} wheel(s), {render.size_text(total)} in {home}"
            )

    @cache_app.command("clear")
    def cache_clear(
        names: Annotated[
            list[str] | None, typer.Argument(help="Only these environments or wheels (default: all).")
        ] = None,
        yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    ) -> None:
        """Remove cached environments and wheels (never an environment a running process uses)."""

        def body() -> None:
            envs = envcache.cached(envcache.skyward_home())
            if names:
                known = {e.name for e in envs}
                unknown = [n for n in names if n not in known]
                if unknown:
                    raise CommandError(f"no cached environment or wheel {', '.join(map(repr, unknown))}", BAD_INPUT)
                envs = [e for e in envs if e.name in names]
            if not envs:
                settings.say("no cached environments or wheels")
                return
            total = sum(e.size for e in envs)
            if not yes and not typer.confirm(
                f"Remove {len(envs)} cached environment(s) and wheel(s), {render.size_text(total)}?", err=True
            ):
                raise CommandError("nothing removed")
            running = envcache.running_executables()
            kept = 0
            for env in envs:
                if envcache.in_use(env, running):
                    settings.say(f"kept {env.name}: a running process uses it")
                    kept += 1
                    continue
                envcache.remove(env)
                settings.out.print(f"removed {env.name} ({render.size_text(env.size)})")
            if kept:
                raise CommandError(f"{kept} environment(s) in use were kept")

        guarded(body)

    return app


# -- doctor ---------------------------------------------------------------------------------


def plugin_versions() -> list[dict[str, str]]:
    """Every distribution that registers ``skyward`` plugins, with its version."""
    seen: dict[str, str] = {"skyward-core": metadata.version("skyward-core")}
    for _plugin, dist in get_plugin_manager().list_plugin_distinfo():
        seen[str(dist.project_name)] = str(dist.version)
    return [{"distribution": k, "version": v} for k, v in sorted(seen.items())]


def diagnose(settings: Settings, names: Sequence[str] | None) -> dict[str, Any]:
    fixes: list[str] = []
    providers: list[dict[str, Any]] = []
    for tools in settings.chosen(names):
        try:
            session = settings.open(tools)
            check = session.check()
        except Exception as error:  # a bad configuration: said, and the other providers still checked
            detail = f"{type(error).__name__}: {error}"
            providers.append(
                {"provider": tools.name, "credentials_found": False, "credentials_valid": False, "detail": detail}
            )
            fixes.append(f"{tools.name}: {detail}")
            continue
        entry: dict[str, Any] = {
            "provider": tools.name,
            "region": session.region,
            "credentials_found": check.found,
            "credentials_valid": check.valid,
            "detail": check.detail,
        }
        if not check.valid:
            fixes.append(f"{tools.name}: {check.fix or check.detail}")
        elif isinstance(session, AccountChecks):
            entry["checks"] = account_checks(session, tools.name, fixes)
        if isinstance(session, AddressSource):
            try:
                entry["client_address"] = session.client_address()
            except Exception as error:
                entry["client_address"] = None
                fixes.append(f"{tools.name}: {error}")
        providers.append(entry)
    home = envcache.skyward_home()
    envs = envcache.environments(home)
    return {
        "plugins": plugin_versions(),
        "providers": providers,
        "skyward_home": str(home),
        "environments": [render.environment_json(e) for e in envs],
        "cache_size": sum(e.size for e in envs),
        "fixes": fixes,
    }


def account_checks(session: AccountChecks, provider: str, fixes: list[str]) -> list[dict[str, Any]]:
    """The session's account checks as JSON; each failed one adds its fix to ``fixes``.
    A check that cannot run at all is reported as one failed check, not raised."""
    try:
        found = session.account_checks()
    except Exception as error:
        found = [AccountCheck(provider, "account", False, f"{type(error).__name__}: {error}", "run doctor again later")]
    for check in found:
        if not check.ok:
            fixes.append(f"{provider}: {check.name}: {check.fix}")
    return [{"name": c.name, "ok": c.ok, "detail": c.detail, "fix": c.fix} for c in found]


def print_diagnosis(settings: Settings, report: Mapping[str, Any]) -> None:
    out = settings.out
    out.print("[bold]plugins[/bold]")
    for plugin in report["plugins"]:
        out.print(f"  {plugin['distribution']} {plugin['version']}", highlight=False)
    out.print("[bold]providers[/bold]")
    for p in report["providers"]:
        state = "valid" if p["credentials_valid"] else ("not accepted" if p["credentials_found"] else "not found")
        line = f"  {p['provider']} ({p.get('region', '?')}): credentials {state}: {p['detail']}"
        if "client_address" in p:
            line += f"; firewall opens to {p['client_address'] or '?'}"
        out.print(line, markup=False, highlight=False)
        for check in p.get("checks", ()):
            mark = "ok" if check["ok"] else "FAIL"
            out.print(f"    {mark} {check['name']}: {check['detail']}", markup=False, highlight=False)
    envs = report["environments"]
    out.print(
        f"[bold]cache[/bold] {report['skyward_home']}: {len(envs)} environment(s), "
        f"{render.size_text(report['cache_size'])}",
        highlight=False,
    )
    if report["fixes"]:
        out.print("[bold]to fix[/bold]")
        for fix in report["fixes"]:
            out.print(f"  {fix}", markup=False, highlight=False)
    else:
        out.print("nothing to fix")


def main() -> None:
    """The console script."""
    app = make_app()
    app(prog_name="skyward")


if __name__ == "__main__":  # pragma: no cover
    main()
