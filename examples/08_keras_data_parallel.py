"""Keras 3 on JAX, data-parallel across two workers with ``distributed.keras``.

Each worker fits on its own shard; ``DataParallel`` averages the gradients, so both end
with one model. The backend seeds Keras identically on every process (``seed=`` to
choose the seed): JAX requires every process to build the same initial weights.

Needs keras and jax (CPU builds are enough); without them it says so and exits 0.
Run it with:  .venv/bin/python examples/08_keras_data_parallel.py
"""

from __future__ import annotations

import importlib.util

import numpy as np
from _provider import on_cloud, provider

import skyward as sky
from skyward import distributed


@sky.compute
@distributed.keras(backend="jax", timeout=120)
def fit(x: np.ndarray, y: np.ndarray) -> list[float]:
    import keras

    xs, ys = sky.shard(x, y)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(xs, ys, batch_size=16, epochs=20, verbose=0)
    return [round(float(w), 2) for w in model.get_weights()[0].ravel()]


def main() -> None:
    if not all(importlib.util.find_spec(m) for m in ("keras", "jax")):
        print("keras and jax are not installed here: pip install keras 'jax[cpu]' (skipped)")
        return
    rng = np.random.default_rng(0)
    x = rng.normal(size=(256, 3)).astype("float32")
    y = (x @ np.array([2.0, -1.0, 0.5], dtype="float32"))[:, None]
    image = sky.Image(pip=["keras", "jax"]) if on_cloud() else sky.Image()
    with sky.ComputePool(provider=provider(), image=image, nodes=2, display="quiet") as pool:
        first, second = fit(x, y) @ pool
    print(f"weights on worker 0: {first}, on worker 1: {second} (true: [2.0, -1.0, 0.5])")
    assert first == second, "one model, replicated"


if __name__ == "__main__":
    main()
