"""A two-layer perceptron with a softmax cross-entropy loss, in plain NumPy."""

import numpy as np

import s2sad

# functions whose adjoints `s2sad emit --all examples -o generated` writes, and their options
EMIT = {"loss": {"wrt": ["W1", "b1", "W2", "b2"]}}


def loss(W1, b1, W2, b2, x, labels):
    """Mean cross-entropy of a tanh MLP; `labels` are one-hot rows."""
    h = np.tanh(x @ W1 + b1)
    logits = h @ W2 + b2
    shift = s2sad.stop_gradient(np.max(logits, axis=1, keepdims=True))
    log_norm = np.log(np.sum(np.exp(logits - shift), axis=1, keepdims=True)) + shift
    return -np.mean(np.sum(labels * (logits - log_norm), axis=1))


def inputs(rng):
    """Arguments for each function in EMIT, for tests and the CLI docs."""
    return {"loss": init(rng)}


def init(rng, n_in=4, n_hidden=8, n_out=3, batch=16):
    W1 = rng.normal(scale=0.5, size=(n_in, n_hidden))
    b1 = np.zeros(n_hidden)
    W2 = rng.normal(scale=0.5, size=(n_hidden, n_out))
    b2 = np.zeros(n_out)
    x = rng.normal(size=(batch, n_in))
    labels = np.eye(n_out)[rng.integers(0, n_out, size=batch)]
    return W1, b1, W2, b2, x, labels
