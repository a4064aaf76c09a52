"""Renders an ``Image`` into its bootstrap script (a pure function: text in, text out)."""

from __future__ import annotations

import hashlib
import json
import math
import shlex
import sys
from importlib import metadata, resources
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

import cloudpickle

from skyward.agent.config import BIND_HOST_ENV, CONFIG_END, ENV_VAR, STEP_MARKER, STEPS_ENV

if TYPE_CHECKING:
    # The values this module renders; skyward.image imports this module at run time
    # (Image.bootstrap), so the dependency points one way when the program runs.
    from skyward.image import BootstrapContext, Image

CLIENT_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"
"""This client's Python minor version: a node's must match it (cloudpickle payloads are
not portable across minor versions), and it is an Image's default."""

ENV_COMPLETE = ".skyward-complete"
TTL_MARKER = "/tmp/skyward-ttl-armed"
STEP_TIMES = "bootstrap-times"  # one line per step: its name and when it began (Unix seconds)
BAKED_STEP = "baked"
WHEELS_STEP = "wheels"
WHEELS_DIR = "wheels"  # under $SKYWARD_HOME on a node: the wheels the client sent
_STAGE_END = "SKYWARD_WHEEL_STAGE_END"


def _q(value: str) -> str:
    return shlex.quote(value)


def _step(title: str) -> str:
    """Announces a step on stdout (the Local provider follows it) and records it for the
    agent to report (cloud nodes, whose stdout nobody reads while they boot), with the
    time it began in ``$STEP_TIMES`` (a cloud node's ``$SKYWARD_HOME/bootstrap-times``,
    which bench/cloudstart.py reads; ``/dev/null`` on Local, whose nodes share a home)."""
    return (
        f'echo "{STEP_MARKER} {title}"\n{STEPS_ENV}+={_q(" " + title)}\n'
        f'echo "{title} ${{EPOCHREALTIME:-$(date +%s.%N)}}" >>"$STEP_TIMES"'
    )


def _section(title: str, body: str) -> str:
    return f"\n# --- {title}\n{_step(title)}\n{body.strip()}\n"


def _ttl(ttl: int, ctx: BootstrapContext) -> str:
    if ttl <= 0:
        return "# no TTL requested"
    if ctx.local:
        return f"# Local provider: the agent enforces the TTL of {ttl} s itself; this machine is never shut down."
    minutes = max(1, math.ceil(ttl / 60))
    # Armed before anything else can fail, so a broken bootstrap still ends the instance.
    # With InstanceInitiatedShutdownBehavior=terminate (or a provider's equivalent),
    # shutting down deletes the instance. The marker lives in /tmp, which boot empties,
    # as a scheduled shutdown does not outlive a reboot either: a machine started from a
    # baked image (a copy of a node's disk, marker and all) arms its own TTL.
    return f"""if [ "$(id -u)" = 0 ] && [ ! -f {TTL_MARKER} ]; then
  shutdown -h +{minutes} "skyward: pool TTL of {ttl} s reached" >/dev/null 2>&1 \\
    || nohup sh -c 'sleep {ttl}; poweroff -f' >/dev/null 2>&1 &
  touch {TTL_MARKER}
fi"""


def _apt(image: Image, ctx: BootstrapContext) -> str:
    if not image.apt:
        return "# no apt packages"
    names = " ".join(_q(p.split("=")[0]) for p in image.apt)
    if ctx.local:
        return f"""missing=""
for pkg in {names}; do
  dpkg-query -W -f='${{Status}}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing="$missing $pkg"
done
if [ -n "$missing" ]; then
  fail "Image(apt=...) asks for packages this machine lacks:$missing." \
    "The Local provider never installs system packages;" \
    "install them yourself (sudo apt-get install$missing) or use a cloud provider."
fi"""
    packages = " ".join(_q(p) for p in image.apt)
    # In the background: the Python environment does not need system packages, except a
    # source build that compiles against them, which _deps retries after waiting (apt
    # and the environment are each tens of seconds on a fresh node: they now overlap).
    return f"""export DEBIAN_FRONTEND=noninteractive
(
  if ! dpkg-query -W {names} >/dev/null 2>&1; then
    for i in 1 2 3 4 5; do apt-get update -q && break || sleep 5; done
    apt-get install -y -q --no-install-recommends {packages}
  fi
) >"$SKYWARD_HOME/apt.log" 2>&1 &
APT_PID=$!"""


