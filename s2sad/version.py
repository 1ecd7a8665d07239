"""s2sad's version: the disk cache keys compiled code on it, and the CLI prints it."""

__version__ = "0.1.0"
