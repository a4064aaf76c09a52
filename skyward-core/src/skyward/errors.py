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


class NodeLostError(WorkerDiedError):
    """The node running a task (or the node a task was meant for) stopped answering: it
    was terminated, preempted or lost its network."""


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


class RemoteExitError(RemoteError):
    """A task raised ``SystemExit``, ``KeyboardInterrupt`` or another exit-like exception
    that is not an ``Exception``. Re-raised as itself it would end the caller's program;
    it arrives wrapped, the original in ``exception`` and the remote traceback as cause."""

    def __init__(self, message: str, exception: BaseException | None = None) -> None:
        super().__init__(message)
        self.exception = exception


class UnreadableResultError(RemoteError):
    """A task's result (or exception) arrived but cannot be unpickled on the client: its
    type's module is not importable here, or safe mode refused the type."""


class SharedMemoryError(SkywardError):
    """A Local pool's shared-memory segment holding a task's argument or result could not
    be read (removed from /dev/shm by another process, or no memory left to map it): that
    task fails with this error; the pool goes on (skyward.transport.shm)."""


class TransferError(SkywardError):
    """A large buffer of a task's argument or result, sent sealed on a worker's data
    connection, stopped arriving (the connection was lost half-way, or its chunks were
    refused): that task fails with this error; the pool goes on
    (skyward.transport.sealed)."""


class AbandonedError(SkywardError):
    """A task whose result nobody wanted any more (``ComputePool.abandon``) was taken back
    from its worker before it began: it never ran."""


class UnavailableError(ProvisioningError):
    """A provider could not provide the pool for a reason another candidate (provider,
    region, accelerator, price) may not share: a pool with several candidates moves on to
    the next one. Raised as one of its subclasses; a plain ``ProvisioningError`` or a
    ``ConfigurationError`` (bad input, bad credentials) stops the pool at once."""

    reason = "unavailable"


class CapacityError(UnavailableError):
    """The provider has no capacity for the machine right now (in this region, zone or
    market). Within a pool, the cloud template retries a create or falls back to
    on-demand as the node's spot plan says; ``node`` and ``market`` ("spot",
    "on-demand"), when given, say which request was refused."""

    reason = "capacity"

    def __init__(self, message: str, *, node: int | None = None, market: str | None = None) -> None:
        super().__init__(message)
        self.node = node
        self.market = market


class QuotaError(UnavailableError):
    """The account's limit (instances, vCPUs, GPUs) on this provider is reached."""

    reason = "quota"


class NoOfferError(UnavailableError):
    """The provider offers no machine that fits the request where the pool may run."""

    reason = "no offer"


class PriceCapError(UnavailableError):
    """The cheapest fitting machine would cost more per hour than ``max_hourly_cost``."""

    reason = "price cap"


class LaunchTimeoutError(UnavailableError):
    """The nodes were not running (or their agents not answering) within the provider's
    time limit."""

    reason = "launch timeout"


class BootstrapTimeoutError(LaunchTimeoutError):
    """A node was launched but its agent never answered within the provider's bootstrap
    timeout (a marketplace host that never starts its container is common). At a pool's
    start it moves the pool to its next candidate; a bootstrap that fails with its own
    error (a bad ``Image``) raises ``ProvisioningError`` with its log instead, and stops."""

    reason = "bootstrap timeout"


class KeyRefusedError(BootstrapTimeoutError):
    """A node did not answer in time, and something at its address refused the client's
    CURVE key meanwhile: another agent listens there, or (``sky.attach``) the client holds
    keys that are not the ones the node was started with."""


class NoCandidateError(ProvisioningError):
    """Every candidate of a pool failed for a reason another candidate could have fixed.
    ``failures`` holds, in the order they were tried, each candidate's label and error."""

    def __init__(self, message: str, failures: tuple[tuple[str, UnavailableError], ...] = ()) -> None:
        super().__init__(message)
        self.failures = failures


class WheelBuildError(ProvisioningError):
    """The client could not build the wheel of a local requirement (a checkout of skyward
    or of a plugin) that its cloud nodes install; raised before anything is provisioned."""


class WheelRefusedError(ProvisioningError):
    """A node refused the wheels the client sent: their sha256 differ from the ones its
    user-data names (the client's wheel cache changed after the node was created)."""


class NodeIdentityError(ProvisioningError):
    """The agent that answered at a node's endpoint is not that node's (another node's, or
    another pool's), or two nodes were given one endpoint: typically two agents on one
    host with one address and port. Refused rather than run: the pool would otherwise send
    one node's work to another and return wrong results."""


class AttachError(SkywardError):
    """``sky.attach(name)`` could not reconnect to a kept pool: none of that name on this
    machine, its keys missing or not the ones its nodes hold, another client attached
    already, or its nodes gone (their keep-alive or timeout passed)."""


class VolumeError(ProvisioningError):
    """A node could not mount (or download) a ``sky.Volume``: the pool did not open, and
    what it made was torn down. The message holds the node's reason (rclone's words)."""