APT_WAIT = """APT_PID=
apt_done() {  # wait for the apt packages installing in the background (no-op when none)
  [ -z "$APT_PID" ] && return 0
  local pid=$APT_PID; APT_PID=
  wait "$pid" || { cat "$SKYWARD_HOME/apt.log" >&2; fail "apt-get could not install Image(apt=...)"; }
}"""


UV_CACHE = 'export UV_CACHE_DIR="${UV_CACHE_DIR:-$SKYWARD_HOME/cache/uv}"'
"""A cloud node's uv cache lives beside its environments. uv caches by default (in
``$HOME/.cache/uv``), downloads 50 files at once and hardlinks from its cache into an
environment, but a hardlink cannot cross filesystems: with ``$HOME`` on one and
``$SKYWARD_HOME`` (AWS: /opt/skyward) on another, as a container's home on its overlay
and a mounted disk can be, uv copies every file of every package instead (torch:
gigabytes). Beside the environments, nodes sharing that disk share the cache too. A
``UV_CACHE_DIR`` the machine already sets is kept; the Local provider keeps the user's
own cache."""


def _uv(ctx: BootstrapContext) -> str:
    return _find_uv(ctx) if ctx.local else f"{UV_CACHE}\n{_find_uv(ctx)}"


def _find_uv(ctx: BootstrapContext) -> str:
    if ctx.uv:
        return f'UV={_q(ctx.uv)}\n[ -x "$UV" ] || fail "uv not found at $UV"'
    # Stock Ubuntu cloud images have python3 but not python3-venv (no ensurepip), so
    # "python3 -m venv" fails there: fall back to uv's standalone installer.
    return """if command -v uv >/dev/null 2>&1; then UV=$(command -v uv)
elif [ -x "$SKYWARD_HOME/tools/bin/uv" ]; then UV="$SKYWARD_HOME/tools/bin/uv"
elif python3 -m venv "$SKYWARD_HOME/tools" >/dev/null 2>&1; then
  "$SKYWARD_HOME/tools/bin/pip" install -q uv
  UV="$SKYWARD_HOME/tools/bin/uv"
else
  curl -LsSf https://astral.sh/uv/install.sh | env UV_UNMANAGED_INSTALL="$SKYWARD_HOME/tools/bin" sh
  UV="$SKYWARD_HOME/tools/bin/uv"
fi"""


def environment_key(image: Image, ctx: BootstrapContext) -> str:
    """The cache key of a built environment: the image, plus what skyward it holds.

    A requirement installed from a local checkout (``name @ file:///...``) keeps the same
    text while its code changes, and the environment holds a copy of it: its sources'
    digest is part of the key, so an edited checkout gets a fresh environment instead of
    running yesterday's skyward next to today's client.
    """
    requirements = [r for r in (ctx.skyward_requirement, *ctx.pinned) if r]
    wheels = [w.sha256 for w in ctx.wheels]
    extra = json.dumps([*requirements, ctx.python_executable, *map(local_source_digest, requirements), *wheels])
    return f"{image.content_hash()}-{hashlib.sha256(extra.encode()).hexdigest()[:8]}"


_SOURCE_SUFFIXES = (".py", ".pyi", ".toml", ".json", ".typed", ".cfg", ".txt", ".sh")


