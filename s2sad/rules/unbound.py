"""`unbound(name)`: what generated Python binds a name to, at its function's top, where a read
of s2sad's own code may find it unbound (pipeline/maybe_unbound.py): a value's tape keeps it, a
merge copies it, `zeros_like` and `batched_zeros` make 0.0 of it, and every other use raises the
UnboundLocalError Python raises at such a read of the user's code.
"""

from .helpers import helper


@helper(nondiff=True)
def unbound(name):
    """A stand-in for the unbound `name`. An UnboundLocalError itself, so the helpers that make
    zeros tell it by its type (also in a module `s2sad emit` writes); each use of it that
    arithmetic, comparisons, NumPy's protocols, indexing, attributes or a call make raises."""
    kind = getattr(unbound, "kind", None)  # (made at the first call: making it takes long)
    if kind is None:

        def use(self, *args, **kwargs):
            raise UnboundLocalError(self.args[0])

        uses = (
            "add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow "
            "matmul rmatmul and rand or ror xor rxor neg pos abs invert lt le gt ge eq ne bool "
            "float int index complex round len iter contains getitem setitem getattr call array "
            "array_ufunc array_function"
        )
        methods = dict.fromkeys([f"__{u}__" for u in uses.split()], use)
        kind = unbound.kind = type("Unbound", (UnboundLocalError,), methods)
    return kind(f"cannot access local variable '{name}' where it is not associated with a value")
