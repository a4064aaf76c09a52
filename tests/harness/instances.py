"""Moved to ``skyward.testing.instances``."""

from skyward.testing.instances import *  # noqa: F403
from skyward.testing.instances import host_tmp_entries  # noqa: F401
