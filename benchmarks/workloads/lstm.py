"""A stacked diagonal LSTM over a character sequence with a log-softmax loss (ADBench's "LSTM").

Sizes: `l` layers, a sequence of `c` steps, `b` features per step (ADBench uses b = 14).

- `main_params` (2l, 4b): rows 2j and 2j+1 hold layer j's weights and biases, each four blocks of
  b for the forget gate, input gate, output gate and cell change. The weights are diagonal:
  each gate multiplies its input elementwise.
- `extra_params` (3, b): input scaling, output scaling and output bias.
- `state` (2l, b): each layer's initial hidden state (row 2j) and cell (row 2j+1).
- `sequence` (c, b).

For t = 0 .. c-2 the input is sequence[t] * extra[0]; each layer updates

    forget  = sigmoid(input  * W_f + B_f)        ingate = sigmoid(hidden * W_i + B_i)
    outgate = sigmoid(input  * W_o + B_o)        change = tanh(hidden * W_c + B_c)
    cell    = cell * forget + ingate * change    hidden = outgate * tanh(cell)

and passes its hidden state up as the next layer's input. The top output is
y = hidden * extra[1] + extra[2], normalised as y - log(sum(exp(y)) + 2), and scored against
sequence[t+1]. The loss is minus the sum of those scores over all steps and features, divided by
their number. The gradient is taken with respect to main_params and extra_params.

The NumPy version is a Python loop over time and layers (how the model is naturally written);
JAX runs the time loop with lax.scan under jit and unrolls the layers.
"""

from __future__ import annotations

import numpy as np

from .common import Case, rng_for

B = 14
SIZES_SMOKE = [(2, 4)]
SIZES_QUICK = [(2, 1024)]  # (layers, sequence length)
SIZES_FULL = [(2, 1024), (4, 4096)]


def make_inputs(l: int, c: int) -> dict:
    rng = rng_for("lstm", {"l": l, "c": c})
    return {
        "main_params": rng.normal(scale=0.5, size=(2 * l, 4 * B)),
        "extra_params": rng.normal(scale=0.5, size=(3, B)),
        "state": rng.normal(scale=0.5, size=(2 * l, B)),
        "sequence": rng.uniform(size=(c, B)),
    }


def lstm_objective(main_params, extra_params, state, sequence):
    """NumPy: the layers' states live in (l, b) arrays updated in place, row by row."""
    n_layers = state.shape[0] // 2
    b = sequence.shape[1]
    hidden = state[0::2].copy()
    cell = state[1::2].copy()
    total = 0.0
    for t in range(sequence.shape[0] - 1):
        layer_input = sequence[t] * extra_params[0]
        for j in range(n_layers):
            W, B = 2 * j, 2 * j + 1  # rows of main_params
            forget = 1.0 / (1.0 + np.exp(-(layer_input * main_params[W, :b] + main_params[B, :b])))
            ingate = 1.0 / (
                1.0 + np.exp(-(hidden[j] * main_params[W, b : 2 * b] + main_params[B, b : 2 * b]))
            )
            outgate = 1.0 / (
                1.0
                + np.exp(
                    -(layer_input * main_params[W, 2 * b : 3 * b] + main_params[B, 2 * b : 3 * b])
                )
            )
            change = np.tanh(hidden[j] * main_params[W, 3 * b :] + main_params[B, 3 * b :])
            cell[j] = cell[j] * forget + ingate * change
            hidden[j] = outgate * np.tanh(cell[j])
            layer_input = hidden[j]
        ypred = layer_input * extra_params[1] + extra_params[2]
        ynorm = ypred - np.log(np.sum(np.exp(ypred)) + 2.0)
        total = total + np.sum(sequence[t + 1] * ynorm)
    return -total / ((sequence.shape[0] - 1) * b)


def autograd_factory():
    """autograd cannot write into arrays: the states are Python lists of rows."""
    import autograd.numpy as anp

    def lstm_objective(main_params, extra_params, state, sequence):
        n_layers = state.shape[0] // 2
        b = sequence.shape[1]
        hidden = [state[2 * j] for j in range(n_layers)]
        cell = [state[2 * j + 1] for j in range(n_layers)]
        total = 0.0
        for t in range(sequence.shape[0] - 1):
            layer_input = sequence[t] * extra_params[0]
            for j in range(n_layers):
                w = main_params[2 * j]
                bias = main_params[2 * j + 1]
                forget = 1.0 / (1.0 + anp.exp(-(layer_input * w[:b] + bias[:b])))
                ingate = 1.0 / (1.0 + anp.exp(-(hidden[j] * w[b : 2 * b] + bias[b : 2 * b])))
                outgate = 1.0 / (
                    1.0 + anp.exp(-(layer_input * w[2 * b : 3 * b] + bias[2 * b : 3 * b]))
                )
                change = anp.tanh(hidden[j] * w[3 * b :] + bias[3 * b :])
                cell[j] = cell[j] * forget + ingate * change
                hidden[j] = outgate * anp.tanh(cell[j])
                layer_input = hidden[j]
            ypred = layer_input * extra_params[1] + extra_params[2]
            ynorm = ypred - anp.log(anp.sum(anp.exp(ypred)) + 2.0)
            total = total + anp.sum(sequence[t + 1] * ynorm)
        return -total / ((sequence.shape[0] - 1) * b)

    return lstm_objective


