"""Emulated cloud instances for provider tests (cloud-neutral; see README.md)."""

from .instances import (
    AgentEndpoint,
    EmulatedInstance,
    EmulatedInstances,
    UnsafeUserData,
    check_user_data,
    decode_user_data,
)
from .stubs import recorder

__all__ = [
    "AgentEndpoint",
    "EmulatedInstance",
    "EmulatedInstances",
    "UnsafeUserData",
    "check_user_data",
    "decode_user_data",
    "recorder",
]
