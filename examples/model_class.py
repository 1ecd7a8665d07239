"""A softmax classifier written as a class whose array attributes are its parameters, with a
`loss` method, trained by plain SGD. `s2sad.grad(model.loss, wrt="self")` is JAX's
`jax.grad(Model.loss)(model, x, y)` for a model registered as a pytree: the gradient is a dict
of the model's float attributes, each with its attribute's shape and dtype. `wrt="self.b"` takes
one attribute, and without `wrt` a bound method is differentiated in its first argument, with
`self`'s arrays as constants."""

import numpy as np

import s2sad

# functions whose adjoints `s2sad emit --all examples -o generated` writes, and their options
EMIT = {"SoftmaxClassifier.loss": {"wrt": ["self"]}}


class SoftmaxClassifier:
    L2 = 1e-3  # weight decay: a class attribute, read as a constant

    def __init__(self, rng, n_features=2, n_classes=3):
        self.W = rng.normal(scale=0.1, size=(n_features, n_classes))
        self.b = np.zeros(n_classes)

    def logits(self, x):
        return x @ self.W + self.b

    def loss(self, x, labels):
        """Mean cross-entropy of the predicted class probabilities (labels one-hot)."""
        z = self.logits(x)
        z = z - np.max(z, axis=1, keepdims=True)  # the log-sum-exp shift: exp cannot overflow
        log_probs = z - np.log(np.sum(np.exp(z), axis=1, keepdims=True))
        return -np.mean(np.sum(labels * log_probs, axis=1)) + self.L2 * np.sum(self.W**2)

    def accuracy(self, x, labels):
        return np.mean(np.argmax(self.logits(x), axis=1) == np.argmax(labels, axis=1))


def data(rng, n=150, n_classes=3):
    """Three Gaussian blobs in the plane, with one-hot labels."""
    centers = np.array([[2.0, 0.0], [-1.0, 1.7], [-1.0, -1.7]])
    classes = rng.integers(0, n_classes, size=n)
    x = centers[classes] + rng.normal(scale=0.8, size=(n, 2))
    return x, np.eye(n_classes)[classes]


def inputs(rng):
    """Arguments for each function in EMIT, for tests and the CLI."""
    x, labels = data(rng)
    return {"SoftmaxClassifier.loss": (SoftmaxClassifier(rng), x, labels)}


def train(steps=100, lr=0.5, seed=0):
    """SGD on every parameter, then on the bias alone; the losses along the way."""
    rng = np.random.default_rng(seed)
    x, labels = data(rng)
    model = SoftmaxClassifier(rng)
    grad_loss = s2sad.grad(model.loss, wrt="self")  # {"W": dW, "b": db}
    losses = []
    for _ in range(steps):
        losses.append(model.loss(x, labels))
        grads = grad_loss(x, labels)
        model.W = model.W - lr * grads["W"]
        model.b = model.b - lr * grads["b"]
    grad_bias = s2sad.grad(model.loss, wrt="self.b")  # one attribute: an array like b
    for _ in range(steps // 10):
        model.b = model.b - lr * grad_bias(x, labels)
    losses.append(model.loss(x, labels))
    return model, losses, (x, labels)


if __name__ == "__main__":
    model, losses, (x, labels) = train()
    print(f"loss {losses[0]:.4f} -> {losses[-1]:.4f} after {len(losses) - 1} SGD steps")
    print(f"training accuracy {model.accuracy(x, labels):.0%}")
    # without wrt: the gradient in x, with the trained parameters as constants
    print("d loss / d x[0]:", s2sad.grad(model.loss)(x, labels)[0])
