"""distributed.tensorflow on a real Local pool: TF_CONFIG field by field, then a real
MultiWorkerMirroredStrategy all-reduce and training step across two workers."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import pytest

import skyward as sky
from skyward import distributed
from skyward.distributed.backends import FrameworkNotInstalledError

pytest.importorskip("tensorflow")

pytestmark = [pytest.mark.heavy, pytest.mark.slow]


@sky.compute
@distributed.tensorflow(timeout=120)
def seen_config() -> dict[str, Any]:
    info = sky.instance_info()
    return {"rank": info.rank, "head_addr": info.head_addr, "tf_config": json.loads(os.environ["TF_CONFIG"])}


@sky.compute
@distributed.tensorflow(timeout=120)
def strategy_all_reduce_and_train() -> dict[str, Any]:
    import numpy as np
    import tensorflow as tf

    info = sky.instance_info()
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    @tf.function
    def summed() -> Any:
        context = tf.distribute.get_replica_context()
        return context.all_reduce("sum", tf.constant(float(info.rank + 1)))

    total = strategy.run(summed)

    # one linear model, mirrored; each worker feeds its own shard
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 3)).astype("float32")
    y = x @ np.array([[2.0], [-1.0], [0.5]], dtype="float32")
    x_local, y_local = sky.shard(x, y)
    with strategy.scope():
        tf.random.set_seed(10 + info.rank)  # different inits: the mirror must sync them
        weights = tf.Variable(tf.random.normal((3, 1)))

    @tf.function
    def step(bx: Any, by: Any) -> Any:
        def replica(bx: Any, by: Any) -> Any:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((bx @ weights - by) ** 2)
            (grad,) = tape.gradient(loss, [weights])
            weights.assign_sub(0.1 * tf.distribute.get_replica_context().all_reduce("mean", grad))
            return loss

        per_replica = strategy.run(replica, args=(bx, by))
        return strategy.reduce("mean", per_replica, axis=None)

    losses = []
    for _epoch in range(20):
        losses.append(float(step(tf.constant(x_local), tf.constant(y_local))))
    return {
        "rank": info.rank,
        "replicas": strategy.num_replicas_in_sync,
        "sum": float(total),
        "losses": losses,
        "weights": weights.numpy().ravel().tolist(),
    }


@sky.compute
def tf_config_after() -> str | None:
    return os.environ.get("TF_CONFIG")


@sky.compute
def call_with_tensorflow_hidden() -> None:
    hidden = {n: sys.modules.pop(n) for n in list(sys.modules) if n == "tensorflow" or n.startswith("tensorflow.")}
    sys.modules["tensorflow"] = None  # type: ignore[assignment]
    try:
        from skyward.distributed.backends.tensorflow_backend import tensorflow

        tensorflow()(lambda: None)()
    finally:
        del sys.modules["tensorflow"]
        sys.modules.update(hidden)


def test_tf_config_field_by_field(pool2: sky.ComputePool) -> None:
    results = seen_config() @ pool2

    workers = results[0]["tf_config"]["cluster"]["worker"]
    assert len(workers) == 2
    hosts = [w.rsplit(":", 1)[0] for w in workers]
    ports = [int(w.rsplit(":", 1)[1]) for w in workers]
    assert hosts == [results[0]["head_addr"]] * 2  # Local: every node is this machine
    assert len(set(ports)) == 2 and all(0 < p < 65536 for p in ports)
    for result in results:
        config = result["tf_config"]
        assert set(config) == {"cluster", "task"}
        assert config["cluster"] == {"worker": workers}  # the same cluster everywhere
        assert config["task"] == {"type": "worker", "index": result["rank"]}
    assert [r["rank"] for r in results] == [0, 1]
    # each worker keeps its port for the life of its process: TensorFlow cannot switch
    assert [r["tf_config"] for r in seen_config() @ pool2] == [r["tf_config"] for r in results]
    assert tf_config_after() @ pool2 == (None, None)


def test_multi_worker_strategy_reduces_and_trains(pool2: sky.ComputePool) -> None:
    results = strategy_all_reduce_and_train() @ pool2

    for result in results:
        assert result["replicas"] == 2
        assert result["sum"] == 3.0  # 1 + 2
    first, second = results
    assert first["weights"] == second["weights"]  # one mirrored variable
    assert first["losses"] == second["losses"]
    assert first["losses"][-1] < 0.05 * first["losses"][0]
    assert first["weights"] == pytest.approx([2.0, -1.0, 0.5], abs=0.1)
    # a second call in the same workers joins the same cluster again
    assert [r["sum"] for r in strategy_all_reduce_and_train() @ pool2] == [3.0, 3.0]


def test_missing_tensorflow_on_the_node_names_the_package_and_the_image(pool2: sky.ComputePool) -> None:
    with pytest.raises(
        FrameworkNotInstalledError,
        match=r"distributed.tensorflow needs the 'tensorflow' package.*Image\(pip=\['tensorflow'\]\)",
    ):
        call_with_tensorflow_hidden() >> pool2