def local_source_digest(requirement: str) -> str:
    """A digest of the files a ``name @ file:///path`` requirement would install; "" for
    any other requirement. Reads the tree (a few hundred small files for a checkout)."""
    _, sep, url = requirement.partition(" @ file://")
    if not sep:
        return ""
    root = Path(unquote(url))
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        if path.is_file() and path.suffix in _SOURCE_SUFFIXES:
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def needs_environment(image: Image, ctx: BootstrapContext) -> bool:
    return not (ctx.local and not image.pip and ctx.python_executable)


def shares_client_environment(image: Image, ctx: BootstrapContext) -> bool:
    """Whether the node runs this very interpreter and its environment (a node on this
    machine whose image asks for no pip packages): it then has exactly this client's
    packages and plugins, which the client can tell it instead of its finding them."""
    return ctx.local and not needs_environment(image, ctx) and ctx.python_executable == sys.executable


def _deps(image: Image, ctx: BootstrapContext) -> str:
    if not needs_environment(image, ctx):
        return f"# no pip packages: run on the client's own interpreter\nPY={_q(ctx.python_executable or 'python3')}"
    key = ctx.environment_key or environment_key(image, ctx)
    python = ctx.python_executable or image.python
    index = f"--extra-index-url {_q(image.pip_extra_index_url)} " if image.pip_extra_index_url else ""
    skyward = (ctx.skyward_requirement,) if ctx.skyward_requirement else () if ctx.wheels else ("skyward-core",)
    packages = " ".join(_q(p) for p in (*image.pip, *skyward, *ctx.pinned))
    building = _step("skyward").replace("\n", "\n  ")
    wheels = _wheels(ctx)  # not indented: it holds a here-document of Python
    return f"""ENV_DIR="$SKYWARD_HOME/envs/{key}"
mkdir -p "$SKYWARD_HOME/envs"
exec 9>"$ENV_DIR.lock"
flock 9   # nodes sharing a disk build each environment once
if [ ! -f "$ENV_DIR/{ENV_COMPLETE}" ]; then
  {building}
  build_env() {{
    rm -rf "$ENV_DIR" && "$UV" venv --quiet --python {_q(python)} "$ENV_DIR" &&
      "$UV" pip install --quiet --python "$ENV_DIR/bin/python" {index}{packages}
  }}
  # built while apt runs; a build that needed a system package is tried again after it
  build_env || {{ apt_done; build_env; }} || fail "could not build the Python environment"
  {wheels}
  touch "$ENV_DIR/{ENV_COMPLETE}"
fi
flock -u 9
PY="$ENV_DIR/bin/python\""""


def _wheels(ctx: BootstrapContext) -> str:
    """Receive the client's wheels (``skyward.wheels.stage``, on the agent's endpoint with
    the agent's keys) and install them without dependencies (those came from the index)."""
    if not ctx.wheels:
        return "# skyward and its plugins came from the index"
    # The stage's source is data here (the script carries it to the node); it is not
    # imported: it needs pyzmq, which rendering a script does not.
    source = resources.files("skyward.wheels").joinpath("stage.py").read_text()
    named = " ".join(_q(f"{w.sha256}={w.filename}") for w in ctx.wheels)
    files = " ".join(f'"$SKYWARD_HOME/{WHEELS_DIR}/"{_q(w.filename)}' for w in ctx.wheels)
    return f"""{_step(WHEELS_STEP)}
cat >"$SKYWARD_HOME/wheel_stage.py" <<'{_STAGE_END}'
{source.strip()}
{_STAGE_END}
"$ENV_DIR/bin/python" "$SKYWARD_HOME/wheel_stage.py" "$SKYWARD_HOME/{WHEELS_DIR}" "${{{BIND_HOST_ENV}:-}}" {named} \\
  <<<"$AGENT_CONFIG" || fail "the client's wheels did not arrive intact"
"$UV" pip install --quiet --no-deps --python "$ENV_DIR/bin/python" {files}"""


