"""The benchmark runner's parts, used by benchmarks/run.py (which sets the thread counts before
NumPy loads, then imports these): how each row is built (builders), timed (timing), checked
(checks), what one case runs (cases, jit_rows) and how the tables are written (report)."""
