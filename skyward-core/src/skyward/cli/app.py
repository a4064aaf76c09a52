"""The ``skyward`` command (Typer): ``ls``, ``logs``, ``down``, ``offers``, ``doctor``, ``cache``, ``sweep``.

The provider-specific parts come from each installed plugin through the
``skyward_provider_tools`` hook (see :mod:`skyward.providers.resources`), so a third-party
provider's resources show up here as AWS's do; Local is one of them (core's own plugin).
:func:`make_app` takes its seams (the tools, a configuration per provider, the clock, the
public-address lookup) as arguments: ``main`` uses the installed plugins, each provider's
defaults and the environment.

Tables and JSON go to stdout (they are what was asked for); progress, skipped providers
and errors go to stderr, each one line. Under ``--json`` stdout is JSON whatever happens,
a failure included (its message joins ``errors``). Bad input exits 2, anything left
behind or not working 1.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Annotated, NoReturn

import typer
from rich.console import Console
from typer._click import Context, Parameter  # typer vendors click: the types its hooks receive
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption
from typer.exceptions import TyperException

from skyward.accelerators.catalog import current_catalog
from skyward.api.kept import stop as stopping
from skyward.api.kept.record import RECORD_FILE, PoolRecord, PoolStore
from skyward.cli import cache as envcache
from skyward.cli import doctor as doctoring
from skyward.cli import offers as offering
from skyward.cli import pools, render
from skyward.cli import sweep as sweeper
from skyward.cli.opening import Opened, State, open_each
from skyward.errors import AttachError, ConfigurationError, SkywardError
from skyward.offer_table import query
from skyward.plugins.registry import get_plugin_manager
from skyward.providers.cloud.reaping import doomed_resources
from skyward.providers.resources import ProviderTools, Removal, Resource, ResourceSession
from skyward.storage import PRESETS, named
from skyward.version import __version__

BAD_INPUT = 2
LEFT_BEHIND = 1
DEBUG_ENV = "SKYWARD_DEBUG"
LOCAL = "local"


class CommandError(Exception):
    """One line for the user and the exit status."""

    def __init__(self, message: str, status: int = LEFT_BEHIND) -> None:
        super().__init__(message)
        self.status = status


def installed_tools() -> list[ProviderTools]:
    groups = get_plugin_manager().hook.skyward_provider_tools()
    return [tools for group in groups for tools in group]


def local_first(tools: Sequence[ProviderTools]) -> list[ProviderTools]:
    """Local first (it works on every machine), then the clouds by name (pure)."""
    return sorted(tools, key=lambda t: (t.name != LOCAL, t.name))


PIPE_WIDTH = 200  # columns for tables written to a pipe or file, where nothing wraps them


def console(*, stderr: bool) -> Console:
    """A terminal's own width; a pipe gets wide tables rather than truncated ids."""
    probe = Console(stderr=stderr)
    return probe if probe.is_terminal else Console(stderr=stderr, width=PIPE_WIDTH)


