"""Which library versions a pool's workers need, and whether they have them.

Objects cross between client and workers as pickles, and joblib's batches and
scikit-learn's estimators are only guaranteed to load in the version that pickled them.
So the workers must run the client's joblib (always) and the client's scikit-learn
(whenever scikit-learn is in play). Everything here is pure except ``installed_versions``,
which reads package metadata, and it is cheap: it imports none of the packages.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from skyward.errors import ConfigurationError

JOBLIB = "joblib"
SKLEARN = "scikit-learn"
# What scikit-learn's objects are made of: pinned with it so arrays and sparse matrices
# load on the workers exactly as they were pickled here.
SKLEARN_COMPANIONS = ("joblib", "numpy", "scipy")


def installed_versions(distributions: Sequence[str]) -> dict[str, str | None]:
    """The installed version of each distribution, None where it is not installed.

    Runs on both sides: in the client, and on a worker as the version probe."""
    found: dict[str, str | None] = {}
    for name in distributions:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


@dataclass(frozen=True, slots=True)
class Wanted:
    """A distribution the workers must have.

    requested: the version the caller asked for (``joblib_version=...``), or None for
               the client's own version.
    required:  True for the library the pool is for (its absence here is an error);
               False for a companion pinned only when this client has it.
    """

    name: str
    requested: str | None = None
    required: bool = True


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _named(requirements: Iterable[str], name: str) -> list[Requirement | str]:
    """The image's requirements that name ``name`` (unparseable ones are returned as text
    when they mention it, so they count as the user's own choice)."""
    wanted = canonicalize_name(name)
    hits: list[Requirement | str] = []
    for text in requirements:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            if wanted in canonicalize_name(text):
                hits.append(text)
            continue
        if canonicalize_name(requirement.name) == wanted:
            hits.append(requirement)
    return hits


def pins_to_add(
    wanted: Sequence[Wanted],
    client: Mapping[str, str | None],
    image_pip: Sequence[str],
    reuses_client_interpreter: bool,
    owner: str,
) -> tuple[str, ...]:
    """The ``name==version`` pins to add to a pool's image so its workers run this
    client's versions. Raises ConfigurationError, before anything is provisioned, when
    that cannot work.

    A pool that runs on the client's own interpreter (the Local provider with no pip
    packages) already has them: adding a pin there would only force a one-time
    environment build of what is already installed, so nothing is added. An image that
    already names a package keeps the user's requirement (a URL or path is left alone:
    the user chose it); a version pin is added next to a compatible specifier, and a
    specifier that excludes the client's version is refused.
    """
    pins: list[str] = []
    for item in wanted:
        have = client.get(item.name)
        if item.requested is not None and not isinstance(item.requested, str):
            raise ConfigurationError(
                f"{owner}: the {item.name} version must be a string such as {have or '1.5.2'!r}, got {item.requested!r}"
            )
        requested = item.requested.strip() if item.requested is not None else None
        if requested == "":
            raise ConfigurationError(f"{owner}: the {item.name} version is empty; give a version or leave it None")
        if have is None:
            if item.required:
                raise ConfigurationError(
                    f"{owner} needs {item.name} installed on this client too (the client pickles what the "
                    f"workers run): pip install {item.name}"
                )
            continue
        if requested is not None and not _same_version(requested, have):
            raise ConfigurationError(
                f"{owner}: {item.name} {requested} was asked for the workers, but this client runs "
                f"{item.name} {have}. Client and workers must run the same version (what one pickles, the "
                f"other must load): install {item.name}=={requested} here, or leave the version unset to "
                f"use {have}"
            )
        version = have
        existing = _named(image_pip, item.name)
        if any(isinstance(r, str) or r.url is not None for r in existing):
            continue  # a URL, a path or something unparseable: the user's explicit choice
        for requirement in existing:
            assert isinstance(requirement, Requirement)
            if requirement.specifier and not requirement.specifier.contains(version, prereleases=True):
                raise ConfigurationError(
                    f"{owner}: the image asks for {requirement}, which excludes {item.name} {version}, the "
                    f"version this client runs; client and workers must run the same version. Drop it from "
                    f"Image(pip=...) (the client's version is added for you) or install a matching one here"
                )
        if reuses_client_interpreter:
            continue
        pins.append(f"{item.name}=={version}")
    return tuple(pins)


def version_problems(
    client: Mapping[str, str | None],
    workers: Mapping[str, str | None],
    required: Collection[str],
) -> list[str]:
    """What differs between client and workers, one sentence per distribution.

    A distribution in ``required`` must be on both sides at the same version; any other
    one is compared only when both sides have it (a worker without scikit-learn can still
    run plain joblib tasks)."""
    problems: list[str] = []
    for name in sorted(set(client) | set(workers)):
        mine, theirs = client.get(name), workers.get(name)
        if name in required and theirs is None:
            problems.append(f"{name} is not installed on the workers (this client has {name} {mine})")
        elif name in required and mine is None:
            problems.append(f"{name} is not installed on this client (the workers have {name} {theirs})")
        elif mine is not None and theirs is not None and not _same_version(mine, theirs):
            problems.append(f"{name} differs: this client runs {mine}, the workers run {theirs}")
    return problems
