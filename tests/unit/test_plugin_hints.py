"""The install hint for a name a missing plugin provides, by attribute and by import."""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest

from skyward.errors import PluginMissingError
from skyward.plugin_hints import MissingPluginFinder, install_finder, missing_plugin_error


def test_an_import_of_a_missing_plugin_name_gets_an_import_error_that_says_what_to_install() -> None:
    error = missing_plugin_error("AWS", importing=True)
    assert isinstance(error, PluginMissingError) and isinstance(error, ImportError)
    assert "pip install 'skyward[aws]'" in str(error) and error.name == "skyward"


def test_the_hint_names_what_installs_today_before_the_published_form() -> None:
    """Nothing is on the public index, where the name ``skyward`` is another project's: the
    hint leads with the checkout and the built wheels, and states the extra as published."""
    message = str(missing_plugin_error("VastAI", importing=False))
    checkout = message.index("pip install ./skyward-vastai")
    wheels = message.index("pip install --find-links dist skyward-vastai")
    published = message.index("once published: pip install 'skyward[vastai]'")
    assert checkout < wheels < published


def test_attribute_access_to_a_missing_plugin_name_gets_an_attribute_error_with_the_same_words() -> None:
    error = missing_plugin_error("RunPod", "skyward", importing=False)
    assert type(error) is AttributeError  # hasattr() must still answer False
    assert str(error) == str(missing_plugin_error("RunPod", importing=True))


def test_a_name_no_plugin_provides_is_a_plain_missing_attribute() -> None:
    assert str(missing_plugin_error("Nope", importing=False)) == "module 'skyward' has no attribute 'Nope'"
    assert type(missing_plugin_error("Nope", importing=True)) is ImportError


def test_the_finder_explains_only_known_plugin_names_the_package_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    finder = MissingPluginFinder()
    package = types.ModuleType("skyward.integrations")
    monkeypatch.setitem(sys.modules, "skyward.integrations", package)
    with pytest.raises(PluginMissingError, match=r"skyward-sklearn plugin.*skyward\[sklearn\]"):
        finder.find_spec("skyward.integrations.JoblibPool")
    package.JoblibPool = object()  # type: ignore[attr-defined]  # installed after all: not ours to explain
    assert finder.find_spec("skyward.integrations.JoblibPool") is None
    assert finder.find_spec("skyward.integrations.unknown") is None  # the import fails as it would have
    assert finder.find_spec("numpy.AWS") is None  # another package: never


def test_the_finder_is_installed_once_after_the_finders_that_find_modules() -> None:
    install_finder()
    install_finder()
    finders = [f for f in sys.meta_path if isinstance(f, MissingPluginFinder)]
    assert len(finders) == 1
    assert sys.meta_path.index(finders[0]) > sys.meta_path.index(importlib.machinery.PathFinder)
