"""A small MLP with its parameters in a dict, trained by plain SGD, written the way a JAX user
writes it: `jax.grad(loss)(params, x, y)` is `s2sad.grad(loss)(params, x, y)`, and the gradient
is a dict with the parameters' keys, shapes and dtypes."""

import numpy as np

import s2sad

# functions whose adjoints `s2sad emit --all examples -o generated` writes, and their options
EMIT = {"loss": {"wrt": ["params"]}}


def init_params(rng, sizes=(2, 16, 1)):
    params = {}
    for i, (m, n) in enumerate(zip(sizes[:-1], sizes[1:])):
        params[f"W{i}"] = rng.normal(scale=1.0 / np.sqrt(m), size=(m, n))
        params[f"b{i}"] = np.zeros(n)
    return params


def predict(params, x):
    h = np.tanh(x @ params["W0"] + params["b0"])
    return h @ params["W1"] + params["b1"]


def loss(params, x, y):
    """Mean squared error of the MLP's predictions."""
    return np.mean((predict(params, x) - y) ** 2)


grad_loss = s2sad.grad(loss)


def sgd_step(params, x, y, lr=0.2):
    grads = grad_loss(params, x, y)
    return {name: params[name] - lr * grads[name] for name in params}


def data(rng, n=64):
    x = rng.uniform(-1.0, 1.0, size=(n, 2))
    y = np.sin(np.pi * x[:, :1]) * x[:, 1:]
    return x, y


def inputs(rng):
    """Arguments for each function in EMIT, for tests and the CLI."""
    x, y = data(rng)
    return {"loss": (init_params(rng), x, y)}


def train(steps=300, seed=0):
    """The losses of `steps` SGD steps from a seeded start."""
    rng = np.random.default_rng(seed)
    x, y = data(rng)
    params = init_params(rng)
    losses = []
    for _ in range(steps):
        losses.append(loss(params, x, y))
        params = sgd_step(params, x, y)
    return params, losses


if __name__ == "__main__":
    _, losses = train()
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} after {len(losses)} steps")
