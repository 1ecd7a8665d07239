"""s2sad as a gradbench tool: `python -m benchmarks.gradbench [--jit]` speaks gradbench's
JSON-lines protocol on stdin/stdout (tool.py); each eval is a module under evals/."""
