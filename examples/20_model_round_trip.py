"""Train remotely, return the weights, use them here.

The result of a computation is any picklable value; numpy arrays travel zero-copy. Here a
linear model is fitted by gradient descent on the pool (each worker on its shard, one
step's gradients averaged by the client), and the client predicts with the weights.

Run it with:  .venv/bin/python examples/20_model_round_trip.py
"""

from __future__ import annotations

import numpy as np
from _provider import provider

import skyward as sky


@sky.compute
def gradient(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, int]:
    xs, ys = sky.shard(x, y)  # this worker's rows
    error = xs @ w - ys
    return xs.T @ error, len(xs)  # summed gradient of the squared error, and the row count


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4000, 3))
    true_w = np.array([1.5, -2.0, 0.25])
    y = x @ true_w + 0.01 * rng.normal(size=4000)

    w = np.zeros(3)
    with sky.ComputePool(provider=provider(), nodes=2, concurrency=2, display="quiet") as pool:
        for _step in range(50):
            parts = gradient(w, x, y) @ pool
            total = sum(g for g, _ in parts)
            rows = sum(n for _, n in parts)
            w = w - 0.5 * total / rows
    print(f"weights learned remotely: {np.round(w, 3)} (true {true_w})")
    new_x = np.array([[1.0, 1.0, 1.0]])
    print(
        f"prediction here for {new_x[0].tolist()}: {float((new_x @ w)[0]):.3f} (true {float((new_x @ true_w)[0]):.3f})"
    )
    assert np.allclose(w, true_w, atol=0.01)


if __name__ == "__main__":
    main()
