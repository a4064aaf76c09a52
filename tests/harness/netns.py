"""Moved to ``skyward.testing.netns``."""

from skyward.testing.netns import isolation_problem  # noqa: F401
