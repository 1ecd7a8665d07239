"""How long the first call of `s2sad.grad` takes on long functions: prints the time of the
transform (the first call of the gradient: parse, normalize, ..., compile) and of `s2sad.source`
(black) for NumPy functions of 250, 1,000 and 2,000 lines of a few shapes: `straight` (straight
line with some branches and short loops), `loop` (the same statements and element reads `x[i]` in
the body of one `for` loop), `nested` (in the bodies of two nested loops) and `sum` (one
expression summing as many terms as lines). Machines are noisy: each time is the least of a few runs (wall clock, and the process's
CPU time, which other processes on a shared machine disturb less); nothing is asserted.

    python scripts/transform_time.py [LINES ...] [--repeat N] [--shape straight|loop|nested|sum]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np

# repeated blocks of a long model-like function: each keeps `h` a (4,) vector and `s` a scalar
BLOCKS = [
    "    h = np.tanh(h @ W + b)\n    s = s + np.sum(h * h)\n",
    "    h = np.sin(h) * 0.5 + np.cos(h) * 0.25\n    s = s + np.mean(h)\n",
    "    u = np.exp(-h * h)\n    s = s + np.sum(u * h)\n",
    "    if s > 0:\n        s = s * 0.99\n    else:\n        s = s - 0.01\n",
    "    h = np.maximum(h, 0.0) + 0.1 * h\n    s = s + np.sum(h) / 10.0\n",
    "    for _ in range(2):\n        h = h * 0.9 + 0.1\n",
    "    h = np.sqrt(h * h + 1.0)\n    s = s + np.max(h)\n",
]


def long_source(lines: int, name: str = "f") -> str:
    """A module defining `name(h, W, b)`, about `lines` lines long."""
    body, k = "", 0
    while body.count("\n") < lines - 2:
        body += BLOCKS[k % len(BLOCKS)]
        k += 1
    return f"import numpy as np\n\n\ndef {name}(h, W, b):\n    s = 0.0\n{body}    return s\n"


# the blocks of a loop body: one branch at its top, then the blocks without branches, which leave
# long chains of copies to the optimizer (a branch in between would cut them short)
LOOP_BLOCKS = [
    BLOCKS[0],
    BLOCKS[1],
    BLOCKS[2],
    BLOCKS[4],
    BLOCKS[6],
    "    u = b[i] * h\n    s = s + np.sum(u)\n",
]


def loop_source(lines: int, name: str = "f", nested: bool = False) -> str:
    """A module defining `name(h, W, b)` whose statements (a branch, the blocks above, element
    reads `b[i]`) lie in the body of one `for` loop, or of a loop in a loop: about `lines` lines."""
    indent = "        " if nested else "    "
    head = "    for i in range(2):\n" + ("        for j in range(2):\n" if nested else "")
    body, k = "", 0
    while body.count("\n") < lines - 3 - nested:
        block = BLOCKS[3] if k == 0 else LOOP_BLOCKS[k % len(LOOP_BLOCKS)]
        body += "".join(indent + line + "\n" for line in block.splitlines())
        k += 1
    return f"import numpy as np\n\n\ndef {name}(h, W, b):\n    s = 0.0\n{head}{body}    return s\n"


def sum_source(terms: int, name: str = "f") -> str:
    """A module defining `name(h, W, b)` that returns one expression of `terms` terms."""
    expr = " + ".join(f"h[{i % 4}] * {i + 1}.0" for i in range(terms))
    return f"import numpy as np\n\n\ndef {name}(h, W, b):\n    return {expr}\n"


SHAPES = {
    "straight": long_source,
    "loop": loop_source,
    "nested": lambda lines, name="f": loop_source(lines, name, nested=True),
    "sum": sum_source,
}


def load(source: str, directory: str, module: str):
    """Import `source` from a file (s2sad reads a function's source from its file)."""
    path = os.path.join(directory, f"{module}.py")
    with open(path, "w") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def arguments():
    return np.full(4, 0.1), np.eye(4) * 0.5, np.full(4, 0.1)


def main() -> None:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    import s2sad
    from s2sad import transform_cache as compile_

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lines", nargs="*", type=int, default=[250, 1000, 2000])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shape", choices=sorted(SHAPES), default="straight")
    options = parser.parse_args()
    s2sad.grad(load(long_source(20), tempfile.mkdtemp(), "warm").f)(*arguments())  # imports
    with tempfile.TemporaryDirectory() as directory:
        for lines in options.lines:
            source = SHAPES[options.shape](lines)
            f = load(source, directory, f"{options.shape}{lines}").f
            wall, cpu = [], []
            for _ in range(options.repeat):
                compile_._CACHE.clear()
                start, start_cpu = time.perf_counter(), time.process_time()
                g = s2sad.grad(f)
                g(*arguments())
                wall.append(time.perf_counter() - start)
                cpu.append(time.process_time() - start_cpu)
            start, start_cpu = time.perf_counter(), time.process_time()
            s2sad.source(g)
            black = time.perf_counter() - start, time.process_time() - start_cpu
            print(
                f"{options.shape} {lines:5d} lines: grad first call {min(wall):6.2f} s (cpu {min(cpu):5.2f} s)"
                f"   source (black) {black[0]:6.2f} s (cpu {black[1]:5.2f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