def _agent_config_variable(ctx: BootstrapContext) -> str:
    """With wheels, the agent's config is read once into a shell variable (never exported:
    no process's environment holds it) and fed on stdin to both the wheel stage and the
    agent, so its one line is in the user-data once."""
    config = ctx.agent_env.get(ENV_VAR)
    if not ctx.wheels:
        return ""
    if config is None:
        raise ValueError("BootstrapContext.wheels needs the agent's config (its endpoint and keys) in agent_env")
    return f"IFS= read -r AGENT_CONFIG <<'{CONFIG_END}' || true\n{config}\n{CONFIG_END}"


def _from_baked(image: Image, ctx: BootstrapContext, environment: str) -> str:
    """On a machine started from a baked image: its environment is there, so apt, uv and
    the environment are skipped and the step ``baked`` says so; on one whose environment
    is missing (a baked image made from another one), every step runs as usual."""
    env_dir = f"$SKYWARD_HOME/envs/{ctx.environment_key or environment_key(image, ctx)}"
    baked = _step(BAKED_STEP)
    return f"""
# --- baked image: the environment is already on this disk
if [ -f "{env_dir}/{ENV_COMPLETE}" ]; then
{baked}
PY="{env_dir}/bin/python"
else
{environment.strip()}
fi
"""


_CHECK = f"""import sys
want_py, want_cp = {CLIENT_PYTHON!r}, {cloudpickle.__version__!r}
have_py = "%d.%d" % sys.version_info[:2]
if have_py != want_py:
    sys.exit("skyward bootstrap: this node runs Python %s but the client runs Python %s; "
             "both sides must use the same minor version" % (have_py, want_py))
try:
    import cloudpickle
except ImportError:
    sys.exit("skyward bootstrap: cloudpickle is not installed on this node")
if cloudpickle.__version__ != want_cp:
    sys.exit("skyward bootstrap: this node has cloudpickle %s but the client has cloudpickle %s; "
             "pin cloudpickle==%s in Image(pip=...)" % (cloudpickle.__version__, want_cp, want_cp))
"""
"""Refuses to start an agent whose Python minor or cloudpickle differ from the client's
(written for any Python 3, so an older node reads it and says so)."""

