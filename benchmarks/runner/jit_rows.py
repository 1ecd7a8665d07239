"""The jitted rows of one case: s2sad's gradient with jit="strict", and where the case's
objective compiles under numba.njit (`Case.jit`: the loop versions and gradbench's array evals)
numba.njit of the objective and the peers to compare with (the case's own, or for a loop
version the vectorised objective's). Where s2sad takes `parallel=True` and the case has a loop
(`Case.parallel`), also the gradient with parallel=True at 2 Numba threads and at 1."""

from __future__ import annotations

from benchmarks.workloads import PEERS
from benchmarks.workloads.common import size_label

from .builders import as_float_arrays, build_numba_primal, build_s2sad_jit, peer_builder
from .builders import s2sad_builder
from .checks import check, compare
from .timing import Entry, first_line, is_refusal, median_transform, stats

PARALLEL_THREADS = 2


def numba_threads() -> int:
    """The most threads Numba's pool has here (NUMBA_NUM_THREADS, by default the cores)."""
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


def on_threads(run, n: int):
    """`run` called with Numba's thread count set to `n` (and set back afterwards), so that
    every other entry keeps running on one thread."""
    import numba

    def call():
        before = numba.get_num_threads()
        numba.set_num_threads(n)
        try:
            return run()
        finally:
            numba.set_num_threads(before)

    return call


