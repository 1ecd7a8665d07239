"""`x.item()` of a number or a one-element array differentiates as `float(x)` does (its
cotangent broadcast back to x's shape, its tangent `x_dot.item()`), in both modes; with an
index (`x.item(1)`) it is refused. A function-local `import` is refused with the hint to move
it to module level (new-user trial: `.item()` was a NoRuleError, the import's hint unrelated).
Each gradient is compared with central differences (conftest)."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad, check_jvp, load_module

ITEMS = """
import numpy as np

def of_a_sum(w):
    return np.sum(w ** 2).item()

def of_a_one_element_vector(w):
    return w[1:2].item() * 3.0 + np.sum(w)

def of_a_one_element_matrix(w):
    return np.sin(w[:1, :1]).item() ** 2

def in_a_loop(w):
    s = 0.0
    for i in range(3):
        s = s + np.sum(w * i).item() * s + 1.0
    return s

def with_an_index(w):
    return w.item(1) * 2.0

def local_import(w):
    import math
    return math.exp(w[0]) + np.sum(w)
"""

CASES = {
    "of_a_sum": np.array([0.3, -1.2, 2.0]),
    "of_a_one_element_vector": np.array([0.3, -1.2, 2.0]),
    "of_a_one_element_matrix": np.array([[0.3, -1.2], [2.0, 0.5]]),
    "in_a_loop": np.array([0.3, -1.2, 2.0]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_item_differentiates_as_float(tmp_path, name):
    module = load_module(tmp_path, "items", ITEMS)
    check_grad(getattr(module, name), (CASES[name],))
    check_jvp(getattr(module, name), (CASES[name],))


def test_item_with_an_index_is_refused(tmp_path):
    module = load_module(tmp_path, "items", ITEMS)
    with pytest.raises(s2sad.NoRuleError, match=r"\.item\(\) with these arguments"):
        s2sad.grad(module.with_an_index)(np.ones(3))


def test_a_local_import_is_refused_with_the_way_out(tmp_path):
    module = load_module(tmp_path, "items", ITEMS)
    with pytest.raises(s2sad.UnsupportedSyntaxError) as info:
        s2sad.grad(module.local_import)(np.ones(3))
    message = str(info.value)
    assert "items.py:23: `import math` inside the function" in message
    assert "move `import math` to the top of the module" in message
