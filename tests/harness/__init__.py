"""Emulated cloud instances for provider tests: now public, in ``skyward.testing`` (see
README.md); the tests that import them from here get that one list, not a copy of it."""

from skyward.testing import *  # noqa: F403
from skyward.testing import __all__ as __all__
