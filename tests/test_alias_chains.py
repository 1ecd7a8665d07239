"""Memory shared through chains of aliases: a helper's result passed to a helper again
(`ident(ident(y))`), named again (`w = ident(y); z = w`), or unpacked (`z, _ = pair(ident(y))`)
is `y` itself in NumPy, so a write into `y` shows through `z` (and one into `z` through `y`).
Each such read after a write, or write through the alias, is refused as `z = ident(y)` is; the
gradients were wrong (the break-it trial's [0.565, 0.985, 0.808] where finite differences give
[0, 2.357, 0.808]). Chains read before any write, or of new arrays, are differentiated."""

import numpy as np
import pytest

import s2sad
from conftest import check_grad

X = np.array([0.3, 0.7, 1.1])


def ident(a):
    return a


def first(t):
    return t[0]


def pair(a):
    return a, a


def double(a):
    return a * 2.0


def twice(x):
    y = np.sin(x)
    z = ident(ident(y))
    y[0] = x[1] ** 2
    return np.sum(z * z)


def in_two_statements(x):
    y = np.sin(x)
    w = ident(y)
    z = ident(w)
    y[0] = x[1] ** 2
    return np.sum(z * z)


def renamed(x):
    y = np.sin(x)
    w = ident(y)
    z = w
    y[0] = x[1] ** 2
    return np.sum(z * z)


def of_an_element(x):
    y = np.sin(x)
    z = ident(first((y,)))
    y[0] = x[1] ** 2
    return np.sum(z * z)


def unpacked(x):
    y = np.sin(x)
    z, _ = pair(ident(y))
    y[0] = x[1] ** 2
    return np.sum(z * z)


def unpacked_directly(x):
    y = np.sin(x)
    z, _ = pair(y)
    y[0] = x[1] ** 2
    return np.sum(z * z)


def sliced_after(x):
    y = np.sin(x)
    w = ident(y)
    z = w[1:]
    y[1] = x[1] ** 2
    return np.sum(z * z)


def sliced_before(x):
    y = np.sin(x)
    w = ident(y[1:])
    z = w
    y[1] = x[1] ** 2
    return np.sum(z * z)


def written_in_a_loop(x):
    y = np.sin(x)
    z = ident(ident(y))
    for i in range(2):
        y[i] = x[i + 1] ** 2
    return np.sum(z * z)


READ_AFTER_A_WRITE = [twice, in_two_statements, renamed, of_an_element, unpacked]
READ_AFTER_A_WRITE += [unpacked_directly, sliced_after, sliced_before, written_in_a_loop]


@pytest.mark.parametrize("f", READ_AFTER_A_WRITE)
def test_a_chained_alias_read_after_a_write_is_refused(f):
    f(X.copy())  # NumPy runs it
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`z` may be a view of `y`") as err:
        s2sad.grad(f)(X.copy())
    assert "test_alias_chains.py:" in str(err.value) and ".copy()" in str(err.value)


def test_a_chained_alias_is_refused_in_forward_mode_too():
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`z` may be a view of `y`"):
        s2sad.jvp(twice)(X.copy(), tangent=np.ones(3))


def written_through(x):
    y = np.sin(x)
    z = ident(ident(y))
    z[0] = x[1] ** 2
    return y @ y


def updated_through(x):
    y = np.sin(x)
    z = ident(ident(y))
    z += x
    return np.sum(y * y)


def updated_through_two_helpers(x):
    y = np.sin(x)
    w = ident(y)
    z = ident(w)
    z *= x
    return np.sum(y * y)


@pytest.mark.parametrize("f", [written_through, updated_through, updated_through_two_helpers])
def test_a_write_through_a_chained_alias_is_refused(f):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="may share memory with") as err:
        s2sad.grad(f)(X.copy())
    assert "`z`" in str(err.value) and "does not follow writes through such aliases" in str(
        err.value
    )


def read_before_the_write(x):
    y = np.sin(x)
    z, w = pair(ident(y))
    s = np.sum(z * w) + np.sum(ident(ident(y)) * x)
    y[0] = x[1] ** 2
    return s * np.sum(y)


