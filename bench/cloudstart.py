#!/usr/bin/env python3
"""Cloud start: ``ComputePool(...)`` to the first result on the emulated clouds, by phase.

``python bench/cloudstart.py --quick`` (CI: 1 and 4 nodes on the DigitalOcean fake) or
``--full`` (1, 4 and 16 nodes on moto's EC2, the DigitalOcean fake and the Verda fake;
rewrites the results block of bench/README.md). The APIs answer at once (moto in a
process of its own, bench/moto_process.py, as a real API is not in the client's; the
fakes with a 0.05 s boot), every instance runs its own user-data in the
emulated-instance harness (skyward.testing), so each node really bootstraps: uv builds
its environment from the offline mirror and starts the agent.

Phases come from the pool's own events, on this process's monotonic clock:

- ``prepare``: ``ComputePool.open()`` until ``InstanceLaunching`` (reap, the offer, the
  client's address, the firewall: API calls made once per pool);
- ``provision``: ``InstanceLaunching`` until the last ``InstanceProvisioned`` (every
  create, then the shared describe polls until every instance runs);
- ``bootstrap``: the last ``InstanceProvisioned`` until the last ``BootstrapCompleted``
  (user-data to a serving agent; steps from the agent's hello, with their seconds);
- ``first_result``: the pool open (``PoolStarted``) until ``inc(1) >> pool`` returned.

The target is about the API phases (``prepare + provision``): 16 nodes at most 1.5x one
node. It is a same-run ratio, reported, never asserted. Runs only in a network namespace
with nothing but loopback up: it re-executes itself under ``unshare --net`` (root).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
for _path in (ROOT, TESTS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from skyward.bootstrap import STEP_TIMES  # noqa: E402

RESULTS = ROOT / "bench" / "results"
README = ROOT / "bench" / "README.md"
README_START = "<!-- cloudstart:start -->"
README_END = "<!-- cloudstart:end -->"
PROVIDERS = ("aws", "digitalocean", "verda")
API_TARGET = 1.5  # 16 nodes' API phases at most this many times one node's


@dataclass
class Start:
    """One pool start, phases in seconds."""

    provider: str
    nodes: int
    total: float
    prepare: float
    provision: float
    bootstrap: float
    first_result: float
    steps: dict[str, float] = field(default_factory=dict)  # median seconds per bootstrap step

    @property
    def api(self) -> float:
        return self.prepare + self.provision


@dataclass(frozen=True)
class Cloud:
    """An emulated cloud's provider settings: ``config`` for whole starts (instances run
    their user-data), ``api_config`` for the API phases alone."""

    config: Any
    api_config: Any
    harness: Any  # skyward.testing.EmulatedInstances: where each node's step times lie
    fake: Any = None  # a fake API whose machines the harness runs: detached for API runs
    run_machines: Callable[[], None] = lambda: None  # from now on the harness runs every new machine


@contextmanager
def without_machines(fake: Any) -> Iterator[None]:
    """The fake API alone: its machines boot, but the harness does not run them (starting
    16 process trees in the fake's boot path costs this 2-core machine most of a second)."""
    if fake is None:
        yield
        return
    hooks = fake.on_running, fake.on_deleted
    fake.on_running = fake.on_deleted = None
    try:
        yield
    finally:
        fake.on_running, fake.on_deleted = hooks


# -- the emulated clouds -------------------------------------------------------------------


@contextmanager
def moto_inline(region: str) -> Iterator[str]:
    """moto in this very process (``--moto inline``): how the benchmark ran before
    bench/moto_process.py, kept to show what the emulator's share of this interpreter's
    lock does to the ratio."""
    from aws.moto_world import MotoServer, seed_public_images

    server = MotoServer()
    server.images = seed_public_images(region)
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def aws_cloud(moto: str = "process") -> Iterator[Cloud]:
    """moto's EC2 in a process of its own (bench/moto_process.py), as a real API is not in
    the client's; ``moto="inline"`` runs it in this process instead."""
    from aws.conftest import CLIENT_ADDRESS, FIXTURE_KEY_ID, FIXTURE_SECRET, REGION, _client
    from aws.emulator import HarnessEndpoints, MotoInstances
    from aws.listeners import Listeners
    from harness import EmulatedInstances

    import skyward
    from bench.moto_process import moto_process

    with moto_process(REGION) if moto == "process" else moto_inline(REGION) as url:
        os.environ.update(
            AWS_ENDPOINT_URL=url,
            AWS_ACCESS_KEY_ID=FIXTURE_KEY_ID,
            AWS_SECRET_ACCESS_KEY=FIXTURE_SECRET,
            AWS_DEFAULT_REGION=REGION,
            AWS_EC2_METADATA_DISABLED="true",
        )
        box: dict[str, MotoInstances] = {}

        def terminate(instance_id: str) -> None:  # what EC2 does when an instance powers off
            box["moto"].terminate_from_inside(instance_id)

        harness = EmulatedInstances(terminate)

        def run_machines() -> None:
            # after the API runs: their hundred-odd instances (terminated by then) never run
            # in the harness, which slowed later bootstraps past any timeout when they did
            if "moto" not in box:
                box["moto"] = MotoInstances(_client("ec2", url), harness, poll_interval=0.05)

        listeners = Listeners()
        try:
            yield Cloud(
                config=skyward.AWS(
                    client_address=CLIENT_ADDRESS, bootstrap_timeout=600, endpoint_resolver=HarnessEndpoints(harness)
                ),
                # API phases alone: each instance's "agent" is a loopback listener (tests/aws/listeners.py)
                api_config=skyward.AWS(
                    client_address=CLIENT_ADDRESS, bootstrap_timeout=60, endpoint_resolver=listeners
                ),
                harness=harness,
                run_machines=run_machines,
            )
        finally:
            listeners.close()
            if "moto" in box:
                box["moto"].close()
            harness.close()


@contextmanager
def fake_cloud(name: str) -> Iterator[Cloud]:
    from providers_support import emulate

    settings = dict(
        client_address="203.0.113.7",  # the fakes' firewall source; no whoami round trip
        poll_interval=0.05,
        provision_timeout=120.0,
        bootstrap_timeout=600.0,
        api_timeout=5.0,
        api_retries=4,
        api_backoff=0.02,
    )
    if name == "digitalocean":
        from fakes.digitalocean import TOKEN, FakeDigitalOcean

        from skyward_digitalocean import DigitalOcean

        os.environ["DIGITALOCEAN_TOKEN"] = TOKEN
        fake: Any = FakeDigitalOcean()
        make = lambda: DigitalOcean(region="tor1", api_url=fake.url, **settings)  # noqa: E731
        shut_down = fake.power_off
    else:
        from fakes.verda import CLIENT_ID, CLIENT_SECRET, FakeVerda

        from skyward_verda import Verda

        os.environ.update(VERDA_CLIENT_ID=CLIENT_ID, VERDA_CLIENT_SECRET=CLIENT_SECRET)
        fake = FakeVerda()
        make = lambda: Verda(api_url=f"{fake.url}/v1", **settings)  # noqa: E731
        shut_down = fake.shut_down
    fake.start()
    try:
        world = emulate(fake, shut_down)
        machines = next(world)
        try:
            config = make()
            yield Cloud(config=config, api_config=config, harness=machines.harness, fake=fake)
        finally:
            world.close()
    finally:
        fake.stop()


def cloud(name: str, moto: str = "process") -> Any:  # a context manager of Cloud
    return aws_cloud(moto) if name == "aws" else fake_cloud(name)


# -- one start -----------------------------------------------------------------------------


def inc(x: int) -> int:
    return x + 1


def step_seconds(record: str) -> dict[str, float]:
    """Seconds each bootstrap step took, from a node's ``bootstrap-times`` (a step's name
    and when it began, a line each): until the next step began. The last step (the
    agent's start) has no end there: the bootstrap phase measures it."""
    marks = [(name, float(stamp)) for name, _, stamp in (line.partition(" ") for line in record.splitlines()) if stamp]
    took: dict[str, float] = {}
    for (name, began), (_, ended) in itertools.pairwise(marks):
        if name != "start":
            took[name] = took.get(name, 0.0) + ended - began
    return took


def phases(
    provider: str,
    nodes: int,
    events: list[tuple[float, object]],
    t0: float,
    t_open: float,
    t_result: float,
    records: list[str] = [],  # noqa: B006 (never mutated)
) -> Start:
    from skyward.events import (
        BootstrapCompleted,
        InstanceLaunching,
        InstanceProvisioned,
    )

    def first(kind: type) -> float:
        return next(t for t, e in events if isinstance(e, kind))

    def last(kind: type) -> float:
        return max(t for t, e in events if isinstance(e, kind))

    launching = first(InstanceLaunching)
    provisioned = last(InstanceProvisioned)
    completed = last(BootstrapCompleted)
    per_step: dict[str, list[float]] = {}
    for record in records:
        for name, seconds in step_seconds(record).items():
            per_step.setdefault(name, []).append(seconds)
    return Start(
        provider=provider,
        nodes=nodes,
        total=t_result - t0,
        prepare=launching - t0,
        provision=provisioned - launching,
        bootstrap=completed - provisioned,
        first_result=t_result - t_open,
        steps={k: statistics.median(v) for k, v in per_step.items()},
    )


def start_once(provider_name: str, emulated: Cloud, nodes: int) -> Start:
    from skyward import ComputePool, compute

    remote = compute(inc)
    events: list[tuple[float, object]] = []
    record = lambda e: events.append((time.monotonic(), e))  # noqa: E731
    t0 = time.monotonic()
    with ComputePool(provider=emulated.config, nodes=nodes, display="quiet", on_event=record, timeout=900) as pool:
        t_open = time.monotonic()
        assert remote(1) >> pool == 2
        t_result = time.monotonic()
        homes = [emulated.harness.instance(n.instance_id).directory / "home" / ".skyward" for n in pool.nodes]
    records = [(home / STEP_TIMES).read_text() for home in homes if (home / STEP_TIMES).exists()]
    return phases(provider_name, nodes, events, t0, t_open, t_result, records)


def median_start(runs: list[Start]) -> Start:
    """Each phase's median over ``runs`` (one pool size, one provider)."""

    def med(name: str) -> float:
        return statistics.median(getattr(r, name) for r in runs)

    names = dict.fromkeys(k for r in runs for k in r.steps)
    steps = {k: statistics.median(r.steps[k] for r in runs if k in r.steps) for k in names}
    first = runs[0]
    return Start(
        provider=first.provider,
        nodes=first.nodes,
        total=med("total"),
        prepare=med("prepare"),
        provision=med("provision"),
        bootstrap=med("bootstrap"),
        first_result=med("first_result"),
        steps=steps,
    )


def api_once(provider_name: str, config: Any, nodes: int) -> Start:
    """The API phases alone, as the pool drives them (validate, prepare, launch), with
    scripts that start no agent: no bootstrap competes for this machine's cores."""
    from providers_support import fake_user_data, make_spec

    from skyward.plugins import registry

    driver = registry.provider_for(config).create_driver(config)
    spec = make_spec(config, nodes=nodes)
    events: list[tuple[float, object]] = []
    record = lambda e: events.append((time.monotonic(), e))  # noqa: E731
    handles: list[Any] = []
    t0 = time.monotonic()
    try:
        driver.validate(spec)
        driver.prepare(spec, record)
        handles = driver.launch(spec, fake_user_data, record)
        t_end = time.monotonic()
    finally:
        try:
            driver.terminate(handles)
        finally:
            driver.teardown()
    from skyward.events import InstanceLaunching, InstanceProvisioned

    launching = next(t for t, e in events if isinstance(e, InstanceLaunching))
    provisioned = max(t for t, e in events if isinstance(e, InstanceProvisioned))
    return Start(provider_name, nodes, t_end - t0, launching - t0, provisioned - launching, 0.0, 0.0)


# -- report ------------------------------------------------------------------------------------


def ratios(starts: list[Start]) -> dict[str, dict[str, float]]:
    """Per provider: API phases of the largest pool over one node's, and the total's."""
    out: dict[str, dict[str, float]] = {}
    for provider in dict.fromkeys(s.provider for s in starts):
        mine = sorted((s for s in starts if s.provider == provider), key=lambda s: s.nodes)
        one, big = mine[0], mine[-1]
        if big.nodes > one.nodes:
            out[provider] = {
                "nodes": big.nodes,
                "api": big.api / one.api,
                "total": big.total / one.total,
            }
    return out


def markdown(
    starts: list[Start], apis: list[Start], mode: str, plots: list[tuple[str, str]], rounds: int, command: str = ""
) -> str:
    """The README block. ``plots``: (what it shows, its path relative to bench/)."""
    lines = [
        f"Cloud start ({mode}, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores)"
        + (f": `{command}`." if command else "."),
    ]
    if starts:
        lines += [
            "",
            f"Seconds from `ComputePool(...)` to the first result, by phase (median of {rounds} starts each):",
            "",
            "| provider | nodes | prepare | provision | **API** | bootstrap | first result | total |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
    for s in starts:
        lines.append(
            f"| {s.provider} | {s.nodes} | {s.prepare:.2f} | {s.provision:.2f} | **{s.api:.2f}** | "
            f"{s.bootstrap:.2f} | {s.first_result:.3f} | {s.total:.2f} |"
        )
    lines += [
        "",
        f"The API phases alone (median of {2 * rounds + 1}; validate, prepare and launch as the pool drives them, "
        "with scripts that start no agent, so no bootstrap competes for the cores):",
        "",
        "| provider | nodes | prepare | provision | **API** |",
        "|---|---:|---:|---:|---:|",
    ]
    for s in apis:
        lines.append(f"| {s.provider} | {s.nodes} | {s.prepare:.2f} | {s.provision:.2f} | **{s.api:.2f}** |")
    lines += [
        "",
        f"| provider | API phases, N nodes / 1 node (target ≤ {API_TARGET}) | verdict |",
        "|---|---:|---|",
    ]
    for provider, r in ratios(apis).items():
        verdict = "PASS" if r["api"] <= API_TARGET else "MISS"
        lines.append(f"| {provider} | {r['api']:.2f} ({r['nodes']:.0f} vs 1) | {verdict} |")
    stepped = [s for s in starts if s.steps]
    if stepped:
        names = list(dict.fromkeys(k for s in stepped for k in s.steps))
        lines += [
            "",
            "Bootstrap steps (median seconds per node, from each node's `$SKYWARD_HOME/bootstrap-times`; "
            "the last step, the agent's start, counts in the bootstrap phase only):",
            "",
        ]
        lines += ["| provider | nodes | " + " | ".join(names) + " |", "|---|---:|" + "---:|" * len(names)]
        for s in stepped:
            cells = " | ".join(f"{s.steps.get(n, 0):.2f}" for n in names)
            lines.append(f"| {s.provider} | {s.nodes} | {cells} |")
    for alt, path in plots:
        lines += ["", f"![{alt}]({path})"]
    return "\n".join(lines) + "\n"


def draw(starts: list[Start], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    providers = list(dict.fromkeys(s.provider for s in starts))
    if not providers:
        return False
    fig, axes = plt.subplots(1, len(providers), figsize=(4.5 * len(providers), 3.6), squeeze=False)
    colors = {"prepare": "#4c72b0", "provision": "#55a868", "bootstrap": "#c44e52", "first_result": "#8172b2"}
    for ax, provider in zip(axes[0], providers, strict=True):
        mine = [s for s in starts if s.provider == provider]
        labels = [str(s.nodes) for s in mine]
        bottom = [0.0] * len(mine)
        for phase, color in colors.items():
            values = [getattr(s, phase) for s in mine]
            if not any(values):  # the API runs have no bootstrap
                continue
            ax.bar(labels, values, bottom=bottom, color=color, label=phase)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        ax.set_title(provider)
        ax.set_xlabel("nodes")
        ax.set_ylabel("seconds")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def write_readme(block: str) -> None:
    text = README.read_text()
    new = f"{README_START}\n{block}{README_END}"
    if README_START in text:
        head, _, rest = text.partition(README_START)
        _, _, tail = rest.partition(README_END)
        text = head + new + tail
    else:
        text = text.rstrip("\n") + "\n\n" + new + "\n"
    README.write_text(text)


# -- isolation -----------------------------------------------------------------------------------


def reexec_isolated(argv: list[str]) -> None:
    """Emulators hand out made-up addresses: run only where nothing but loopback is up."""
    from skyward.testing import isolation_problem

    if isolation_problem() is None:
        return
    if os.environ.get("SKYWARD_CLOUDSTART_INNER"):
        sys.exit(f"bench/cloudstart.py: not isolated even under unshare: {isolation_problem()}")
    env = dict(os.environ, SKYWARD_TEST_NETNS="1", SKYWARD_CLOUDSTART_INNER="1")
    command = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$0" "$@"', sys.executable, *argv]
    os.execvpe("unshare", command, env)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bench/cloudstart.py", description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="1 and 4 nodes on the DigitalOcean fake (CI)")
    mode.add_argument("--full", action="store_true", help="1, 4, 16 nodes on every emulated cloud; rewrites README")
    parser.add_argument("--providers", default="", help=f"comma-separated subset of {','.join(PROVIDERS)}")
    parser.add_argument("--nodes", default="", help="comma-separated pool sizes (default: quick 1,4; full 1,4,16)")
    parser.add_argument("--rounds", type=int, default=0, help="starts per pool size, medians (quick 1, full 3)")
    parser.add_argument("--max-started", type=int, default=16, help="whole starts only up to this many nodes")
    parser.add_argument(
        "--moto",
        choices=("process", "inline"),
        default="process",
        help="moto's EC2 in a process of its own (default, as a real API) or inline, in this one",
    )
    parser.add_argument("--no-readme", action="store_true", help="full mode: do not rewrite bench/README.md")
    args = parser.parse_args(argv)
    reexec_isolated([str(Path(__file__).resolve()), *argv])
    full = args.full
    providers = [p for p in args.providers.split(",") if p] or (list(PROVIDERS) if full else ["digitalocean"])
    unknown = set(providers) - set(PROVIDERS)
    if unknown:
        parser.error(f"--providers: unknown {', '.join(sorted(unknown))}; choose from {', '.join(PROVIDERS)}")
    sizes = [int(n) for n in args.nodes.split(",") if n] or ([1, 4, 16] if full else [1, 4])
    mode_name = "full" if full else "quick"
    args.rounds = args.rounds or (3 if full else 1)
    api_rounds = 2 * args.rounds + 1
    starts: list[Start] = []
    apis: list[Start] = []
    for provider in providers:
        with cloud(provider, args.moto) as emulated:
            with without_machines(emulated.fake):
                api_once(provider, emulated.api_config, 1)  # warm-up: imports, connections
            # API runs interleave the sizes round by round: what an emulator accumulates
            # (moto keeps every terminated instance, which each start's sweep lists) then
            # weighs on every size alike
            api_runs: dict[int, list[Start]] = {n: [] for n in sizes}
            with without_machines(emulated.fake):
                for _ in range(api_rounds):
                    for nodes in sizes:
                        api_runs[nodes].append(api_once(provider, emulated.api_config, nodes))
            for nodes in sizes:
                api = median_start(api_runs[nodes])
                apis.append(api)
                print(
                    f"{provider:13} {nodes:3} nodes: API alone {api.api:6.2f} s (prepare {api.prepare:.2f}, "
                    f"provision {api.provision:.2f})",
                    flush=True,
                )
            emulated.run_machines()
            if args.max_started:
                start_once(provider, emulated, 1)  # warm-up: the uv mirror's caches
            for nodes in sizes:
                if nodes > args.max_started:
                    continue
                start = median_start([start_once(provider, emulated, nodes) for _ in range(args.rounds)])
                starts.append(start)
                print(
                    f"{provider:13} {nodes:3} nodes: API {start.api:6.2f} s (prepare {start.prepare:.2f}, "
                    f"provision {start.provision:.2f}), bootstrap {start.bootstrap:6.2f} s, "
                    f"first result {start.first_result:.3f} s, total {start.total:6.2f} s",
                    flush=True,
                )
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = f"cloudstart-{mode_name}"
    plots = []
    for drawn, name, alt in (
        (starts, f"{stem}.png", "cloud start by phase, whole starts"),
        (apis, f"{stem}-api.png", "the API phases alone, by provider and pool size"),
    ):
        if draw(drawn, RESULTS / name):
            plots.append((alt, f"results/{name}"))
    as_json = {
        "starts": [{**asdict(s), "api": s.api} for s in starts],
        "api_alone": [{**asdict(s), "api": s.api} for s in apis],
        "ratios": ratios(apis),
    }
    (RESULTS / f"{stem}.json").write_text(json.dumps(as_json, indent=2))
    command = " ".join(["python bench/cloudstart.py", *argv])
    block = markdown(starts, apis, mode_name, plots, args.rounds, command)
    (RESULTS / f"{stem}.md").write_text(block)
    print(block)
    if full and not args.no_readme:
        write_readme(block)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
