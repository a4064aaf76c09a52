"""``Image``: the declarative environment of a pool's nodes, and its bootstrap script.

The bootstrap is one idempotent bash script, the same for every provider: cloud nodes
run it as user-data, the Local provider runs it as a process. Steps, in order: arm the
TTL, apt packages, uv, the Python environment (cached by ``content_hash()``), skyward,
plugin steps (volumes ...), a version check, then ``exec`` the agent.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from skyward.bootstrap import CLIENT_PYTHON, render_bootstrap
from skyward.errors import ConfigurationError
from skyward.files.manifest import Manifest
from skyward.files.patterns import check_patterns, manifest_of
from skyward.secrets import EnvValue, Secret

if TYPE_CHECKING:
    from skyward.wheels.cache import LocalWheel

__all__ = ["CLIENT_PYTHON", "BootstrapContext", "Image"]  # CLIENT_PYTHON: the default Image.python

_PYTHON_RE = re.compile(r"^3\.(\d{1,2})(\.\d{1,2})?$")
_APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.\-]*(=[A-Za-z0-9.+:~\-]+)?$")
_ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def _as_tuple(value: object, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        raise ConfigurationError(f"Image({what}=...) takes a list of strings, got the string {value!r}")
    if not isinstance(value, Sequence) or isinstance(value, bytes | bytearray):
        raise ConfigurationError(f"Image({what}={value!r}) takes a list of strings")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise ConfigurationError(f"Image({what}=...) items must be non-empty strings, got {item!r}")
    return items


@dataclass(frozen=True)
class Image:
    """What every node of a pool runs in.

    ``python`` defaults to the client's own minor version: client and workers must agree
    on it (and on cloudpickle), so the default is the only value that always works.
    ``apt`` installs system packages on cloud nodes; the Local provider never changes the
    user's system and instead checks the packages are already installed.
    ``bake=True`` asks a provider that can (AWS: an AMI; see docs/coldstart.md) to save a
    bootstrapped node as a machine image and start later pools of the same image from it,
    skipping apt, uv and the environment. It is opt-in because a baked image bills for
    its storage until deleted (``skyward down``); it is not part of ``content_hash()``.
    """

    python: str = CLIENT_PYTHON
    """The nodes' Python minor version (``"3.12"``); the client's own by default, the only value that always
    works, since functions travel pickled."""
    pip: Sequence[str] = ()
    """Packages installed into the nodes' environment with uv, as pip requirement strings (``"torch==2.4"``,
    ``"numpy"``)."""
    pip_extra_index_url: str | None = None
    """An extra package index for ``pip`` (a PyTorch CUDA wheel index, a private index), or ``None``."""
    apt: Sequence[str] = ()
    """System packages installed on cloud nodes; on Local they are checked to be installed, never installed."""
    env: Mapping[str, EnvValue] = field(default_factory=dict)
    """Environment variables of every worker (``ComputePool(env=...)`` adds to them); a value
    may be a ``skyward.Secret``. They reach a node only after the handshake, over the pool's
    encrypted channel, into the workers' ``os.environ`` before their first task: never into
    user-data, the bootstrap script or the environment cache key (see skyward.secrets)."""
    bake: bool = False
    """Save a bootstrapped node as a machine image and start later pools of this image from it (AWS; opt-in,
    since the image bills for its storage)."""
    includes: Sequence[str] = ()
    """The project's files every node gets, as glob patterns relative to the working directory the pool
    opens in (``"data/*.csv"``, ``"configs/"``: that directory and everything below, ``"**/*.json"``).
    Tasks run in a copy of that directory, so ``open("data/train.csv")`` works there as here.
    ``.gitignore`` files are respected, ``.git/`` never ships, symbolic links are refused. They travel
    by content over the pool's encrypted channel; a file a node already has is not sent again. Not part
    of ``content_hash()``: a changed data file never rebuilds the environment (``files_hash()`` names them)."""
    excludes: Sequence[str] = ()
    """Files to leave out of ``includes``, as ``.gitignore`` lines (``"*.pyc"``, ``"data/raw/"``),
    applied after every ``.gitignore``."""

    def __post_init__(self) -> None:
        if not isinstance(self.bake, bool):
            raise ConfigurationError(f"Image(bake={self.bake!r}) takes True or False")
        if not isinstance(self.python, str) or not _PYTHON_RE.match(self.python):
            raise ConfigurationError(
                f"Image(python={self.python!r}) is not a Python version: use '3.X' or '3.X.Y', "
                f"e.g. {CLIENT_PYTHON!r} (the client's version)"
            )
        object.__setattr__(self, "pip", _as_tuple(self.pip, "pip"))
        apt = _as_tuple(self.apt, "apt")
        for package in apt:
            if not _APT_RE.match(package):
                raise ConfigurationError(f"Image(apt=...): {package!r} is not a Debian package name")
        object.__setattr__(self, "apt", apt)
        if not isinstance(self.env, Mapping):
            raise ConfigurationError(f"Image(env=...) takes a dict of strings, got {self.env!r}")
        for key, value in self.env.items():
            if not isinstance(key, str) or not _ENV_KEY_RE.match(key) or not isinstance(value, str | Secret):
                raise ConfigurationError(
                    f"Image(env=...): {key!r}={value!r} is not a valid environment variable "
                    "(names are letters, digits and _, values are strings or skyward.Secret)"
                )
        object.__setattr__(self, "env", dict(sorted(self.env.items())))
        object.__setattr__(self, "includes", check_patterns(self.includes, "includes"))
        object.__setattr__(self, "excludes", check_patterns(self.excludes, "excludes"))
        if self.excludes and not self.includes:
            raise ConfigurationError(
                f"Image(excludes={list(self.excludes)!r}) without includes ships nothing to leave out of: "
                "add includes=[...] (the files to ship), or drop excludes"
            )
        if self.bake and self.includes:
            # the bake saves node 0's disk after the handshake, when the files are already on it
            raise ConfigurationError(
                "Image(bake=True, includes=...): the baked image would hold your included files (they reach a "
                "node before the bake saves its disk), readable by anyone who can start that image. Ship the "
                "files without bake=True, or bake an image without includes"
            )
        if self.pip_extra_index_url is not None and (
            not isinstance(self.pip_extra_index_url, str)
            or not self.pip_extra_index_url.startswith(("http://", "https://", "file://"))
        ):
            raise ConfigurationError(
                f"Image(pip_extra_index_url={self.pip_extra_index_url!r}) must be an http(s) or file URL"
            )

    def __hash__(self) -> int:
        return hash(self.content_hash())

    def with_pip(self, *packages: str) -> Image:
        """A copy with more pip packages (duplicates dropped, order kept)."""
        merged = tuple(dict.fromkeys((*self.pip, *_as_tuple(packages, "pip"))))
        return dataclasses.replace(self, pip=merged)

    def with_env(self, env: Mapping[str, EnvValue] | None = None, /, **more: EnvValue) -> Image:
        """A copy with more environment variables (``env`` first, then ``more``); the
        mapping form takes any key, so a bad one is refused by name, not by Python."""
        merged = {**self.env, **(env or {}), **more}
        return dataclasses.replace(self, env=merged)

    def content_hash(self) -> str:
        """12 hex characters identifying the environment; stable across runs and machines.

        ``env`` is not part of it: the environment build (apt, uv, pip) never reads it (the
        values reach the workers after the handshake), so a changed or rotated value, a
        secret above all, reuses the built environment and a baked image instead of
        rebuilding them, and no value is derivable from the key. Nor are ``includes`` and
        ``excludes``: the files travel after the handshake too, and a changed data file
        must not rebuild an environment (they have their own ``files_hash()``).
        """
        canonical = json.dumps(
            {
                "python": self.python,
                "pip": list(self.pip),
                "pip_extra_index_url": self.pip_extra_index_url,
                "apt": sorted(self.apt),
            },
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:12]

    def files(self, root: Path | None = None) -> Manifest:
        """The manifest of the project's files (``includes`` under ``root``, the working
        directory by default): each file's path, sha256, size and mode. Reads and hashes
        every file; an include that names nothing is a ``ConfigurationError``."""
        return manifest_of(Path.cwd() if root is None else root, self.includes, self.excludes)

    def files_hash(self, root: Path | None = None) -> str:
        """12 hex characters identifying the project's files (the manifest's sha256),
        apart from ``content_hash()``: a changed file changes this one only."""
        return self.files(root).sha256[:12]

    def bootstrap(self, ttl: int = 0, *, context: BootstrapContext | None = None) -> str:
        """The idempotent bootstrap script. Without a context it prepares the environment
        for a cloud node and starts no agent (useful to inspect or bake into an image)."""
        return render_bootstrap(self, ttl, context or BootstrapContext())


@dataclass(frozen=True, slots=True)
class BootstrapContext:
    """What a provider adds to an image's bootstrap.

    local:            running on the user's own machine: never shut the machine down,
                      never apt-get, reuse the client's interpreter when no pip packages
                      are asked for.
    python_executable: interpreter for the environment (Local: the client's).
    skyward_requirement: how to install skyward into a fresh environment
                      (``skyward-core==X`` from an index, or a local path).
    agent_env:        environment of the agent process (its config among it).
    extra_steps:      (name, script) pairs from plugins (volumes, ...).
    home:             where environments are cached (``$HOME/.skyward`` by default).
    baked:            the machine starts from a baked image (``Image(bake=True)``): when
                      its environment is there, skip apt, uv and the environment and say
                      so (step ``baked``); when it is not, install as usual.
    wheels:           wheels the client built of its local requirements (a checkout of
                      skyward or a plugin): the node installs their dependencies from
                      the index, receives them from the client over the agent's
                      endpoint (``skyward.wheels.stage``, checked against their sha256)
                      and installs them ``--no-deps``. ``pinned`` then holds their
                      dependencies, and ``skyward_requirement`` is None when skyward-core
                      itself is one of them.
    """

    local: bool = False
    """Running on the user's own machine: never shut it down, never apt-get."""
    python_executable: str | None = None
    """The interpreter for the environment (Local: the client's); ``None`` lets uv pick."""
    skyward_requirement: str | None = None
    """How to install skyward into a fresh environment (``skyward-core==X`` or a local path)."""
    pinned: Sequence[str] = ()
    """What is installed alongside skyward, as the client has it: its plugins, cloudpickle at the
    client's version (what the client pickles, the node must unpickle), the wheels' dependencies."""
    agent_env: Mapping[str, str] = field(default_factory=dict)
    """The environment of the agent process, its config among it."""
    extra_steps: Sequence[tuple[str, str]] = ()
    """``(name, script)`` pairs from plugins (volumes, ...), run after the system packages."""
    home: str | None = None
    """Where environments are cached; ``None`` means ``$HOME/.skyward``."""
    uv: str | None = None
    """A path to uv to use; ``None`` finds one or installs it (stock Ubuntu images lack venv)."""
    start_agent: bool = True
    """Whether the script ends by starting the agent; ``False`` only builds the environment."""
    baked: bool = False
    """The machine starts from a baked image: skip what is already installed there."""
    wheels: Sequence[LocalWheel] = ()
    """Wheels the client built of its local requirements, sent over the agent's endpoint."""
    environment_key: str | None = None
    """The built environment's cache key (``bootstrap.environment_key``) when the caller has
    it already: a pool renders one script per node, and the key digests the sources of every
    requirement installed from a checkout (25 ms per node in this repository's development
    environment, where the nodes' scripts are rendered one after the other)."""

    def quoted_env(self) -> list[tuple[str, str]]:
        """The agent's environment as sorted ``(name, shell-quoted value)`` pairs, for ``export`` lines."""
        return [(k, shlex.quote(v)) for k, v in sorted(self.agent_env.items())]
