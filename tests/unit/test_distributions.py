"""The distributions as a release: one version everywhere, every plugin pinned to the core
of that version, the meta-distribution's extras naming each plugin, the light task
installs, and no site link to the other project named skyward."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

from hypothesis import given
from hypothesis import strategies as st

from skyward.version import __version__

ROOT = Path(__file__).resolve().parents[2]


def _tasks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("skyward_tasks_dist", ROOT / "tasks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["skyward_tasks_dist"] = module
    spec.loader.exec_module(module)
    return module


def _project(directory: Path) -> dict[str, object]:
    project: dict[str, object] = tomllib.loads((directory / "pyproject.toml").read_text())["project"]
    return project


def test_every_distribution_has_the_core_s_version_and_pins_its_siblings_to_it() -> None:
    tasks = _tasks()
    assert tasks.current_version() == __version__
    names = set()
    for directory in tasks.DISTRIBUTIONS:
        project = _project(directory)
        names.add(project["name"])
        assert project["version"] == __version__, directory
        assert project.get("readme") == "README.md" and (directory / "README.md").is_file(), directory
        requirements = [*project.get("dependencies", [])]  # type: ignore[misc]
        for extra in project.get("optional-dependencies", {}).values():  # type: ignore[attr-defined]
            requirements += extra
        for requirement in requirements:
            if requirement.startswith("skyward"):
                assert requirement.endswith(f"=={__version__}"), (directory, requirement)
    assert names == {"skyward", *tasks.PACKAGES}


def test_the_meta_distribution_has_an_extra_for_each_plugin_and_all_of_them() -> None:
    extras: dict[str, list[str]] = _project(ROOT)["optional-dependencies"]  # type: ignore[assignment]
    plugins = [p for p in _tasks().PACKAGES if p != "skyward-core"]
    for plugin in plugins:
        assert extras[plugin.removeprefix("skyward-")] == [f"{plugin}=={__version__}"]
    assert sorted(extras["all"]) == sorted(f"{p}=={__version__}" for p in plugins)


def test_the_meta_distribution_s_sdist_holds_only_its_readme_and_pyproject() -> None:
    sdist = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["hatch"]["build"]["targets"]["sdist"]
    assert sdist["only-include"] == ["README.md", "pyproject.toml"]  # not tests/, docs/ or the plugins' trees


_VERSION = st.from_regex(r"\A[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}(rc[0-9])?\Z")


@given(_VERSION)
def test_setting_a_version_rewrites_each_version_and_pin_and_nothing_else(version: str) -> None:
    tasks = _tasks()
    original = (ROOT / "pyproject.toml").read_text()
    rewritten = tasks.with_version(original, version)
    project = tomllib.loads(rewritten)["project"]
    assert project["version"] == version
    pins = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    assert pins and all(pin.endswith(f"=={version}") for pin in pins)
    # everything but the versions is untouched
    assert re.sub(r"(version = \"|==)[^\"]+\"", "", rewritten) == re.sub(r"(version = \"|==)[^\"]+\"", "", original)
    module = tasks.with_version(tasks.VERSION_FILE.read_text(), version)
    assert f'__version__ = "{version}"' in module


def test_a_stamp_tells_which_task_groups_the_venv_holds() -> None:
    installed = _tasks().installed_groups
    assert installed("abc docs", "abc") == {"docs"}
    assert installed("abc core docs", "abc") == {"core", "docs"}
    assert installed("abc dev", "abc") == {"core", "docs", "dist", "dev"}  # the dev stack holds every group
    assert installed("old dev", "abc") == set()  # the requirements changed since: install again
    assert installed("dev 0123456789abcdef", "abc") == set()  # a stamp from before groups


def test_the_docs_install_is_the_site_s_tools_alone_and_the_dev_stack_includes_it() -> None:
    docs = (ROOT / "requirements-docs.txt").read_text()
    names = {re.split(r"[\[=<>]", line)[0] for line in docs.splitlines() if line and not line.startswith("#")}
    assert names == {"mkdocs", "mkdocs-material", "mkdocstrings", "mkdocstrings-python", "ruff"}
    dev = (ROOT / "requirements-dev.txt").read_text().splitlines()
    assert "-r requirements-docs.txt" in dev and "-r requirements-dist.txt" in dev
    assert "twine" in (ROOT / "requirements-dist.txt").read_text()


def test_the_site_links_to_no_other_project_s_repository() -> None:
    """The name skyward on the public index is another project; the site once linked to it."""
    config = (ROOT / "mkdocs.yml").read_text()
    assert not re.search(r"^repo_url:", config, re.MULTILINE)
    assert "gabfssilva" not in config


_BARE_INSTALL = re.compile(r"""pip install (?:-\S+ )*["']?skyward(?:\[[a-z,]+\])?["']?(?:\s|$|`|\))""")


def test_no_page_tells_a_reader_to_pip_install_skyward_from_the_index() -> None:
    """``pip install skyward`` or ``'skyward[aws]'`` alone fetches the other project (or
    nothing): a page may give it only with ``--find-links dist``, as the published form, or as
    what does not work (``a plain pip install 'skyward[aws]'``)."""
    pages = [ROOT / "README.md", *ROOT.glob("skyward-*/README.md"), *(ROOT / "docs").rglob("*.md")]
    pages += [*(ROOT / "examples").glob("*.py")]
    offending = []
    for page in pages:
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for match in _BARE_INSTALL.finditer(line):
                before = line[: match.start()]
                if (
                    "--find-links" in match[0]
                    or any(word in before for word in ("published", "plain"))
                    or "fetches" in line
                ):
                    continue
                offending.append(f"{page.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offending == []
