"""Correctness: every row's derivative against one reference, JAX's (else autograd's, else
PyTorch's), elementwise |a - b| <= RTOL (|b| + max|b|)."""

from __future__ import annotations

import numpy as np

from benchmarks.workloads.common import size_label

from .builders import peer_builder

RTOL = 1e-6


def compare(got, ref) -> tuple[bool, float]:
    """Elementwise |got - ref| <= RTOL (|ref| + max|ref|) for every gradient; also the largest
    error relative to max|ref|."""
    ok, worst = len(got) == len(ref), 0.0
    for a, b in zip(got, ref):
        if a.shape != b.shape:
            return False, float("inf")
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        err = np.abs(a - b)
        ok = ok and bool(np.all(err <= RTOL * (np.abs(b) + scale)))
        worst = max(
            worst, float(np.max(err)) / scale if scale > 0 else float(np.max(err, initial=0))
        )
    return ok, worst


def check(got, reference, size: dict, exclude: str | None = None) -> dict | None:
    """The check entry of a row: `got` against the reference at `size`, or None without one."""
    ref_peer, ref = reference.get(size, exclude=exclude)
    if ref is None:
        return None
    ok, err = compare(got, ref)
    return {"against": ref_peer, "ok": ok, "max_rel_err": err}


class Reference:
    """Reference gradients for any inputs of a case: JAX, else autograd, else torch."""

    def __init__(self, case, available, known: dict):
        self.case = case
        self.factories = case.check_peers or case.peers
        self.make_inputs = case.check_make_inputs or case.make_inputs
        self.order = [p for p in ("jax", "autograd", "torch") if available.get(p)]
        self.order = [p for p in self.order if callable(self.factories.get(p))]
        self.known = known  # (peer, size label) -> gradients already computed while timing

    def get(self, size: dict, exclude: str | None = None):
        for peer in self.order:
            if peer == exclude:
                continue
            key = (peer, size_label(size))
            if key not in self.known:
                if peer != "jax" and peer in self.case.reduced:
                    continue  # too slow at sizes above the one it was timed at
                try:
                    run, fetch = peer_builder(self.case, peer)(
                        self.factories[peer](), self.make_inputs(**size), self.case.wrt
                    )
                    self.known[key] = fetch(run())
                except Exception:
                    self.known[key] = None
            if self.known[key] is not None:
                return peer, self.known[key]
        return None, None
