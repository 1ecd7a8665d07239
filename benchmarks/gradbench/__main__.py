"""`python -m benchmarks.gradbench [--jit]`: the gradbench tool (tool.py)."""

from .tool import main

main()
