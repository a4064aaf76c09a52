"""The ``uv`` an emulated instance finds on its PATH: an offline package mirror.

Emulated instances run inside a network namespace with only loopback up, so no package
index is reachable and a real ``uv pip install`` could not fetch anything. The emulated
machine image therefore carries a ``uv`` whose mirror is the test run's own virtual
environment:

* ``uv venv [--python X] DIR`` makes a real virtual environment with the mirror's base
  interpreter; it fails, as uv would, when ``X`` names another Python version.
* ``uv pip install --python PY REQ...`` checks every requirement against the mirror
  (name, version specifier, environment marker, and for ``name @ file://...`` the exact
  source the mirror installed it from) and fails with "No solution found" when one is
  not there; then it links the mirror's site-packages into the environment with a
  ``.pth`` file. Nothing is copied or downloaded.
* ``uv pip install --no-deps --python PY FILE.whl ...`` installs each wheel as an installer
  does (unpacked into the environment's site-packages, ``INSTALLER`` written): how a node
  installs the wheels its client sent (``skyward.wheels``). A wheel the environment holds
  comes before the mirror on ``sys.path``.

So the bootstrap's own environment steps run unchanged (cache key, lock, marker file,
version check), and a node whose image asks for a package the mirror lacks fails the
way a node without the package would.
"""

from __future__ import annotations

import site
import sys
import sysconfig

_SCRIPT = r'''#!{python}
"""uv, as the emulated instance's image provides it (offline mirror; see tests/harness/uv_mirror.py)."""
import json, os, subprocess, sys
from importlib import metadata
from packaging.requirements import InvalidRequirement, Requirement

BASE_PYTHON = {base_python!r}
BASE_VERSION = {base_version!r}
MIRROR_SITES = {mirror_sites!r}

def fail(message):
    print(f"error: {{message}}", file=sys.stderr)
    sys.exit(2)

def option(args, name):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i : i + 2]
        return value
    for a in list(args):
        if a.startswith(name + "="):
            args.remove(a)
            return a.split("=", 1)[1]
    return None

def venv(args):
    python = option(args, "--python") or option(args, "-p")
    for flag in ("--quiet", "-q", "--seed", "--clear", "--allow-existing"):
        while flag in args:
            args.remove(flag)
    if len(args) != 1:
        fail(f"uv venv: expected one directory, got {{args}}")
    if python is not None and not os.path.isabs(python):
        if not (BASE_VERSION == python or BASE_VERSION.startswith(python + ".")):
            fail(f"No interpreter found for Python {{python}} (this image has Python {{BASE_VERSION}} only)")
    base = python if python is not None and os.path.isabs(python) else BASE_PYTHON
    subprocess.run([base, "-m", "venv", "--without-pip", args[0]], check=True)

def installed_from(dist):
    raw = dist.read_text("direct_url.json")
    return json.loads(raw).get("url") if raw else None

def pip_install(args):
    python = option(args, "--python") or option(args, "-p")
    option(args, "--extra-index-url")
    option(args, "--index-url")
    no_deps = "--no-deps" in args
    for flag in ("--quiet", "-q", "--upgrade", "-U", "--no-deps"):
        while flag in args:
            args.remove(flag)
    if python is None:
        fail("uv pip install: this image's uv needs --python")
    wheels = [a for a in args if a.endswith(".whl")]
    if wheels:
        if not no_deps or len(wheels) != len(args):
            fail("this image's uv installs wheel files only alone and with --no-deps")
        return install_wheels(python, wheels)
    missing = []
    for text in args:
        try:
            req = Requirement(text)
        except InvalidRequirement as error:
            fail(f"invalid requirement {{text!r}}: {{error}}")
        if req.marker is not None and not req.marker.evaluate():
            continue
        try:
            dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            missing.append(f"{{text}} (not in the image's offline mirror)")
            continue
        if req.url is not None and installed_from(dist) != req.url:
            missing.append(f"{{text}} (the mirror has {{req.name}} from {{installed_from(dist) or 'an index'}})")
        elif req.specifier and not req.specifier.contains(dist.version, prereleases=True):
            missing.append(f"{{text}} (the mirror has {{req.name}} {{dist.version}})")
    if missing:
        fail("No solution found when resolving dependencies:\n  " + "\n  ".join(missing))
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    lines = "".join(f"import site; site.addsitedir({{p!r}})\n" for p in MIRROR_SITES)
    with open(os.path.join(purelib, "_emulated_image_mirror.pth"), "w") as f:
        f.write(lines)
    print(f"Installed {{len(args)}} packages from the image's offline mirror", file=sys.stderr)

def purelib_of(python):
    return subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()

def install_wheels(python, wheels):
    import zipfile
    purelib = purelib_of(python)
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            tops = {{n.split("/")[0] for n in names}}
            if any(t.endswith(".data") for t in tops):
                fail(f"{{wheel}}: this image's uv installs pure wheels only (no .data directory)")
            archive.extractall(purelib)
        for top in tops:
            if top.endswith(".dist-info"):
                with open(os.path.join(purelib, top, "INSTALLER"), "w") as f:
                    f.write("uv\n")
    print(f"Installed {{len(wheels)}} wheels", file=sys.stderr)

def main():
    args = sys.argv[1:]
    if args[:1] == ["--version"]:
        print("uv (emulated image, offline mirror)")
        return
    if args[:1] == ["venv"]:
        return venv(args[1:])
    if args[:2] == ["pip", "install"]:
        return pip_install(args[2:])
    fail(f"this image's uv supports 'venv' and 'pip install' only, not {{args}}")

main()
'''


def uv_script(python: str = sys.executable) -> str:
    """The shim's text, with the mirror (this interpreter's environment) baked in."""
    base = getattr(sys, "_base_executable", sys.executable)
    sites = [p for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}]
    return _SCRIPT.format(
        python=python,
        base_python=base,
        base_version=".".join(map(str, sys.version_info[:3])),
        mirror_sites=sorted(sites),
    )