class JitRun:
    """What a case times with jit: see the module's docstring; `parallel`: whether to time
    parallel=True too."""

    def __init__(self, case, available, peer_entries, peer_size, parallel=False):
        self.case = case
        inputs = case.inputs()
        self.args = list(inputs.values())
        self.info: dict = {"status": "ok"}
        self.primal = None
        self.grads: dict[str, Entry] = {}
        self.par: dict[int, Entry] = {}  # threads -> the parallel=True gradient
        self.par_info: dict = {}
        self.peers: dict[str, Entry] = {}
        self.peer_size: dict[str, dict] = {}
        self.fetch = as_float_arrays
        self._own: set[str] = set()
        if case.jit:
            try:
                build_primal = case.build.get("numba-primal", build_numba_primal)
                self.primal = Entry("numba-primal", build_primal(case.numpy_f, inputs))
            except ImportError:
                self.info["status"] = "numba missing"
                return
        try:
            if "s2sad-jit" in case.build:
                run, self.fetch, probe = case.build["s2sad-jit"](case.numpy_f, inputs, case.wrt)
                transform = median_transform(probe=probe)
            else:
                g, run, _ = build_s2sad_jit(case.numpy_f, inputs, case.wrt)
                # the source transform alone; the first call then adds Numba's compile
                transform = median_transform(g, self.args)
            if transform is not None:
                self.info["transform_s"] = transform
            self.grads[case.size_label] = Entry("s2sad-jit", run)
        except Exception as exc:
            self.info["status"] = _failure(exc)
            return
        if parallel:
            self._add_parallel(inputs)
        if case.jit:  # the jit table compares with the peers (array rows: the main table does)
            self._add_peers(available, peer_entries, peer_size)

    def _add_parallel(self, inputs) -> None:
        threads = min(PARALLEL_THREADS, numba_threads())
        self.par_info = {"status": "ok", "threads": threads}
        try:
            run, _ = s2sad_builder(self.case, jit=True, parallel=True)(
                self.case.numpy_f, inputs, self.case.wrt
            )
        except Exception as exc:  # TypeError: a builder or transform without the keyword
            self.par_info["status"] = _failure(exc)
            return
        for n in sorted({1, threads}):
            self.par[n] = Entry(f"s2sad-jit-parallel-{n}", on_threads(run, n))

    def _add_peers(self, available, peer_entries, peer_size) -> None:
        case = self.case
        for peer in PEERS:
            if peer in peer_entries:
                self.peers[peer] = peer_entries[peer]
                self.peer_size[peer] = size = peer_size[peer]
            elif case.check_peers and callable(case.check_peers.get(peer)):
                if not available.get(peer):
                    continue
                # a loop version: compare with the peers' vectorised objective, at the same
                # size or, for a slow peer, at the case's smaller size for it
                size = case.reduced.get(peer, case.size)
                try:
                    run, _ = peer_builder(case, peer)(
                        case.check_peers[peer](), case.check_make_inputs(**size), case.wrt
                    )
                except Exception:
                    continue
                self.peers[peer] = Entry(f"{peer}-vectorised", run)
                self.peer_size[peer] = size
                self._own.add(peer)
            else:
                continue
            if size != case.size and size_label(size) not in self.grads:
                run, _ = s2sad_builder(case, jit=True)(case.numpy_f, case.inputs(size), case.wrt)
                self.grads[size_label(size)] = Entry(f"s2sad-jit@{size_label(size)}", run)

    def entries(self) -> list[Entry]:
        """What to time besides the case's own entries (the peers it reuses are timed there)."""
        out = [self.primal] if self.primal is not None else []
        out += list(self.grads.values()) + list(self.par.values())
        out += [self.peers[p] for p in sorted(self._own)] if self.grads else []
        return out

    def summary(self, reference, numpy_mode=None) -> dict:
        """The jitted rows' results; `numpy_mode`: s2sad's NumPy-mode derivative at the case's
        size, which the jitted one must also agree with (`vs_numpy`)."""
        info = dict(self.info)
        if self.primal is not None:
            info["primal"] = stats(self.primal)
            if self.primal.error:
                info["primal"]["status"] = "error: " + self.primal.error
        main = self.grads.get(self.case.size_label)
        if main is None:
            return info
        if main.error:
            info["status"] = _failure(main.exc, main.error)
            return info
        info.update(stats(main))
        if info.get("median_s") is not None:
            # the first call transforms again (the caches were emptied) and compiles
            info["numba_compile_s"] = max(
                main.first_s - info.get("transform_s", 0.0) - info["median_s"], 0.0
            )
        if self.primal is not None and self.primal.times:
            info["numba_primal_compile_s"] = max(self.primal.first_s - self.primal.median, 0.0)
        got = check(self.fetch(main.result), reference, self.case.size)
        if got is not None:
            info["check"] = got
        if numpy_mode is not None:
            info["vs_numpy"] = _agreement(self.fetch(main.result), numpy_mode)
        info["peers"] = self._peer_summary()
        if self.par_info:
            info["parallel"] = self._parallel_summary(reference, numpy_mode, info.get("median_s"))
        return info

    def _peer_summary(self) -> dict:
        peers = {}
        for peer, e in self.peers.items():
            if e.error is not None or e.median is None:
                peers[peer] = {"status": "error: " + (e.error or "not timed")}
                continue
            lab = size_label(self.peer_size[peer])
            entry = {"status": "ok", "size": lab, "median_s": e.median}
            g = self.grads.get(lab)
            if g is not None and g.median:
                entry["s2sad_ratio"] = g.median / e.median
            if peer in self._own:
                entry["vectorised"] = True
            peers[peer] = entry
        return peers

    def _parallel_summary(self, reference, numpy_mode, serial: float | None) -> dict:
        info = dict(self.par_info)
        if info["status"] != "ok":
            return info
        threads = info["threads"]
        for n, e in self.par.items():
            if e.error:
                info["status"] = _failure(e.exc, e.error)
                return info
            info[f"threads_{n}"] = stats(e)
        many, one = self.par[threads], self.par[1]
        info["median_s"] = many.median
        info["compile_s"] = max(one.first_s - (one.median or 0.0), 0.0)  # transform + compile
        if many.median and one.median:
            info["ratio_to_1_thread"] = many.median / one.median
        if many.median and serial:
            info["ratio_to_serial"] = many.median / serial
        got = check(self.fetch(many.result), reference, self.case.size)
        if got is not None:
            info["check"] = got
        if numpy_mode is not None:  # threads racing on an adjoint would show here
            info["vs_numpy"] = _agreement(self.fetch(many.result), numpy_mode)
        return info


def _agreement(got, numpy_mode) -> dict:
    ok, err = compare(got, numpy_mode)
    return {"ok": ok, "max_rel_err": err}


def _failure(exc, text: str | None = None) -> str:
    """A row's status for an exception: s2sad's refusal is `unsupported`, anything else a bug
    (or, for parallel=True, a TypeError where s2sad or the case's builder lacks the keyword)."""
    if is_refusal(exc):
        return "unsupported: " + first_line(str(exc))
    return "error: " + (text or f"{type(exc).__name__}: {first_line(str(exc))}")
