#!/usr/bin/env python3
"""Developer tasks. Needs nothing but Python 3.11+; everything else goes into .venv.

python3 tasks.py example   # run examples/01_quickstart.py on a Local pool of two nodes
python3 tasks.py test      # install everything, run the whole test suite
python3 tasks.py check     # ruff (lint + format), mypy and the layers (import-linter)
python3 tasks.py bench     # the quick benchmark (see bench/README.md)
python3 tasks.py docs      # build the documentation site strictly into site/ (--serve: serve it live)
python3 tasks.py examples  # run every script in examples/ on Local (names: only those)
python3 tasks.py dist      # every distribution's wheel and sdist into dist/ (--out DIR), twine-checked
python3 tasks.py version   # the version all distributions share (version X.Y.Z: set it everywhere)
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
PACKAGES = [
    "skyward-core",
    "skyward-aws",
    "skyward-digitalocean",
    "skyward-gcp",
    "skyward-verda",
    "skyward-vastai",
    "skyward-runpod",
    "skyward-torch",
    "skyward-sklearn",
]
STAMP = VENV / ".skyward-installed"
META = ROOT  # the `skyward` meta-distribution: dependencies only
VERSION_FILE = ROOT / "skyward-core" / "src" / "skyward" / "version.py"

# What each task installs into .venv. "dev" is everything (requirements-dev.txt includes the
# docs and dist files); "docs" is the site's tools alone (36 packages in a fresh .venv, pip
# included, and under a minute from nothing to a built site on a 2-core machine; the dev
# stack is 163 with torch, jax and tensorflow); "dist" the build and check tools.
GROUPS = ("core", "docs", "dist", "dev")


def run(*cmd: str | Path, env: dict[str, str] | None = None, check: bool = True) -> int:
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run([str(c) for c in cmd], cwd=ROOT, env=env, check=check).returncode


def installed_groups(stamp: str, digest: str) -> set[str]:
    """The groups a stamp says .venv holds, as of the requirements' ``digest`` (none when
    they changed since). ``dev`` holds every other group."""
    words = stamp.split()
    if not words or words[0] != digest:
        return set()
    groups = set(words[1:])
    return set(GROUPS) if "dev" in groups else groups


def ensure_venv(group: str) -> None:
    """.venv with ``group`` installed (one of GROUPS), installing it only when the stamp
    says it is missing or the requirements changed since."""
    if not PY.exists():
        venv.EnvBuilder(with_pip=True).create(VENV)
    digest = _requirements_digest()
    have = installed_groups(STAMP.read_text() if STAMP.exists() else "", digest)
    if group in have:
        return
    pip = _installer()
    if group == "dev":
        editable = [arg for p in PACKAGES for arg in ("-e", ROOT / p)]
        run(*pip, "-r", ROOT / "requirements-dev.txt", *editable, "-e", ROOT / "tests" / "plugin_example")
    elif group == "core":
        run(*pip, "-e", ROOT / PACKAGES[0])
    else:
        run(*pip, "-r", ROOT / f"requirements-{group}.txt")
    STAMP.write_text(" ".join([digest, *sorted(have | {group})]))


def _installer() -> list[str | Path]:
    """``uv pip install`` into .venv (uv itself installed there first, by pip), with pip's
    configured sources. uv because it installs the dev stack (torch, jax, tensorflow: 209
    packages) in 21 s where pip took about 7 minutes on a 2-core machine, both from the same
    local mirror."""
    uv = VENV / "bin" / "uv"
    if not uv.exists():
        run(PY, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "uv>=0.4")
    return [uv, "pip", "install", "--quiet", "--python", PY, *_uv_sources()]


_PIP_TO_UV = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
              "constraint": "--constraint"}  # fmt: skip


def _uv_sources() -> list[str]:
    """pip's configured sources (``pip config list``: its files and PIP_* variables) as uv
    options: uv reads no pip.conf, and a machine whose pip points at a mirror or a folder of
    wheels (torch's CPU build here) must install the same packages. Every source counts, as
    with pip (``unsafe-best-match``), not only the first that has a package."""
    listing = subprocess.run([PY, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False)
    values: dict[str, list[str]] = {}
    for line in listing.stdout.splitlines():
        key, _, value = line.partition("=")
        values.setdefault(key.rsplit(".", 1)[-1], []).extend(value.strip().strip("'\"").split())
    options = ["--index-strategy", "unsafe-best-match"]
    for name, flag in _PIP_TO_UV.items():
        for value in dict.fromkeys(values.get(name, [])):
            options += [flag, value]
    return options


def _requirements_digest() -> str:
    """What the installs depend on: a changed pyproject (a new dependency, a new console
    script or entry point) or requirements file makes the next task install again, so a
    .venv made before a pull never runs with stale metadata."""
    digest = hashlib.sha256()
    for path in sorted(
        [*ROOT.glob("requirements-*.txt"), *ROOT.glob("*/pyproject.toml"), *ROOT.glob("tests/*/pyproject.toml")]
    ):
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def example() -> int:
    ensure_venv("core")
    return run(PY, ROOT / "examples" / "01_quickstart.py", check=False)


def _in_isolated_netns(cmd: list[str | Path]) -> list[str | Path]:
    """Run ``cmd`` in a fresh network namespace with only loopback up: tests that talk to
    emulated clouds can then reach nothing off this machine, whatever address they try."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        raise SystemExit("the cloud tests need root and unshare(1) to run in an isolated network namespace")
    inner = " ".join(f"'{c}'" for c in cmd)
    return ["unshare", "--net", "--", "sh", "-c", f"ip link set lo up && exec {inner}"]


SYSTEM_TOOLS = {"rclone": "rclone", "fusermount3": "fuse3"}  # executable -> Debian package
"""What the volume tests run besides Python, as a node does: rclone, and FUSE 3's fusermount3."""


def ensure_system_tools() -> None:
    """Install the missing SYSTEM_TOOLS with apt-get (root on Debian/Ubuntu), or say how."""
    missing = sorted({package for tool, package in SYSTEM_TOOLS.items() if shutil.which(tool) is None})
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise SystemExit(f"the volume tests need {', '.join(missing)}: install them (apt install {' '.join(missing)})")
    run("apt-get", "update", "-q")
    run("apt-get", "install", "-y", "-q", *missing)


def test(extra: list[str]) -> int:
    ensure_venv("dev")
    ensure_system_tools()
    env = dict(os.environ, PYTHONHASHSEED="0", SKYWARD_TEST_NETNS="")
    # two workers (pytest-xdist): the suite is safe in parallel (free ports, temporary
    # directories, a namespace per run); on CI's 2-core machine this took the two passes
    # from 8.1 + 10.9 minutes to 4.5 + 5.9 (fresh clones of the same commit)
    base: list[str | Path] = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2"]
    code = run(*base, "-m", "not cloud", *extra, env=env, check=False)
    cloud_env = dict(env, SKYWARD_TEST_NETNS="1")
    # three workers for the cloud tests, which wait on emulated APIs' delays and polls more
    # than they compute: 396 took 11:11 on 2 workers and 8:25 on 3 (same fresh clone, 2 cores)
    cloud_base = [*base[:-1], "3"]
    cloud = run(*_in_isolated_netns([*cloud_base, "-m", "cloud", *extra]), env=cloud_env, check=False)
    return code or cloud_result(cloud, extra)


NO_TESTS_COLLECTED = 5  # pytest's exit status


def cloud_result(code: int, extra: list[str]) -> int:
    """The cloud pass's exit status as the task reports it. Collecting no cloud test is
    fine when the arguments chose a part of the suite (``tasks.py test tests/unit``), and a
    failure on a whole run: there, it means the cloud tests went missing."""
    if code == NO_TESTS_COLLECTED and extra:
        return 0
    return code


def check() -> int:
    ensure_venv("dev")
    paths = [
        p
        for p in ("skyward-core", *PACKAGES[1:], "tests", "examples", "bench", "tools", "tasks.py")
        if (ROOT / p).exists()
    ]
    codes = [
        run(PY, "-m", "ruff", "check", *paths, check=False),
        run(PY, "-m", "ruff", "format", "--check", *paths, check=False),
        run(PY, "-m", "mypy", *[f"{p}/src" for p in PACKAGES], check=False),
        run(PY, "-m", "mypy", "tests/typing", check=False),  # the operators keep their types
        # the layers of docs/architecture.md ([tool.importlinter] in pyproject.toml)
        run(VENV / "bin" / "lint-imports", check=False),
    ]
    return max(codes)


def bench(extra: list[str]) -> int:
    ensure_venv("dev")
    return run(PY, ROOT / "bench" / "run.py", *extra, check=False)


def docs(extra: list[str]) -> int:
    """``mkdocs build --strict``: a broken link, a missing anchor or an API name that no
    longer exists fails the build. ``--serve`` serves the site with live reload instead.
    Installs the site's tools only (requirements-docs.txt): mkdocstrings reads the
    sources, so the packages themselves need not be installed."""
    ensure_venv("docs")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    if "--serve" in extra:
        return run(PY, "-m", "mkdocs", "serve", "--strict", *[a for a in extra if a != "--serve"], env=env, check=False)
    return run(PY, "-m", "mkdocs", "build", "--strict", *extra, env=env, check=False)


DISTRIBUTIONS = [ROOT / p for p in PACKAGES] + [META]
_PROJECT_VERSION = re.compile(r'^(version = ")([^"]+)(")', re.MULTILINE)
_PIN = re.compile(r'("skyward-[a-z]+==)([^"]+)(")')
_MODULE_VERSION = re.compile(r'^(__version__ = ")([^"]+)(")', re.MULTILINE)


def current_version() -> str:
    """The one version every distribution has: skyward-core's ``skyward.version``."""
    match = _MODULE_VERSION.search(VERSION_FILE.read_text())
    if match is None:
        raise SystemExit(f"{VERSION_FILE} has no __version__ line")
    return match[2]


def versioned_files() -> list[Path]:
    return [VERSION_FILE, *(d / "pyproject.toml" for d in DISTRIBUTIONS)]


def with_version(text: str, version: str) -> str:
    """``text`` (a pyproject.toml or version.py) with its own version and every pin of a
    skyward distribution set to ``version``: they are released together, each plugin
    pinned to the core it was built with."""
    for pattern in (_PROJECT_VERSION, _PIN, _MODULE_VERSION):
        text = pattern.sub(lambda m: f"{m[1]}{version}{m[3]}", text)
    return text


def version(extra: list[str]) -> int:
    """Print the version; ``version X.Y.Z`` writes it into version.py and every
    pyproject.toml (each distribution's version and its pins on the others)."""
    if not extra:
        print(current_version())
        return 0
    new = extra[0]
    if not re.fullmatch(r"\d+(\.\d+)*([abc]|rc)?\d*(\.post\d+)?(\.dev\d+)?", new):
        print(f"version {new!r} is not a PEP 440 release such as 0.2.0", file=sys.stderr)
        return 2
    for path in versioned_files():
        path.write_text(with_version(path.read_text(), new))
    print(f"version {new} written to {len(versioned_files())} files", flush=True)
    return 0


def dist(extra: list[str]) -> int:
    """Each distribution's sdist, and its wheel built from that sdist (so an sdist that
    lacks a file fails here, not on a user's machine), into ``dist/`` (``--out DIR``),
    then ``twine check --strict`` over all of them. Another machine installs from it with
    ``pip install --find-links dist 'skyward[aws,torch]'``."""
    ensure_venv("dist")
    out = Path(extra[extra.index("--out") + 1]).resolve() if "--out" in extra else ROOT / "dist"
    if out.exists():
        for old in [*out.glob("skyward*.whl"), *out.glob("skyward*.tar.gz")]:
            old.unlink()  # an earlier version's files would be installed beside these
    out.mkdir(parents=True, exist_ok=True)
    uv = VENV / "bin" / "uv"
    for source in DISTRIBUTIONS:
        code = run(uv, "build", "--quiet", "--out-dir", out, source, check=False)
        if code != 0:
            return code
    built = sorted([*out.glob("skyward*.whl"), *out.glob("skyward*.tar.gz")])
    if len(built) != 2 * len(DISTRIBUTIONS):
        print(f"expected {2 * len(DISTRIBUTIONS)} files in {out}, found {len(built)}", file=sys.stderr)
        return 1
    code = run(PY, "-m", "twine", "check", "--strict", *built, check=False)
    if code == 0:
        print(f"{len(built)} files in {out}; install with: pip install --find-links {out} 'skyward[aws]'", flush=True)
    return code


EXAMPLE_TIMEOUT = 300  # seconds; the slowest (PyTorch DDP, Keras) take about 20 s on a 2-core machine
EXAMPLES_AT_ONCE = 2
"""Examples run two at a time, each one's output printed whole when it ends: a Local pool
spends much of its life waiting (start-up, teardown), and on a 2-core machine the 25
examples took 2:30 one at a time."""


def examples(names: list[str]) -> int:
    """Run each ``examples/NN_*.py`` on Local (``SKYWARD_PROVIDER`` unset), each in its own
    process, ``EXAMPLES_AT_ONCE`` at a time, and report every failure rather than the first."""
    ensure_venv("dev")
    scripts = sorted((ROOT / "examples").glob("[0-9][0-9]_*.py"))
    if names:
        scripts = [s for s in scripts if s.stem in names or s.name in names]
    env = {k: v for k, v in os.environ.items() if k != "SKYWARD_PROVIDER"}

    def one(script: Path) -> tuple[str, int, str]:
        try:
            done = subprocess.run(
                [str(PY), str(script)], cwd=ROOT, env=env, timeout=EXAMPLE_TIMEOUT, check=False,
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            )  # fmt: skip
            return script.name, done.returncode, done.stdout
        except subprocess.TimeoutExpired as expired:
            output = expired.output if isinstance(expired.output, str) else ""
            return script.name, -1, f"{output}\n(killed after {EXAMPLE_TIMEOUT} s)\n"

    failed: list[str] = []
    with ThreadPoolExecutor(EXAMPLES_AT_ONCE) as runner:
        for name, code, output in runner.map(one, scripts):
            print(f"=== {name} (exit {code})", flush=True)
            print(output, end="" if output.endswith("\n") or not output else "\n", flush=True)
            if code != 0:
                failed.append(f"{name} (exit {code})")
    print(f"examples: {len(scripts) - len(failed)} passed, {len(failed)} failed", flush=True)
    for name in failed:
        print(f"FAILED {name}", flush=True)
    return 1 if failed or not scripts else 0


def write_bytecode() -> None:
    """Let every process a task starts write and reuse bytecode caches, whatever
    ``PYTHONDONTWRITEBYTECODE`` says (some containers and CI images set it). The suite
    starts hundreds of interpreters (agents, workers, snippets) that import skyward,
    torch or tensorflow; with nothing cached (a fresh clone, and uv installs without
    compiling), each compiled those sources again. Fresh clones on the same 2-core
    machine, the variable set: the tests took 24:27 (non-cloud 14:57, cloud 9:01) and the
    examples 111 s; with caches written, 18:34 (10:46 and 7:24) and 54 s. (The first run
    shared the machine with a two-minute benchmark.)"""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False


def main() -> int:
    tasks = {"example", "test", "check", "bench", "docs", "examples", "dist", "version"}
    write_bytecode()
    if len(sys.argv) < 2 or sys.argv[1] not in tasks:
        print(__doc__)
        return 2
    task, extra = sys.argv[1], sys.argv[2:]
    if task == "docs":
        return docs(extra)
    if task == "examples":
        return examples(extra)
    if task == "example":
        return example()
    if task == "test":
        return test(extra)
    if task == "check":
        return check()
    if task == "dist":
        return dist(extra)
    if task == "version":
        return version(extra)
    return bench(extra)


if __name__ == "__main__":
    sys.exit(main())
