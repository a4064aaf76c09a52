"""distributed.keras on a real Local pool, one test per Keras backend.

Each trains a small regression data-parallel across two workers, each worker holding its
own shard of the data, and checks what the workers saw: ``KERAS_BACKEND``, Keras's
backend and the backend's data-parallel set-up. The tests share one pool, so Keras is
switched between backends inside the same worker processes as well.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

import skyward as sky
from skyward import distributed
from skyward.errors import ReplicasDisagreeError

pytest.importorskip("keras")

pytestmark = [pytest.mark.heavy, pytest.mark.slow]

TRUE_WEIGHTS = [1.0, -2.0, 0.5, 3.0]


def _data() -> tuple[Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 4)).astype("float32")
    y = (x @ np.array(TRUE_WEIGHTS, dtype="float32"))[:, None]
    return sky.shard(x, y)


@sky.compute
@distributed.keras(backend="jax", timeout=120)
def fit_on_jax() -> dict[str, Any]:
    import jax
    import keras
    import numpy as np

    x, y = _data()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    history = model.fit(x, y, batch_size=16, epochs=4, verbose=0, shuffle=False)
    distribution = keras.distribution.distribution()
    return {
        "env": os.environ.get("KERAS_BACKEND"),
        "backend": keras.config.backend(),
        "distribution": type(distribution).__name__,
        "mesh_devices": int(distribution.device_mesh.devices.size),
        "process_count": jax.process_count(),
        "rows": len(x),
        "losses": history.history["loss"],
        "weights": [np.asarray(w).ravel().tolist() for w in model.get_weights()],
    }


@sky.compute
@distributed.keras(backend="jax", timeout=120)
def fit_on_jax_unseeded() -> list[list[float]]:
    """The original documentation's example, which never seeds Keras: each process used to
    initialise its own weights, and placing them on the data-parallel mesh failed with an
    assertion deep in JAX's ``device_put``."""
    import keras
    import numpy as np

    x, y = _data()
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
    return [np.asarray(w).ravel().tolist() for w in model.get_weights()]


@sky.compute
@distributed.keras(backend="jax", timeout=120)
def fit_on_jax_seeded_per_rank() -> None:
    import keras

    x, y = _data()
    keras.utils.set_random_seed(sky.instance_info().rank)  # each process its own weights
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
    model.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)


@sky.compute
@distributed.keras(backend="torch", timeout=120)
def train_on_torch() -> dict[str, Any]:
    import keras
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    x, y = _data()
    keras.utils.set_random_seed(dist.get_rank())  # different inits: DDP broadcasts rank 0's
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    ddp = DistributedDataParallel(model)  # a Keras model on torch is a torch.nn.Module
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.05)
    losses = []
    for _epoch in range(4):
        total = torch.zeros(2)
        for start in range(0, len(x), 16):
            bx, by = torch.from_numpy(x[start : start + 16]), torch.from_numpy(y[start : start + 16])
            loss = torch.mean((ddp(bx) - by) ** 2)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item(), 1.0])
        dist.all_reduce(total)
        losses.append((total[0] / total[1]).item())
    return {
        "env": os.environ.get("KERAS_BACKEND"),
        "backend": keras.config.backend(),
        "initialized": dist.is_initialized(),
        "world": dist.get_world_size(),
        "rows": len(x),
        "losses": losses,
        "weights": [w.ravel().tolist() for w in model.get_weights()],
    }


@sky.compute
@distributed.keras(backend="tensorflow", timeout=120)
def train_on_tensorflow() -> dict[str, Any]:
    """A custom loop: Keras 3's own ``fit`` fails under MultiWorkerMirroredStrategy
    (keras-team/keras#20585), while its layers and optimizers work inside the strategy."""
    import keras
    import tensorflow as tf

    x, y = _data()
    strategy = tf.distribute.get_strategy()  # the one the session entered
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05)
    mirrored = type(model.weights[0].value).__name__

    @tf.function
    def step(bx: Any, by: Any) -> Any:
        def replica(bx: Any, by: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(bx) - by) ** 2)
                scaled = loss / strategy.num_replicas_in_sync
            # the optimizer sums the replicas' gradients (a cross-worker all-reduce)
            grads = tape.gradient(scaled, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        return strategy.reduce("mean", strategy.run(replica, args=(bx, by)), axis=None)

    losses = []
    for _epoch in range(4):
        epoch_losses = [float(step(x[s : s + 16], y[s : s + 16])) for s in range(0, len(x), 16)]
        losses.append(sum(epoch_losses) / len(epoch_losses))
    return {
        "env": os.environ.get("KERAS_BACKEND"),
        "backend": keras.config.backend(),
        "multi_worker": isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy),
        "replicas": strategy.num_replicas_in_sync,
        "variables": mirrored,
        "tf_config": json.loads(os.environ["TF_CONFIG"]),
        "rows": len(x),
        "losses": losses,
        "weights": [w.ravel().tolist() for w in model.get_weights()],
    }


def _check_training(results: tuple[dict[str, Any], ...]) -> None:
    first, second = results
    assert first["rows"] == second["rows"] == 128  # each worker trained on its half
    assert first["weights"] == second["weights"]  # ...of one model
    assert first["losses"] == second["losses"]  # reduced across workers
    assert first["losses"][-1] < 0.1 * first["losses"][0], first["losses"]
    assert first["weights"][0] == pytest.approx(TRUE_WEIGHTS, abs=0.3)


def test_keras_on_jax_fits_data_parallel(pool2: sky.ComputePool) -> None:
    pytest.importorskip("jax")
    results = fit_on_jax() @ pool2

    for result in results:
        assert result["env"] == "jax"
        assert result["backend"] == "jax"
        assert result["distribution"] == "DataParallel"
        assert result["mesh_devices"] == 2  # one CPU device per process
        assert result["process_count"] == 2
    _check_training(results)


def test_keras_on_jax_trains_without_the_user_seeding_keras(pool2: sky.ComputePool) -> None:
    pytest.importorskip("jax")
    first, second = fit_on_jax_unseeded() @ pool2
    assert first == second  # one model: every process initialised it identically


def test_keras_on_jax_seeded_per_rank_says_what_to_change(pool2: sky.ComputePool) -> None:
    pytest.importorskip("jax")
    with pytest.raises(ReplicasDisagreeError, match=r"do not re-seed per rank .* seed=\.\.\.\)") as info:
        fit_on_jax_seeded_per_rank() @ pool2
    assert isinstance(info.value, AssertionError)  # what JAX raised, still catchable as such
    assert "device_put" in str(info.value.__cause__)


def test_keras_on_torch_trains_with_ddp(pool2: sky.ComputePool) -> None:
    pytest.importorskip("torch")
    results = train_on_torch() @ pool2

    for result in results:
        assert result["env"] == "torch"
        assert result["backend"] == "torch"
        assert result["initialized"] is True
        assert result["world"] == 2
    _check_training(results)


def test_keras_on_tensorflow_trains_in_the_multi_worker_strategy(pool2: sky.ComputePool) -> None:
    pytest.importorskip("tensorflow")
    results = train_on_tensorflow() @ pool2

    for rank, result in enumerate(results):
        assert result["env"] == "tensorflow"
        assert result["backend"] == "tensorflow"
        assert result["multi_worker"] is True
        assert result["replicas"] == 2
        assert result["variables"] == "MirroredVariable"
        assert result["tf_config"]["task"] == {"type": "worker", "index": rank}
        assert len(result["tf_config"]["cluster"]["worker"]) == 2
    _check_training(results)
