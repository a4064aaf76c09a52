"""Local requirements (``name @ file:///checkout``) as wheels, built once on the client.

A cloud node cannot read the client's checkout, and building skyward from source on every
node repeats one PEP 517 build per node. So the client builds each local requirement's
wheel once per content of its sources (``local_source_digest``), keeps it under
``$SKYWARD_HOME/wheels/<name>-<digest>/`` beside a ``wheel.json`` record (its sha256 and
dependencies), and sends it to the nodes that ask (``skyward.wheels.stage``). A second
pool with unchanged sources builds nothing; an edited checkout gets a new entry.

Building skyward-core with ``uv build --wheel`` took 0.36 s on this machine class with
hatchling in uv's cache (``--offline``), which is tried first: it needs no network.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path
from urllib.parse import unquote

from skyward.errors import WheelBuildError

RECORD = "wheel.json"
BUILD_CONCURRENCY = 4
"""Wheels built at once: each build is a subprocess that mostly waits on disk and on
Python start-up, so a few overlap well even on two cores."""

Builder = Callable[[Path, Path], None]
"""``build(source, out_dir)`` leaves exactly one wheel of ``source`` in ``out_dir``."""

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"\bextra\s*==")


def normalize(name: str) -> str:
    """A distribution name as PEP 503 compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def local_source(requirement: str) -> tuple[str, Path] | None:
    """``(name, directory)`` of a ``name @ file:///directory`` requirement; None otherwise."""
    name, sep, url = requirement.partition(" @ file://")
    if not sep:
        return None
    return name.strip(), Path(unquote(url))


def requirement_name(requirement: str) -> str:
    match = _NAME.match(requirement)
    return normalize(match.group(1)) if match else ""


def runtime_requirements(metadata_text: str) -> tuple[str, ...]:
    """A wheel's ``Requires-Dist`` entries that apply without extras (what installing it
    plainly pulls in)."""
    entries = HeaderParser().parsestr(metadata_text).get_all("Requires-Dist") or []
    return tuple(e.strip() for e in entries if not _EXTRA_MARKER.search(e.partition(";")[2]))


def entry_name(name: str, source_digest: str) -> str:
    """The cache entry of one local requirement at one content of its sources."""
    return f"{normalize(name)}-{source_digest}"


@dataclass(frozen=True, slots=True)
class LocalWheel:
    """One built wheel on this machine. ``requires``: its dependencies without extras."""

    name: str
    path: Path
    sha256: str
    requires: tuple[str, ...]

    @property
    def filename(self) -> str:
        return self.path.name


@dataclass(frozen=True, slots=True)
class WheelPlan:
    """How a node gets a set of requirements: ``wheels`` from the client, ``index`` (the
    other requirements and every wheel's dependencies, the wheels' own names left out)
    from the package index."""

    wheels: tuple[LocalWheel, ...]
    index: tuple[str, ...]


def plan_wheels(requirements: Sequence[str], wheels: Sequence[LocalWheel]) -> WheelPlan:
    """Pure: the requirements a node installs from the index once ``wheels`` stand in
    for the local ones (order kept, duplicates dropped)."""
    local = {normalize(w.name) for w in wheels}
    index = [r for r in requirements if local_source(r) is None]
    for wheel in wheels:
        index += [r for r in wheel.requires if requirement_name(r) not in local]
    return WheelPlan(tuple(wheels), tuple(dict.fromkeys(index)))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _metadata(wheel: Path) -> str:
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            parts = name.split("/")
            if len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] == "METADATA":
                return archive.read(name).decode()
    raise WheelBuildError(f"{wheel.name} has no .dist-info/METADATA: not a wheel")


def uv_builder(uv: str) -> Builder:
    """Builds with ``uv build --wheel``: offline first (uv's cache holds the build backend
    after any earlier build: no network, 0.36 s for skyward-core), then online."""

    def build(source: Path, out_dir: Path) -> None:
        base = [uv, "build", "--wheel", "--quiet", "--out-dir", str(out_dir), str(source)]
        errors = ""
        for extra in (["--offline"], []):
            done = subprocess.run([*base, *extra], capture_output=True, text=True, check=False)
            if done.returncode == 0:
                return
            errors = done.stderr.strip()
        raise WheelBuildError(f"could not build a wheel of {source} with {uv}: {errors[-2000:]}")

    return build