def chained_without_writes(x):
    y = np.sin(x)
    z = ident(ident(y))
    w, v = pair(ident(z))
    u = w
    return np.sum(u * v * z)


def new_arrays_chained(x):
    y = np.sin(x)
    z = ident(double(y))
    a, _ = pair(double(y))
    w = double(y)
    b = w
    c = first((double(y),))  # (a new array in a tuple display: each element as an argument)
    y[0] = x[1] ** 2
    return np.sum(z * a * b * c) + np.sum(y)


def cast_to_integers(x):  # np.asarray of a float array as integers copies it
    y = np.asarray(x, int)
    y[0] = 5
    b = np.asarray(x, dtype=np.bool_)
    b[1] = False
    return np.sum(x * y) + np.sum(x * b)


@pytest.mark.parametrize(
    "f", [read_before_the_write, chained_without_writes, new_arrays_chained, cast_to_integers]
)
def test_chains_read_before_any_write_or_of_new_arrays_are_differentiated(f):
    check_grad(f, (X.copy(),))


def cast_to_float32(x):  # a copy where x is float64; x itself where it is float32
    y = np.asarray(x, dtype=np.float32)
    y[0] = 5.0
    return np.sum(x * y)


def test_a_cast_to_another_float_dtype_is_a_copy_and_its_own_dtype_refused_at_the_call():
    grad = s2sad.grad(cast_to_float32)
    want = X.astype(np.float32) + X  # (finite differences read float32's steps)
    want[0] = 5.0
    np.testing.assert_allclose(grad(X.copy()), want, rtol=1e-6)
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`x` is of dtype float32 in this"):
        grad(X.astype(np.float32))


def in_a_tuple_display(x):
    y = np.sin(x)
    z = first((ident(y), x))
    y[0] = x[1] ** 2
    return np.sum(z * z)


def cast_to_its_own_kind(x, idx):  # an integer array as integers: the same array
    y = np.asarray(idx, int)
    y[0] = 2
    return np.sum(x[idx]) + np.sum(x[y])


@pytest.mark.parametrize("f", [in_a_tuple_display, cast_to_its_own_kind])
def test_an_alias_through_a_tuple_display_or_an_asarray_of_its_kind_is_refused(f):
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`[yz]` may "):
        s2sad.grad(f)(X.copy(), *([np.array([0, 1])] if f is cast_to_its_own_kind else []))


def out_by_position_ufunc(x):
    y = np.zeros(4)
    z = np.multiply(x, 2.0, y)  # z is y
    z[0] = x[1] * x[2]
    return np.sum(y * x)


def out_by_position_clip(x):
    y = np.zeros(4)
    z = np.clip(x, -0.5, 0.9, y)
    z[1] = x[0] ** 2
    return np.sum(y * x)


def out_by_position_method(x):
    y = x * 1.0
    z = y.clip(-0.5, 0.9, y)
    z[0] = x[3] * x[1]
    return np.sum(y * x)


def copy_false_by_position(x):
    y = x * 1.0
    z = y.astype(float, "K", "unsafe", True, False)  # z is y
    z[0] = x[1] ** 2
    return np.sum(y * x)


@pytest.mark.parametrize(
    "f",
    [out_by_position_ufunc, out_by_position_clip, out_by_position_method, copy_false_by_position],
)
def test_out_or_copy_given_by_position_is_an_alias(f):
    """`out` and `copy=False` given by position return the array itself, as by keyword: a write
    through the result is refused (it was taken for a new array: a wrong gradient)."""
    with pytest.raises(s2sad.UnsupportedSyntaxError, match="`z` may share memory"):
        s2sad.grad(f)(np.array([0.3, -0.7, 1.2, 0.5]))


def test_a_ufunc_or_method_without_out_still_makes_a_new_array():
    def f(x):
        z = np.multiply(x, 2.0)
        z[0] = x[1] * x[2]
        w = x.clip(-0.5, 0.9)
        w[1] = x[0] ** 2
        return np.sum(z * x) + np.sum(w)

    check_grad(f, (np.array([0.3, -0.7, 1.2, 0.5]),))
