"""Scalar code on Python floats with the math module: a pendulum's energy and a spring chain."""

import math

import numpy as np

EMIT = {"pendulum_energy": {"wrt": ["theta", "omega"]}, "spring_energy": {"wrt": ["pos"]}}

GRAVITY = 9.81


def pendulum_energy(theta, omega, length=1.0, mass=1.0):
    kinetic = 0.5 * mass * (length * omega) ** 2
    potential = mass * GRAVITY * length * (1.0 - math.cos(theta))
    return kinetic + potential


def spring_energy(pos, rest, stiffness):
    """Energy of springs between consecutive 2-D points."""
    delta = pos[1:] - pos[:-1]
    length = np.sqrt(np.sum(delta**2, axis=1))
    return 0.5 * np.sum(stiffness * (length - rest) ** 2)


def inputs(rng):
    """Arguments for each function in EMIT, for tests and the CLI docs."""
    return {
        "pendulum_energy": (0.3, -1.2),
        "spring_energy": (rng.normal(size=(5, 2)), 0.8, rng.uniform(1.0, 2.0, size=4)),
    }