def torch_factory():
    import torch

    def lstm_objective(main_params, extra_params, state, sequence):
        n_layers = state.shape[0] // 2
        b = sequence.shape[1]
        hidden = [state[2 * j] for j in range(n_layers)]
        cell = [state[2 * j + 1] for j in range(n_layers)]
        total = 0.0
        for t in range(sequence.shape[0] - 1):
            layer_input = sequence[t] * extra_params[0]
            for j in range(n_layers):
                w = main_params[2 * j]
                bias = main_params[2 * j + 1]
                forget = torch.sigmoid(layer_input * w[:b] + bias[:b])
                ingate = torch.sigmoid(hidden[j] * w[b : 2 * b] + bias[b : 2 * b])
                outgate = torch.sigmoid(layer_input * w[2 * b : 3 * b] + bias[2 * b : 3 * b])
                change = torch.tanh(hidden[j] * w[3 * b :] + bias[3 * b :])
                cell[j] = cell[j] * forget + ingate * change
                hidden[j] = outgate * torch.tanh(cell[j])
                layer_input = hidden[j]
            ypred = layer_input * extra_params[1] + extra_params[2]
            ynorm = ypred - torch.log(torch.sum(torch.exp(ypred)) + 2.0)
            total = total + torch.sum(sequence[t + 1] * ynorm)
        return -total / ((sequence.shape[0] - 1) * b)

    return lstm_objective


def jax_factory():
    import jax
    import jax.numpy as jnp

    def lstm_objective(main_params, extra_params, state, sequence):
        n_layers = state.shape[0] // 2
        b = sequence.shape[1]

        def step(carry, xs):
            hidden, cell = carry
            x_t, target = xs
            layer_input = x_t * extra_params[0]
            new_hidden, new_cell = [], []
            for j in range(n_layers):
                w = main_params[2 * j]
                bias = main_params[2 * j + 1]
                forget = jax.nn.sigmoid(layer_input * w[:b] + bias[:b])
                ingate = jax.nn.sigmoid(hidden[j] * w[b : 2 * b] + bias[b : 2 * b])
                outgate = jax.nn.sigmoid(layer_input * w[2 * b : 3 * b] + bias[2 * b : 3 * b])
                change = jnp.tanh(hidden[j] * w[3 * b :] + bias[3 * b :])
                c = cell[j] * forget + ingate * change
                h = outgate * jnp.tanh(c)
                new_hidden.append(h)
                new_cell.append(c)
                layer_input = h
            ypred = layer_input * extra_params[1] + extra_params[2]
            ynorm = ypred - jnp.log(jnp.sum(jnp.exp(ypred)) + 2.0)
            return (jnp.stack(new_hidden), jnp.stack(new_cell)), jnp.sum(target * ynorm)

        init = (state[0::2], state[1::2])
        _, scores = jax.lax.scan(step, init, (sequence[:-1], sequence[1:]))
        return -jnp.sum(scores) / ((sequence.shape[0] - 1) * b)

    return lstm_objective


WRT = ("main_params", "extra_params")

# smaller sizes for the Python-loop peers (about 0.5 s per gradient with --quick, 2 s without)
REDUCED = {
    "quick": {(2, 1024): {"torch": {"l": 2, "c": 256}, "autograd": {"l": 2, "c": 128}}},
    "full": {
        (2, 1024): {"autograd": {"l": 2, "c": 256}},
        (4, 4096): {"torch": {"l": 4, "c": 512}, "autograd": {"l": 4, "c": 128}},
    },
}


def cases(mode: str) -> list[Case]:
    sizes = {"smoke": SIZES_SMOKE, "quick": SIZES_QUICK, "full": SIZES_FULL}[mode]
    return [
        Case(
            workload="lstm",
            family="lstm",
            size={"l": l, "c": c},
            make_inputs=make_inputs,
            numpy_f=lstm_objective,
            wrt=WRT,
            peers={"jax": jax_factory, "torch": torch_factory, "autograd": autograd_factory},
            reduced=REDUCED.get(mode, {}).get((l, c), {}),
            notes=["b=14; Python loop over time steps (JAX: lax.scan)"],
            parallel=True,
        )
        for l, c in sizes
    ]
