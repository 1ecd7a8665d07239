"""The gradient of one training step of a two-hidden-layer perceptron with a softmax
cross-entropy loss.

    h1 = tanh(x W1 + b1),  h2 = tanh(h1 W2 + b2),  logits = h2 W3 + b3
    loss = -mean_i sum_j labels_ij (logits_ij - logsumexp_j logits_ij)

with one-hot `labels`, and the gradient taken with respect to all weights and biases.
The log-sum-exp subtracts the row maximum first (through stop_gradient: its gradient
contributions cancel).
"""

from __future__ import annotations

import numpy

import s2sad

from .common import Case, rng_for

# (batch, input, hidden1, hidden2, classes)
SIZES_SMOKE = [(5, 4, 6, 5, 3)]
SIZES_QUICK = [(256, 784, 512, 256, 10)]
SIZES_FULL = SIZES_QUICK


def make_inputs(batch: int, n_in: int, h1: int, h2: int, n_out: int) -> dict:
    rng = rng_for("mlp", {"batch": batch, "n_in": n_in, "h1": h1, "h2": h2, "n_out": n_out})

    def glorot(a, b):
        return rng.normal(scale=(2.0 / (a + b)) ** 0.5, size=(a, b))

    return {
        "W1": glorot(n_in, h1),
        "b1": rng.normal(scale=0.1, size=h1),
        "W2": glorot(h1, h2),
        "b2": rng.normal(scale=0.1, size=h2),
        "W3": glorot(h2, n_out),
        "b3": rng.normal(scale=0.1, size=n_out),
        "x": rng.normal(size=(batch, n_in)),
        "labels": numpy.eye(n_out)[rng.integers(0, n_out, size=batch)],
    }


def make_numpy(np, stop_gradient):
    """The objective for a NumPy-like module (numpy, or autograd.numpy)."""

    def mlp_loss(W1, b1, W2, b2, W3, b3, x, labels):
        h1 = np.tanh(x @ W1 + b1)
        h2 = np.tanh(h1 @ W2 + b2)
        logits = h2 @ W3 + b3
        shift = stop_gradient(np.max(logits, axis=1, keepdims=True))
        log_norm = np.log(np.sum(np.exp(logits - shift), axis=1, keepdims=True)) + shift
        return -np.mean(np.sum(labels * (logits - log_norm), axis=1))

    return mlp_loss


mlp_loss = make_numpy(numpy, s2sad.stop_gradient)


def autograd_factory():
    import autograd.numpy as anp

    return make_numpy(anp, lambda v: v)


def jax_factory():
    import jax.numpy as jnp
    from jax import lax

    return make_numpy(jnp, lax.stop_gradient)


def torch_factory():
    import torch

    def mlp_loss(W1, b1, W2, b2, W3, b3, x, labels):
        h1 = torch.tanh(x @ W1 + b1)
        h2 = torch.tanh(h1 @ W2 + b2)
        logits = h2 @ W3 + b3
        shift = torch.amax(logits, dim=1, keepdim=True).detach()
        log_norm = torch.log(torch.sum(torch.exp(logits - shift), dim=1, keepdim=True)) + shift
        return -torch.mean(torch.sum(labels * (logits - log_norm), dim=1))

    return mlp_loss


WRT = ("W1", "b1", "W2", "b2", "W3", "b3")


def cases(mode: str) -> list[Case]:
    sizes = {"smoke": SIZES_SMOKE, "quick": SIZES_QUICK, "full": SIZES_FULL}[mode]
    return [
        Case(
            workload="mlp",
            family="mlp",
            size={"batch": s[0], "n_in": s[1], "h1": s[2], "h2": s[3], "n_out": s[4]},
            make_inputs=make_inputs,
            numpy_f=mlp_loss,
            wrt=WRT,
            peers={"jax": jax_factory, "torch": torch_factory, "autograd": autograd_factory},
        )
        for s in sizes
    ]
