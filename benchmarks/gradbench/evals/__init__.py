"""One module per gradbench eval, named as the eval is (`hello`, `gmm`, `lstm`, `ba`, ...).

Each module defines two functions, which the tool (benchmarks/gradbench/tool.py) calls:

    def prepare(function: str, input: dict, jit: bool) -> Callable[[], object]:
        '''Untimed: parse the eval's input JSON into arrays, build the s2sad transforms (with
        `jit=jit`), warm them up (compile); return a zero-argument callable doing the timed
        work of `function` (one run).'''

    def output(function: str, result: object) -> object:
        '''The callable's result in the eval's JSON output layout (untimed).'''

A module may also define `FUNCTIONS`, the tuple of the function names it has; the tool then
answers an unknown function itself. `prepare` raises ValueError for a function the eval does not define; the tool answers the
evaluate message with `success: false` and the error. `input` is the message's input as is,
including `min_runs` and `min_seconds`, which the tool handles.
"""
