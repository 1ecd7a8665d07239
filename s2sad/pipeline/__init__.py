"""The source transform, one module per stage (docs/architecture.md draws it):

    parse -> normalize -> classify, activity, ranks -> reverse | tangent -> tapes -> optimize
          -> lower (jit only) -> emit -> load

`driver.differentiate` runs them in that order; the transform cache (s2sad/transform_cache.py)
calls it. Stages import shared helpers (names.py, nodes.py, reserved.py,
dependence.py, s2sad/ir.py) and the rule tables, never the driver.
"""