@dataclass
class Settings:
    """What every command reads: the providers' tools and configurations, the clock, the
    public-address lookup, the pool store, how a recorded pool is stopped, sleep (``logs
    --follow``); and what one run has said: its errors, whether JSON went out."""

    tools: Sequence[ProviderTools] | None = None
    configs: Mapping[str, object] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    address: Callable[[], str] | None = None
    run: sweeper.Runner = sweeper.run_command
    store: PoolStore | None = None
    stopper: stopping.Stopper | None = None
    sleep: Callable[[float], None] = time.sleep
    out: Console = field(default_factory=lambda: console(stderr=False))
    err: Console = field(default_factory=lambda: console(stderr=True))
    now_override: float | None = None
    errors: list[str] = field(default_factory=list)
    emitted: bool = False

    def now(self) -> float:
        return self.clock() if self.now_override is None else self.now_override

    def pool_store(self) -> PoolStore:
        """The injected store, else the one under ``$SKYWARD_HOME`` as it is now."""
        return self.store if self.store is not None else PoolStore()

    def live_pools(self, names: Sequence[str] | None) -> list[pools.PoolRow]:
        """The recorded pools that still run (of these providers, when named); the records
        of pools found over are removed, each said on stderr. Over is judged on the real
        clock, never on ``--now``: a pretend time must not delete a live pool's keys."""
        rows, over = pools.live_pools(self.pool_store(), self.clock())
        for record in over:
            self.say(pools.over_text(record))
        return [r for r in rows if not names or r.record.provider in names]

    def all_tools(self) -> list[ProviderTools]:
        return local_first(self.tools if self.tools is not None else installed_tools())

    def chosen(self, names: Sequence[str] | None) -> list[ProviderTools]:
        every = self.all_tools()
        if not every:
            raise CommandError("no provider is installed, not even Local: reinstall skyward-core", BAD_INPUT)
        if not names:
            return every
        known = {t.name: t for t in every}
        unknown = [n for n in names if n not in known]
        if unknown:
            raise CommandError(
                f"unknown provider {', '.join(map(repr, unknown))}: --provider takes one of "
                f"{', '.join(known)} (another cloud needs its plugin installed)",
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
        self.emitted = True


def usable(settings: Settings, names: Sequence[str] | None) -> tuple[list[Opened], list[dict[str, str]]]:
    """The chosen providers that are ready, and the skipped ones (not configured) as JSON
    rows; each one not ready is said on stderr and a fault (unreachable, refused, broken)
    joins the run's errors. None ready at all is a CommandError (exit 2)."""
    opened = open_each(settings.chosen(names), settings.open)
    skipped: list[dict[str, str]] = []
    for item in opened:
        if item.state is State.READY:
            continue
        settings.say(item.line())
        if item.state is State.NOT_CONFIGURED:
            skipped.append({"provider": item.name, "reason": f"not configured: {item.fix or item.detail}"})
        else:
            settings.errors.append(item.line())
    ready = [item for item in opened if item.state is State.READY]
    if not ready:
        why = "; ".join(f"{o.name}: {o.fix if o.state is State.NOT_CONFIGURED else o.detail}" for o in opened)
        if all(o.state in (State.NOT_CONFIGURED, State.REFUSED) for o in opened):
            raise CommandError(f"no provider has usable credentials ({why})", BAD_INPUT)
        raise CommandError(f"no provider could be used ({why})", BAD_INPUT)
    return ready, skipped


def list_everything(
    settings: Settings, names: Sequence[str] | None
) -> tuple[list[tuple[Opened, ResourceSession, list[Resource]]], list[dict[str, str]]]:
    ready, skipped = usable(settings, names)
    found: list[tuple[Opened, ResourceSession, list[Resource]]] = []
    for opened in ready:
        session = opened.session
        assert session is not None  # a ready provider has its session
        try:
            found.append((opened, session, session.resources()))
        except Exception as error:
            settings.errors.append(f"{opened.name}: {error}")
            settings.say(f"{opened.name}: could not list: {error}")
    return found, skipped


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


# -- help placeholders ------------------------------------------------------------------------


class PlainArgument(TyperArgument):
    """An argument shown by its name alone (``ACCELERATOR``), without ``<str>`` beside it."""

    def display_type_rich(self, ctx: Context) -> str | None:
        return None


def tidy_placeholders(params: Sequence[Parameter]) -> None:
    """Typer shows each parameter's Python type as its placeholder (``--json <bool>``,
    ``--provider <list[str]>``, ``POOL_ID <str>``): a flag gets none, a value its metavar
    or its name in capitals (``--nodes NODES``), an argument its name alone."""
    for param in params:
        if type(param) is TyperArgument:
            param.__class__ = PlainArgument  # the same object, help without the type column
        if not isinstance(param, TyperOption) or param.metavar is not None:
            continue
        param.metavar = "" if param.is_flag else (param.name or "value").upper()


class TidyCommand(TyperCommand):
    """A command whose help has clean placeholders and whose ``--provider`` help names
    the providers there are (``make_app`` subclasses it with ``provider_names``)."""

    provider_names: tuple[str, ...] = ()

    def get_params(self, ctx: Context) -> list[Parameter]:
        params = super().get_params(ctx)
        tidy_placeholders(params)
        for param in params:
            if isinstance(param, TyperOption) and param.name == "provider" and self.provider_names:
                param.help = f"{PROVIDERS_HELP}: {', '.join(self.provider_names)}."
        return params


class TidyGroup(TyperGroup):
    def get_params(self, ctx: Context) -> list[Parameter]:
        params = super().get_params(ctx)
        tidy_placeholders(params)
        return params


# -- the app --------------------------------------------------------------------------------


def _provider_names(incomplete: str) -> list[str]:
    return [t.name for t in local_first(installed_tools()) if t.name.startswith(incomplete)]


def _accelerator_names(incomplete: str) -> list[str]:
    return [m for m in current_catalog().models() if m.lower().startswith(incomplete.lower())]


JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of a table (errors too).")]
PROVIDERS_HELP = "Only this provider (repeatable)"
ProviderOption = Annotated[
    list[str] | None,
    typer.Option("--provider", "-p", metavar="NAME", help=PROVIDERS_HELP, autocompletion=_provider_names),
]


def _fail(settings: Settings, error: BaseException, as_json: bool, empty: Mapping[str, object]) -> NoReturn:
    status = error.status if isinstance(error, CommandError) else BAD_INPUT
    settings.say(f"skyward: {error}")
    if as_json and not settings.emitted:
        settings.emit_json({**empty, "errors": [*settings.errors, str(error)]})
    raise typer.Exit(status)


def version_text() -> str:
    plugins = [p for p in doctoring.plugin_versions() if p["distribution"] != "skyward-core"]
    listed = ", ".join(f"{p['distribution']} {p['version']}" for p in plugins)
    return f"skyward {__version__}" + (f" ({listed})" if listed else "")


def show_version(value: bool) -> None:
    """``--version``: one line, the core's version and each plugin distribution's."""
    if value:
        typer.echo(version_text())
        raise typer.Exit(0)


def make_app(
    *,
    tools: Sequence[ProviderTools] | None = None,
    configs: Mapping[str, object] | None = None,
    clock: Callable[[], float] = time.time,
    address: Callable[[], str] | None = None,
    run: sweeper.Runner = sweeper.run_command,
    store: PoolStore | None = None,
    stopper: stopping.Stopper | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> typer.Typer:
    """The command. ``tools`` replaces the installed plugins' (tests, embedding);
    ``configs`` maps a provider name to the configuration its tools open (default: the
    provider's defaults and the environment); ``clock`` gives the time; ``address`` is
    doctor's one public-address lookup (default: ask the address service); ``run`` runs
    ``crontab`` and ``systemctl`` for ``sweep``; ``store`` the pool records (default: under
    ``$SKYWARD_HOME`` when a command runs); ``stopper`` how ``down NAME`` stops a recorded
    pool (its messenger, process table, clock, sleep); ``sleep`` what ``logs --follow`` waits with."""
    settings = Settings(
        tools=tools, configs=dict(configs or {}), clock=clock, address=address, run=run, store=store,
        stopper=stopper, sleep=sleep,
    )  # fmt: skip
    command_class = type(
        "SkywardCommand", (TidyCommand,), {"provider_names": tuple(t.name for t in settings.all_tools())}
    )
    app = typer.Typer(
        name="skyward",
        help="See the pools this machine runs and what Skyward pools left on your cloud accounts, what it "
        "costs, stop and remove it, compare offers, and check the set-up.",
        no_args_is_help=True,
        add_completion=True,
        pretty_exceptions_enable=False,
        cls=TidyGroup,
    )

    def guarded(body: Callable[[], None], as_json: bool = False, empty: Mapping[str, object] | None = None) -> None:
        settings.errors.clear()
        settings.emitted = False
        shape = dict(empty or {})
        try:
            body()
        except (CommandError, ConfigurationError, SkywardError) as error:
            _fail(settings, error, as_json, shape)
        except (typer.Exit, typer.Abort):
            raise
        except Exception as error:
            if os.environ.get(DEBUG_ENV):
                raise
            _fail(
                settings,
                CommandError(f"{type(error).__name__}: {error} (set {DEBUG_ENV}=1 to see the traceback)", LEFT_BEHIND),
                as_json,
                shape,
            )

    @app.callback()
    def _root(
        now: Annotated[
            float | None, typer.Option("--now", hidden=True, help="Pretend it is this Unix time (expiry checks).")
        ] = None,
        version: Annotated[
            bool,
            typer.Option("--version", is_eager=True, callback=show_version, help="Print the versions and exit."),
        ] = False,
    ) -> None:
        settings.now_override = now

    @app.command("ls", cls=command_class)
    def ls(provider: ProviderOption = None, as_json: JsonOption = False) -> None:
        """The live pools this machine started (Local too), and every resource Skyward pools
        made on every provider that is set up."""

        def body() -> None:
            live = settings.live_pools(provider)
            found, skipped = list_everything(settings, provider)
            now = settings.now()
            everything = [r for _, _, listed in found for r in listed]
            if as_json:
                settings.emit_json(
                    {
                        "pools": [pools.pool_json(row, now) for row in live],
                        "resources": [render.resource_json(r, now) for r in everything],
                        "errors": settings.errors,
                        "skipped": skipped,
                    }
                )
            else:
                if live:
                    settings.out.print(pools.pools_table(live, now))
                settings.out.print(render.resources_table(everything, now))
                cost = sum(c for r in everything if (c := r.cost_so_far(now)) is not None)
                hourly = sum(r.hourly_price or 0.0 for r in everything)
                expired = sum(r.expired(now) for r in everything)
                looked = ", ".join(o.name for o, _, _ in found)
                settings.out.print(
                    f"{len(everything)} resource(s) on {looked}, {expired} past expiry; "
                    f"{render._maybe_rate(hourly)} now, {render._maybe_money(cost)} so far"
                )
            if settings.errors:
                raise CommandError(f"{len(settings.errors)} provider(s) could not be listed")

        guarded(body, as_json, {"pools": [], "resources": [], "skipped": []})

    @app.command("logs", cls=command_class)
    def logs(
        name: Annotated[str, typer.Argument(metavar="NAME", help="A recorded pool's name or pool id (`skyward ls`).")],
        follow: Annotated[
            bool, typer.Option("--follow", "-f", help="Keep printing new lines until the pool ends (or Ctrl-C).")
        ] = False,
        lines: Annotated[
            int | None, typer.Option("--lines", "-n", metavar="N", help="Only the last N lines there are now.")
        ] = None,
        as_json: Annotated[
            bool, typer.Option("--json", help='One JSON object per line: {"node": N, "line": "..."}.')
        ] = False,
    ) -> None:
        """The output of a pool's nodes as its clients received it, `\\[node N] text` a line."""

        def body() -> None:
            if lines is not None and lines < 0:
                raise CommandError(f"--lines {lines}: give a count of lines, 0 or more", BAD_INPUT)
            store = settings.pool_store()
            try:
                record = stopping.find_record(store, name)
            except AttachError as error:
                raise CommandError(str(error), BAD_INPUT) from None

            def ended() -> bool:
                return _ended(store, record)

            out = settings.out.file
            try:
                for line in pools.follow(store.output_path(record.name), ended, settings.sleep, lines, follow):
                    if as_json:
                        node, text = pools.parse_line(line)
                        out.write(json.dumps({"node": node, "line": text}) + "\n")
                    else:
                        out.write(line + "\n")
                    if follow:
                        out.flush()
            except KeyboardInterrupt:
                return  # Ctrl-C ends --follow: what was asked for, not a failure

        guarded(body, as_json, {})

    @app.command("down", cls=command_class)
    def down(
        pool_id: Annotated[
            str | None,
            typer.Argument(
                metavar="NAME|POOL_ID",
                help="A recorded pool (its name or pool id: its nodes are stopped, then its resources deleted), "
                "or any pool id whose resources to delete.",
            ),
        ] = None,
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
        log: Annotated[
            Path | None,
            typer.Option("--log", metavar="FILE", help="Append one JSON line saying what this run did (the sweep's)."),
        ] = None,
    ) -> None:
        """Stop a pool and delete its resources (or the expired ones, or all), verify they are gone,
        exit 1 if anything is left."""
        done = sweeper.SweepRun()

        def body() -> None:
            chosen = sum((pool_id is not None, expired, every))
            if chosen != 1:
                raise CommandError("give exactly one of NAME|POOL_ID, --expired or --all", BAD_INPUT)
            if pool_id is not None and stopping.recorded(settings.pool_store(), pool_id):
                stop_recorded(settings, pool_id, as_json)
                return
            found, skipped = list_everything(settings, provider)
            done.skipped = [s["provider"] for s in skipped]
            errors = settings.errors
            now = settings.now()
            plan = [
                (o, session, select(listed, pool_id=pool_id, expired=expired, every=every, now=now))
                for o, session, listed in found
            ]
            total = sum(len(items) for _, _, items in plan)
            searched = ", ".join(o.name for o, _, _ in found) or "no provider"
            if total == 0:
                if pool_id is not None:
                    known = ", ".join(settings.pool_store().names()) or "none"
                    raise CommandError(
                        f"no resources of pool {pool_id!r} on {searched}, and no pool of that name recorded here "
                        f"(recorded: {known}): `skyward ls` lists the pools there are",
                    )
                settings.say(f"nothing to delete on {searched}")
                if as_json:
                    settings.emit_json({"removals": [], "errors": errors})
                if errors:
                    raise CommandError(f"{len(errors)} provider(s) could not be listed")
                return
            if every and not yes:
                settings.err.print(render.resources_table([r for _, _, items in plan for r in items], now))
                if not typer.confirm(f"Delete these {total} resource(s)?", err=True):
                    raise CommandError("nothing deleted", LEFT_BEHIND)
            removals: list[Removal] = []
            for opened, session, items in plan:
                if not items:
                    continue
                settings.say(f"{opened.name}: deleting {len(items)} resource(s)...")
                try:
                    removals += session.delete(items)
                except Exception as error:
                    errors.append(f"{opened.name}: {error}")
                    removals += [Removal(r, removed=False, detail=str(error)) for r in items]
            if as_json:
                settings.emit_json({"removals": [render.removal_json(r, now) for r in removals], "errors": errors})
            else:
                settings.out.print(render.removals_table(removals))
                for name, (removed, left) in tally(removals).items():
                    settings.out.print(f"{name}: found {removed + left}, removed {removed}, left {left}")
            left_over = [r for r in removals if not r.removed]
            done.removed, done.left = len(removals) - len(left_over), len(left_over)
            if left_over or errors:
                raise CommandError(f"{len(left_over)} resource(s) are left; see above")

        status = 0
        try:
            guarded(body, as_json, {"removals": []})
        except typer.Exit as exited:
            status = exited.exit_code
            raise
        finally:
            if log is not None:
                sweeper.append_log(log, sweeper.log_line(settings.now(), status, done, settings.errors))

    @app.command("offers", cls=command_class)
    def offers(
        accelerator: Annotated[
            str | None,
            typer.Argument(
                metavar="ACCELERATOR",
                help="An accelerator such as A100, A100:8 or H100-80GB (none: CPU machines; --all lists them).",
                autocompletion=_accelerator_names,
            ),
        ] = None,
        nodes: Annotated[
            int, typer.Option("--nodes", "-n", metavar="N", help="Nodes in the pool (prices times this).")
        ] = 1,
        spot: Annotated[bool, typer.Option("--spot", help="Only offers with a spot market, priced on spot.")] = False,
        region: Annotated[
            str | None, typer.Option("--region", metavar="REGION", help="Only offers in this region.")
        ] = None,
        sort: Annotated[
            offering.SortKey,
            typer.Option(
                "--sort",
                metavar="price|gpu|memory",
                help="Order: cheapest pool first; by accelerator then count; most memory first.",
            ),
        ] = offering.SortKey.PRICE,
        every: Annotated[
            bool, typer.Option("--all", help="List the accelerators the catalog knows (names to ask for).")
        ] = False,
        provider: ProviderOption = None,
        as_json: JsonOption = False,
    ) -> None:
        """What each provider offers for one node, cheapest first: live with an account, from the
        catalogs the plugins ship without one."""

        def body() -> None:
            if every:
                if accelerator is not None:
                    raise CommandError("--all lists every accelerator: give it without ACCELERATOR", BAD_INPUT)
                entries = offering.accelerator_rows(current_catalog())
                if as_json:
                    settings.emit_json({"accelerators": [offering.accelerator_json(e) for e in entries], "errors": []})
                else:
                    settings.out.print(render.accelerators_table(entries))
                return
            wanted = query(accelerator, nodes=nodes, spot=spot)
            chosen = settings.chosen(provider)
            if not provider:
                chosen = [t for t in chosen if t.name != LOCAL]  # Local lists no offers
            gathered = offering.gather(open_each(chosen, settings.open), wanted, settings.say)
            settings.errors += gathered.errors
            rows = offering.ordered(offering.in_region(gathered.rows, region), sort, spot, nodes)
            failure = None
            if not rows:
                where = f" in {region}" if region else ""
                failure = f"no offer matches {accelerator or 'a CPU machine'}{' on spot' if spot else ''}{where}"
            elif settings.errors:
                failure = f"{len(settings.errors)} provider(s) could not list offers"
            if as_json:
                settings.emit_json(
                    {
                        "offers": [{**render.offer_json(r.offer, nodes, spot), "source": r.source} for r in rows],
                        "needs_account": [
                            {"provider": p, "for": what, "fix": fix} for p, what, fix in gathered.needs_account
                        ],
                        "errors": [*settings.errors, *([failure] if failure else [])],
                    }
                )
            else:
                settings.out.print(render.offers_table(rows, nodes, spot))
                for line in render.offers_notes(rows, gathered.needs_account):
                    settings.say(line)
            if failure:
                raise CommandError(failure)

        guarded(body, as_json, {"offers": [], "needs_account": []})

    @app.command("doctor", cls=command_class)
    def doctor(
        provider: ProviderOption = None,
        bucket: Annotated[
            str | None,
            typer.Option(
                "--bucket", metavar="NAME[/PREFIX]", help="Also list this volume's bucket with its storage's keys."
            ),
        ] = None,
        storage: Annotated[
            str,
            typer.Option("--storage", metavar="STORE", help=f"With --bucket: {', '.join(PRESETS)} (default s3)."),
        ] = "s3",
        region: Annotated[str | None, typer.Option("--region", help="With --bucket: the store's region.")] = None,
        account_id: Annotated[str | None, typer.Option("--account-id", help="With --storage r2.")] = None,
        endpoint: Annotated[str | None, typer.Option("--endpoint", help="With --storage s3-compatible.")] = None,
        as_json: JsonOption = False,
    ) -> None:
        """What is ready (Local first), what is not set up, what is broken and how to fix it;
        with --bucket, whether a sky.Volume's bucket answers to its storage's keys (read from
        the variables each store names, as sky.storage does). Exits 1 only when something is broken."""

        def body() -> None:
            volume = doctoring.bucket_entry(bucket, named(storage, region, account_id, endpoint)) if bucket else None
            opened = open_each(settings.chosen(provider), settings.open)
            ask = settings.address or doctoring._default_lookup
            report = doctoring.diagnose(opened, ask, settings.now)
            if volume is not None:
                report["volumes"] = [volume]
                if not volume["ok"]:
                    report["fixes"].append(f"volume {volume['detail']}")
            if as_json:
                settings.emit_json({**report, "errors": report["fixes"]})
            else:
                doctoring.print_diagnosis(settings.out, report)
            if report["fixes"]:
                raise typer.Exit(LEFT_BEHIND)

        guarded(body, as_json, {"providers": [], "fixes": []})

    @app.command("sweep", cls=command_class)
    def sweep(
        install: Annotated[
            bool, typer.Option("--install", help="Schedule `skyward down --expired` (systemd user timer, else cron).")
        ] = False,
        uninstall: Annotated[bool, typer.Option("--uninstall", help="Remove what --install installed.")] = False,
        status: Annotated[bool, typer.Option("--status", help="Say whether it is installed (the default).")] = False,
        every: Annotated[
            str | None,
            typer.Option("--every", metavar="DURATION", help="How often, with --install: 5m to 24h (default 15m)."),
        ] = None,
        as_json: JsonOption = False,
    ) -> None:
        """Schedule `skyward down --expired`, so a stopped node that still bills (DigitalOcean, Verda, VastAI,
        RunPod) is deleted within minutes without a pool start."""

        def body() -> None:
            try:
                done = sweeper.answer(
                    settings.run, envcache.skyward_home(), settings.now(), install, uninstall, status, every
                )
            except sweeper.SweepFailed as error:  # crontab or systemctl refused: not bad input
                raise CommandError(str(error)) from error
            for line in done.said:
                settings.say(line)
            if as_json:
                settings.emit_json(done.json)
            for line in [] if as_json else done.lines:
                settings.out.print(line, markup=False, highlight=False, soft_wrap=True)
            if done.failed:
                raise typer.Exit(LEFT_BEHIND)

        guarded(body, as_json, {"installed": False})

    cache_app = typer.Typer(
        help="The environments built for Local pools and the wheels built for cloud nodes.",
        no_args_is_help=True,
        cls=TidyGroup,
    )
    app.add_typer(cache_app, name="cache")

    @cache_app.command("ls", cls=command_class)
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

    @cache_app.command("clear", cls=command_class)
    def cache_clear(
        names: Annotated[
            list[str] | None,
            typer.Argument(metavar="[NAME]...", help="Only these environments or wheels (default: all)."),
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


def _ended(store: PoolStore, record: PoolRecord) -> bool:
    """Whether the pool ``record`` is no longer recorded (it ended, or a new pool took the name)."""
    try:
        return not (store.path(record.name) / RECORD_FILE).is_file() or store.record(record.name).pool_id != (
            record.pool_id
        )
    except AttachError:
        return True


def stop_recorded(settings: Settings, name: str, as_json: bool) -> None:
    """``skyward down NAME`` for a recorded pool: stop it (``skyward.api.kept.stop``), a
    cloud pool's resources deleted through this command's own sessions, and say how."""
    store = settings.pool_store()
    record = stopping.find_record(store, name)
    client = stopping.attached_client(store, record)
    if client is not None:
        settings.say(f"pool {record.name}: its client (process {client}) is attached: it loses the pool")

    def delete(record: PoolRecord) -> list[Removal]:
        found, _skipped = list_everything(settings, [record.provider])
        removals: list[Removal] = []
        for opened, session, listed in found:
            mine = [r for r in listed if r.pool_id == record.pool_id]
            if mine:
                settings.say(f"{opened.name}: deleting {len(mine)} resource(s) of pool {record.pool_id}...")
                removals += session.delete(mine)
        if settings.errors:
            raise CommandError("; ".join(settings.errors))
        return removals

    stopper = settings.stopper or stopping.Stopper()
    if stopper.delete is None and record.provider != stopping.LOCAL:
        stopper = replace(stopper, delete=delete)
    settings.say(f"stopping pool {record.name} ({record.provider}, {len(record.nodes)} node(s))...")
    report = stopper.stop(store, record.name)
    now = settings.now()
    if as_json:
        settings.emit_json(
            {
                "pool": pools.stop_json(report),
                "removals": [render.removal_json(r, now) for r in report.removals],
                "errors": report.left,
            }
        )
    else:
        for line in pools.stop_lines(report):
            settings.out.print(line, markup=False, highlight=False)
        if report.removals:
            settings.out.print(render.removals_table(report.removals))
            for provider, (removed, left) in tally(report.removals).items():
                settings.out.print(f"{provider}: found {removed + left}, removed {removed}, left {left}")
    if not report.ok:
        raise CommandError(f"pool {record.name}: {len(report.left)} thing(s) left: {'; '.join(report.left)}")


def main() -> None:
    """The console script. A usage error (an unknown flag, a bad value) under ``--json``
    is JSON too, like every other failure."""
    app = make_app()
    if "--json" not in sys.argv[1:]:
        app(prog_name="skyward")
        return
    command = typer.main.get_command(app)
    try:
        status = command.main(args=sys.argv[1:], prog_name="skyward", standalone_mode=False)
    except TyperException as error:  # a usage error: an unknown flag, a bad value
        typer.echo(f"skyward: {error.format_message()}", err=True)
        typer.echo(json.dumps({"errors": [error.format_message()]}, indent=2))
        raise SystemExit(BAD_INPUT) from None
    except typer.Exit as done:
        raise SystemExit(done.exit_code) from None
    except typer.Abort:
        raise SystemExit(LEFT_BEHIND) from None
    raise SystemExit(status if isinstance(status, int) else 0)  # outside standalone mode an exit is returned


if __name__ == "__main__":  # pragma: no cover
    main()
