"""Differentiate a NumPy function and print its gradient and the code s2sad wrote for it."""

import numpy as np

import s2sad


def loss(w, x, y):
    pred = np.tanh(x @ w)
    return np.mean((pred - y) ** 2)


grad_loss = s2sad.grad(loss)  # with respect to the first parameter, w

rng = np.random.default_rng(0)
w, x, y = rng.normal(size=3), rng.normal(size=(5, 3)), rng.normal(size=5)

print("gradient:", grad_loss(w, x, y))
print()
print(s2sad.source(grad_loss))
