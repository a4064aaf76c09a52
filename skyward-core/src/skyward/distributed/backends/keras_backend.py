"""``distributed.keras(backend=...)``: Keras 3 on the chosen backend, data-parallel.

``KERAS_BACKEND`` is set before Keras is imported (and Keras is reloaded when an earlier
call in this worker imported it with another backend), then the backend's own
data-parallel machinery is set up around the function:

- ``"jax"``: ``jax.distributed`` across the pool (as ``distributed.jax``) and
  ``keras.distribution.set_distribution(DataParallel(devices=<every process's
  devices>))``: ``model.fit`` on each worker's shard of the data (``skyward.shard``)
  trains one replicated model, gradients averaged across workers.
- ``"tensorflow"``: ``TF_CONFIG`` (as ``distributed.tensorflow``) and a
  ``tf.distribute.MultiWorkerMirroredStrategy`` whose ``scope()`` the function runs in,
  so models it builds are mirrored and ``fit`` is synchronous across workers.
- ``"torch"``: Keras has no distribution API for torch; the documented way is torch's
  own DDP, so this sets up a torch.distributed process group (``distributed.torch``,
  from the skyward-torch plugin, found through the plugin registry) in which the
  function wraps its model in ``DistributedDataParallel``.

Every process seeds Keras with one seed (``keras.utils.set_random_seed``) before the
function runs: ``seed=`` or, unset, one derived from the pool's job id. On JAX this is
what makes data parallelism work at all: each process initialises the model's weights
itself and ``DataParallel`` places them on a mesh spanning every process, which JAX
refuses (an assertion in ``device_put``, "is not the same on each process") when the
processes drew different weights. The original documentation's example never seeded and
failed that way; a function that seeds per rank itself still does, and that assertion is
re-raised as ``ReplicasDisagreeError`` saying what to change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

from skyward.distributed.backends.base import DistributedDecorator, DistributedFunction, P, R, check_target, wrap
from skyward.distributed.backends.env import scoped_environ
from skyward.distributed.backends.frameworks import require
from skyward.distributed.backends.jax_backend import JAX_PIP, jax_distributed
from skyward.distributed.backends.tensorflow_backend import TENSORFLOW_PIP, check_timeout, tf_cluster
from skyward.errors import ConfigurationError, ReplicasDisagreeError
from skyward.plugin_hints import install_command
from skyward.plugins.registry import registry
from skyward.runtime.context import InstanceInfo
from skyward.sharding import derive_seed

KerasBackendName = Literal["jax", "tensorflow", "torch"]
BACKENDS: tuple[str, ...] = ("jax", "tensorflow", "torch")
SEED_LIMIT = 2**32  # numpy's seeds, which keras.utils.set_random_seed also sets, are below it
# what jax's device_put asserts when the processes disagree on a value it places globally
_DEVICE_PUT_DISAGREES = "is not the same on each process"


def keras_seed(seed: int | None, info: InstanceInfo) -> int:
    """The seed every process of one computation gives Keras: ``seed``, or unset, one that
    every worker of the pool derives identically from its job id."""
    return seed if seed is not None else derive_seed(info.job_id) % SEED_LIMIT


@contextmanager
def _explain_disagreement(seed: int) -> Iterator[None]:
    try:
        yield
    except AssertionError as error:
        if _DEVICE_PUT_DISAGREES not in str(error):
            raise
        raise ReplicasDisagreeError(
            "distributed.keras(backend='jax'): the processes built different values for one replicated "
            "array (usually the model's initial weights), and DataParallel needs them identical on every "
            f"process. The backend seeded Keras with {seed} on every process; do not re-seed per rank inside "
            "the function (keras.utils.set_random_seed(rank)), or pass one seed to all: "
            "distributed.keras(backend='jax', seed=...)"
        ) from error


def keras_pip(backend: str) -> tuple[str, ...]:
    """What ``Image(pip=...)`` needs for Keras on ``backend``."""
    framework = {"jax": JAX_PIP, "tensorflow": TENSORFLOW_PIP, "torch": ("torch",)}[backend]
    return ("keras", *framework)


def keras_env(backend: str) -> dict[str, str]:
    return {"KERAS_BACKEND": backend}


def import_keras(backend: str) -> Any:
    """Keras, imported (or reloaded) with ``backend``; ``KERAS_BACKEND`` must be set."""
    pip = keras_pip(backend)
    loaded = sys.modules.get("keras")
    if loaded is not None and loaded.config.backend() != backend:
        # imported by an earlier call with another backend: Keras binds its backend at
        # import, and set_backend is its own way to re-import it
        loaded.config.set_backend(backend)
    return require("keras", backend="keras", pip=pip)


@contextmanager
def _jax_data_parallel(
    info: InstanceInfo, timeout: float | None, auto_shard_dataset: bool, seed: int
) -> Iterator[None]:
    require("jax", backend="keras", pip=keras_pip("jax"))
    with jax_distributed(info, timeout, None, backend="keras"):
        keras = import_keras("jax")
        keras.utils.set_random_seed(seed)
        distribution = keras.distribution.DataParallel(
            devices=keras.distribution.list_devices(), auto_shard_dataset=auto_shard_dataset
        )
        keras.distribution.set_distribution(distribution)
        try:
            with _explain_disagreement(seed):
                yield
        finally:
            keras.distribution.set_distribution(None)


@contextmanager
def _tensorflow_data_parallel(info: InstanceInfo, timeout: float | None, seed: int) -> Iterator[None]:
    tf = require("tensorflow", backend="keras", pip=keras_pip("tensorflow"))
    import_keras("tensorflow").utils.set_random_seed(seed)
    with tf_cluster(info, timeout, backend="keras"):
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            yield


@dataclass(frozen=True, slots=True)
class KerasLauncher:
    """The launcher behind ``distributed.keras(backend=...)``.

    For ``"torch"`` it only selects the backend; the process group comes from the
    ``distributed.torch`` wrapper applied inside it.
    """

    backend: str = "jax"
    timeout: float | None = None
    auto_shard_dataset: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        check_keras_options(self.backend, self.timeout, self.seed)

    @property
    def name(self) -> str:
        return "keras"

    @contextmanager
    def session(self, info: InstanceInfo) -> Iterator[None]:
        seed = keras_seed(self.seed, info)
        with scoped_environ(keras_env(self.backend)):
            if self.backend == "jax":
                with _jax_data_parallel(info, self.timeout, self.auto_shard_dataset, seed):
                    yield
            elif self.backend == "tensorflow":
                with _tensorflow_data_parallel(info, self.timeout, seed):
                    yield
            else:
                require("torch", backend="keras", pip=keras_pip("torch"))
                import_keras("torch").utils.set_random_seed(seed)
                yield


def check_keras_options(backend: str, timeout: float | None, seed: int | None = None) -> None:
    if backend not in BACKENDS:
        raise ConfigurationError(f"distributed.keras(backend={backend!r}): use one of {', '.join(map(repr, BACKENDS))}")
    check_timeout(timeout, "distributed.keras")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
        raise ConfigurationError(f"distributed.keras(seed={seed!r}): must be an integer from 0 to {SEED_LIMIT - 1}")


def _torch_decorator(timeout: float | None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``distributed.torch(...)`` from whichever plugin provides it (skyward-torch)."""
    backend = registry.distributed_backends().get("torch")
    if backend is None:
        raise ConfigurationError(
            "distributed.keras(backend='torch') sets up a torch.distributed process group "
            "with distributed.torch, which the skyward-torch plugin provides, and it is not "
            f"installed: install it {install_command('torch')}"
        )
    return backend.factory(timeout=timeout)


def keras(
    backend: KerasBackendName = "jax", *, timeout: float | None = None, seed: int | None = None
) -> DistributedDecorator:
    """``@distributed.keras(backend="jax")``: Keras 3 on ``backend``, data-parallel across
    every worker of the pool (see the module documentation for what each backend sets up).

    backend: ``"jax"`` (default: Keras's distribution API is JAX's), ``"tensorflow"`` or
             ``"torch"``.
    timeout: seconds the workers wait for each other to join; unset, each framework's
             default.
    seed:    what every process passes to ``keras.utils.set_random_seed`` before the
             function runs, so that all initialise the same weights (JAX's data
             parallelism requires it); unset, one derived from the pool's job id.
    """
    check_keras_options(backend, timeout, seed)
    launcher = KerasLauncher(backend=backend, timeout=timeout, seed=seed)
    # resolved now, on the client: a missing plugin fails at decoration, not on the node
    inner = _torch_decorator(timeout) if backend == "torch" else None

    def apply(fn: Callable[P, R]) -> DistributedFunction[P, R]:
        check_target(fn, "keras")  # before torch's wrapper names itself in the error
        return wrap(fn if inner is None else inner(fn), launcher)

    return apply