def default_builder() -> Builder:
    from skyward.providers.contexts import uv_path

    uv = uv_path()
    if uv is None:
        raise WheelBuildError("uv is not installed here, and skyward builds its wheels with it: pip install uv")
    return uv_builder(uv)


def default_root() -> Path:
    from skyward.cli.cache import skyward_home

    return skyward_home() / "wheels"


class WheelCache:
    """Wheels of local requirements under ``root``, built by ``build`` when missing.

    Concurrent pools (threads or processes) build each entry once: a lock file per entry,
    the wheel moved into place before its record is written. A record whose wheel no
    longer has the recorded sha256 (edited, truncated) is built again.
    """

    def __init__(self, root: Path | None = None, build: Builder | None = None) -> None:
        self.root = root if root is not None else default_root()
        self._build = build

    def wheel(self, requirement: str) -> LocalWheel:
        source = local_source(requirement)
        if source is None:
            raise ValueError(f"{requirement!r} is not a local requirement (name @ file:///path)")
        from skyward.bootstrap import local_source_digest

        name, directory = source
        entry = self.root / entry_name(name, local_source_digest(requirement))
        found = _load(entry, name)
        if found is not None:
            return found
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(f"{entry}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            found = _load(entry, name)  # another pool built it while this one waited
            return found if found is not None else self._build_into(entry, name, directory)

    def wheels(self, requirements: Iterable[str]) -> tuple[LocalWheel, ...]:
        """The wheel of each local requirement (others skipped), built in parallel."""
        local = [r for r in requirements if local_source(r) is not None]
        if not local:
            return ()
        with ThreadPoolExecutor(max_workers=min(len(local), BUILD_CONCURRENCY)) as pool:
            return tuple(pool.map(self.wheel, local))

    def _build_into(self, entry: Path, name: str, directory: Path) -> LocalWheel:
        build = self._build or default_builder()
        scratch = Path(tempfile.mkdtemp(prefix=".build-", dir=self.root))
        try:
            began = time.monotonic()
            build(directory, scratch)
            seconds = time.monotonic() - began
            built = sorted(scratch.glob("*.whl"))
            if len(built) != 1:
                raise WheelBuildError(f"building {directory} left {len(built)} wheels, expected one")
            shutil.rmtree(entry, ignore_errors=True)
            entry.mkdir(mode=0o700)
            path = entry / built[0].name
            os.replace(built[0], path)
            wheel = LocalWheel(name, path, sha256_of(path), runtime_requirements(_metadata(path)))
            record = {
                "filename": path.name,
                "sha256": wheel.sha256,
                "requires": list(wheel.requires),
                "source": str(directory),
                "build_seconds": round(seconds, 3),
                "built_at": time.time(),
            }
            partial = entry / f".{RECORD}"
            partial.write_text(json.dumps(record, indent=1))
            os.replace(partial, entry / RECORD)
            return wheel
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _load(entry: Path, name: str) -> LocalWheel | None:
    try:
        record = json.loads((entry / RECORD).read_text())
        path = entry / record["filename"]
        if sha256_of(path) != record["sha256"]:
            return None
        return LocalWheel(name, path, record["sha256"], tuple(record["requires"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


class OfferedWheels:
    """The wheels a pool named in its nodes' user-data, by sha256: what its client sends a
    node that asks (``skyward.transport.handshake``), and nothing else. The bytes are read
    when asked, as they are then: the node, not the client, checks them."""

    def __init__(self) -> None:
        self._paths: dict[str, Path] = {}

    def offer(self, wheels: Iterable[LocalWheel]) -> None:
        for wheel in wheels:
            self._paths[wheel.sha256] = wheel.path

    def __call__(self, digests: Sequence[str]) -> list[bytes]:
        unknown = [d for d in digests if d not in self._paths]
        if unknown:
            raise WheelBuildError(f"a node asked for wheels this pool never offered (sha256 {', '.join(unknown)})")
        return [self._paths[d].read_bytes() for d in digests]