_RUN_MODULE = """import os, runpy
module = sys.argv[-1]  # the arguments are "-m <module>": run it as python -m would
sys.argv[:] = sys.argv[:1]
sys.path[0] = os.getcwd()
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


def _check(image: Image) -> str:
    """The check (``_CHECK``) as a step of its own, an interpreter of its own."""
    return f""""$PY" - <<'SKYWARD_CHECK'
{_CHECK.strip()}
SKYWARD_CHECK"""


def _checked_agent() -> str:
    """``"$PY" -c ...``: the check, then the agent, in one interpreter.

    Why: the check imports cloudpickle, as the agent does; as a step of its own it was a
    third interpreter start per node (0.08 s of CPU on this 2-core machine, where a Local
    pool's nodes all start at once), before the agent could begin. A node whose check
    fails exits with the check's message and status 1, as that step did. The command
    line still ends in ``-m skyward.agent``, which is how the agent is found among
    processes."""
    return f'"$PY" -c {_q(_CHECK + _RUN_MODULE)} -m skyward.agent'


def render_bootstrap(image: Image, ttl: int, ctx: BootstrapContext) -> str:
    home = ctx.home or "$HOME/.skyward"
    # The agent's config (with the node's server secret) goes on its stdin, never into its
    # environment: see skyward.agent.config.
    agent_config = ctx.agent_env.get(ENV_VAR)
    agent_env = "\n".join(f"export {k}={v}" for k, v in ctx.quoted_env() if k != ENV_VAR)
    environment = [_section("apt", _apt(image, ctx))]
    if needs_environment(image, ctx):
        environment.append(_section("uv", _uv(ctx)))
    environment.append(_section("deps", _deps(image, ctx)))
    parts = [
        "#!/usr/bin/env bash",
        f"# Skyward bootstrap for image {image.content_hash()} (Python {image.python}).",
        "# Idempotent: every step checks before it acts, so re-running it is safe.",
        "set -euo pipefail",
        "umask 077",
        'fail() { echo "skyward bootstrap: $*" >&2; exit 3; }',
        APT_WAIT,
        # cloud-init runs user-data without HOME; with "set -u" a bare $HOME would abort
        'export HOME="${HOME:-$(getent passwd "$(id -un)" | cut -d: -f6)}"',
        'export HOME="${HOME:-/root}"',
        f'SKYWARD_HOME="${{SKYWARD_HOME:-{home}}}"',
        # the test first: a Local node finds the directory there, and mkdir is a process
        # (about 1.5 ms of a node's start on this machine)
        '[ -d "$SKYWARD_HOME" ] || mkdir -p "$SKYWARD_HOME"',
        "STEP_TIMES=/dev/null" if ctx.local else f'STEP_TIMES="$SKYWARD_HOME/{STEP_TIMES}"',
        _agent_config_variable(ctx),
        'echo "start ${EPOCHREALTIME:-$(date +%s.%N)}" >"$STEP_TIMES"',
        f"{STEPS_ENV}=",
        _section("ttl", _ttl(ttl, ctx)),
    ]
    if ctx.baked and not ctx.local and needs_environment(image, ctx):
        parts.append(_from_baked(image, ctx, "".join(environment)))
    else:
        parts += environment
    parts.append("\napt_done  # plugin steps and the agent may need the system packages")
    for name, script in ctx.extra_steps:
        parts.append(_section(name, script))
    if not ctx.start_agent:
        parts.append('\necho "skyward bootstrap: environment ready at $PY"')
        return "\n".join(parts) + "\n"
    redirect, body = "", ""
    if ctx.wheels:  # the config is in $AGENT_CONFIG already (_agent_config_variable)
        redirect = ' <<<"$AGENT_CONFIG"'
    elif agent_config is not None:
        redirect, body = f" <<'{CONFIG_END}'", f"\n{agent_config}\n{CONFIG_END}"
    if ctx.local:
        run_agent = f"exec {_checked_agent()}{redirect}{body}"
    else:
        # A cloud node has no purpose once its agent is gone (pool closed, TTL passed, or
        # the client silent past its grace period): end the machine now rather than at the
        # TTL. Providers whose shut-down machines still bill delete them (see their reapers).
        run_agent = (
            f'"$PY" -m skyward.agent{redirect} || echo "skyward bootstrap: the agent exited with status $?" >&2'
            f"{body}\n"
            'shutdown -h now "skyward: the agent exited" >/dev/null 2>&1 || poweroff'
        )
    # the agent's content store of the project's files is $SKYWARD_HOME/files (skyward.files)
    agent_env += f"\nexport {STEPS_ENV} SKYWARD_HOME"
    # image.env is not here: it reaches the workers after the handshake (skyward.secrets)
    check = "" if ctx.local else f"{_check(image)}\n"  # a Local node checks in its agent's interpreter
    parts.append(_section("server", f"{check}{agent_env}\n{run_agent}"))
    return "\n".join(parts) + "\n"


def client_requirements() -> tuple[str, list[str]]:
    """How a fresh environment gets the same skyward (and plugins) as this client.

    An editable install (a checkout) installs from its path; anything else pins the
    client's version. cloudpickle is pinned to the client's version.
    """

    def requirement(dist: metadata.Distribution) -> str:
        name = dist.metadata["Name"]
        raw = dist.read_text("direct_url.json")
        if raw:
            info = json.loads(raw)
            url = info.get("url", "")
            if url.startswith("file://"):
                return f"{name} @ {url}"
        return f"{name}=={dist.version}"

    core = requirement(metadata.distribution("skyward-core"))
    plugins = sorted(
        {
            requirement(ep.dist)
            for ep in metadata.entry_points(group="skyward")
            if ep.dist is not None and ep.dist.metadata["Name"] != "skyward-core"
        }
    )
    return core, [*plugins, f"cloudpickle=={cloudpickle.__version__}"]
