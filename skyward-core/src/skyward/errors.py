"""The exceptions Skyward raises, one family per kind of failure."""

from __future__ import annotations


class SkywardError(Exception):
    """Base class of every error Skyward raises itself."""


class ConfigurationError(SkywardError, ValueError):
    """Bad input to a public API, detected before anything is provisioned."""


class PluginMissingError(SkywardError, ImportError):
    """``from skyward import AWS`` without the plugin that provides it: says what to
    install. (``skyward.AWS`` raises an ``AttributeError`` with the same words.)"""


class ProvisioningError(SkywardError):
    """A provider could not provide, bootstrap or reach the requested nodes."""


class VersionMismatchError(ProvisioningError):
    """Client and worker disagree on Python minor version or cloudpickle version."""


class WorkerDiedError(SkywardError):
    """The worker process running a task died (signal, OOM kill, segfault)."""


class PoolClosedError(SkywardError):
    """A computation was sent to a pool that is not active."""


class PoolTimeoutError(PoolClosedError):
    """The pool's ``timeout`` passed; it stopped itself and its tasks were cancelled."""


class NotInComputationError(SkywardError, RuntimeError):
    """A worker-only API (``instance_info``, ``shard``) was called outside a computation."""


class ReplicasDisagreeError(SkywardError, AssertionError):
    """The processes of one data-parallel computation hold different values where they must
    hold the same (Keras on JAX: weights initialised from different seeds). An
    ``AssertionError`` too, because that is what the framework raised."""


class RemoteError(SkywardError):
    """Raised when a remote exception cannot be rebuilt as its original type."""
