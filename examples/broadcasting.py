"""Broadcasting and batched matmul, with the numbers TensorFlow gives (seeds 002 and 003)."""

import numpy as np

EMIT = {"chain": {"wrt": ["x", "y", "z"]}, "scaled_sum": {"wrt": ["a", "b"]}}


def chain(x, y, z):
    """A batch of 2x2 matrices through a shared matrix, then a batch again."""
    return np.sum(np.matmul(np.matmul(x, y), z))


def scaled_sum(a, b):
    """`a` broadcasts against `b`; its gradient sums over the broadcast axes."""
    return np.sum(a * b / (1.0 + b**2))


def inputs(rng):
    """Arguments for each function in EMIT, for tests and the CLI docs."""
    return {
        "chain": (rng.normal(size=(2, 2, 2)), rng.normal(size=(2, 2)), rng.normal(size=(2, 2, 2))),
        "scaled_sum": (rng.normal(size=(3, 1)), rng.normal(size=(2, 3, 4))),
    }


if __name__ == "__main__":
    import s2sad

    x = np.array([[[1.0, 1.0], [2.0, 3.0]], [[4.0, 5.0], [6.0, 7.0]]])
    y = np.array([[3.0, -7.0], [-1.0, 5.0]])
    z = np.array([[[1.0, 1.0], [2.0, 2.0]], [[3.0, 3.0], [-1.0, -1.0]]])
    for name, g in zip("xyz", s2sad.grad(chain, wrt=(0, 1, 2))(x, y, z)):
        print(f"d{name} =\n{g}")
