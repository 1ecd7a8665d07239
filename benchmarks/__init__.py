"""Benchmarks of s2sad against JAX, PyTorch and autograd: `python benchmarks/run.py --help`."""
