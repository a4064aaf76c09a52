"""Emulated cloud instances for provider tests: now public, in ``skyward.testing`` (see
README.md); these names stay for the tests that import them from here."""

from skyward.testing.instances import (
    AgentEndpoint,
    EmulatedInstance,
    EmulatedInstances,
    UnsafeUserData,
    check_user_data,
    decode_user_data,
)
from skyward.testing.stubs import recorder

__all__ = [
    "AgentEndpoint",
    "EmulatedInstance",
    "EmulatedInstances",
    "UnsafeUserData",
    "check_user_data",
    "decode_user_data",
    "recorder",
]
