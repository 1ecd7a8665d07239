"""Random draws inside a differentiated function are refused when it is transformed, naming the
call and its line, with the hint to pass the noise in: s2sad runs the primal more than once
(has_aux's aux from a second call, a vjp pullback's recording sweep, Numba's own generator under
jit=True), so the value, the aux and the gradients would come from different draws (new-user
trial: they did, silently)."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad, load_module

DRAWS = """
import random
import numpy as np

RNG = np.random.default_rng(0)

def helper(x):
    return x + np.random.standard_normal(x.shape)

def legacy(w, x):
    return np.sum(w * x + np.random.normal(size=3))

def global_generator(w, x):
    return np.sum(w * x + RNG.normal(size=3))

def generator_argument(w, x, rng=RNG):
    noise = rng.uniform(size=3)
    return np.sum(w * noise)

def made_inside(w, x):
    rng = np.random.default_rng(1)
    return np.sum(w * x)

def stdlib(w, x):
    return np.sum(w * x) * random.gauss(0.0, 1.0)

def in_a_helper(w, x):
    return np.sum(helper(w * x))

def on_a_path_not_taken(w, x):
    s = np.sum(w * x)
    if x[0] > 100.0:
        np.random.seed(3)
    return s

def in_a_loop(w, x):
    f = lambda v: v + np.random.normal()
    for i in range(2):
        x = f(x)
    return np.sum(w * x), x

def noise_passed_in(w, x, noise):
    return np.sum((w * x + noise) ** 2)
"""

REFUSED = {  # function: (the call named, its line in DRAWS)
    "legacy": ("np.random.normal", 11),
    "global_generator": ("RNG.normal", 14),
    "generator_argument": ("rng.uniform", 17),
    "made_inside": ("np.random.default_rng", 21),
    "stdlib": ("random.gauss", 25),
    "in_a_helper": ("np.random.standard_normal", 8),
    "on_a_path_not_taken": ("np.random.seed", 33),
    "in_a_loop": ("np.random.normal", 37),
}
TRANSFORMS = {
    "grad": lambda f: s2sad.grad(f),
    "jit": lambda f: s2sad.grad(f, jit=True),
    "has_aux": lambda f: s2sad.value_and_grad(f, has_aux=True),
    "vjp": lambda f: s2sad.vjp(f),
    "jvp": lambda f: s2sad.jvp(f),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_random_draw_is_refused_naming_the_call(tmp_path, name):
    module = load_module(tmp_path, "draws", DRAWS)
    call, line = REFUSED[name]
    transform = TRANSFORMS["has_aux" if name == "in_a_loop" else "grad"]
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        transform(getattr(module, name))(np.ones(3), np.arange(3.0))
    message = str(info.value)
    assert f"`{call}(...)` draws random numbers" in message
    assert f"draws.py:{line}:" in message
    assert "pass it in as an argument" in message


@pytest.mark.parametrize("mode", ["jit", "vjp", "jvp"])
def test_every_transform_refuses_a_draw(tmp_path, mode):
    module = load_module(tmp_path, "draws", DRAWS)
    kwargs = {"tangent": np.ones(3)} if mode == "jvp" else {}
    with pytest.raises(s2sad.UnsupportedSyntaxError, match=r"`np\.random\.normal\(\.\.\.\)`"):
        TRANSFORMS[mode](module.legacy)(np.ones(3), np.arange(3.0), **kwargs)


def test_noise_drawn_outside_and_passed_in_differentiates(tmp_path):
    module = load_module(tmp_path, "draws", DRAWS)
    noise = np.random.default_rng(2).normal(size=3)
    check_grad(module.noise_passed_in, (np.ones(3), np.arange(3.0), noise))
