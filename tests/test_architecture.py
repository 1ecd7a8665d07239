"""The package's shape (scripts/import_graph.py): no import circles among s2sad's modules, no
import of one inside a function, no module over 600 lines and no class over 400."""

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "scripts/import_graph.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_import_circles():
    graph = _import_graph()
    edges = graph.graph(graph.modules())
    assert graph.cycles(edges) == []


def test_no_s2sad_import_inside_a_function():
    graph = _import_graph()
    known = graph.modules()
    lazy = [
        f"{name}:{line} -> {target}"
        for name, path in known.items()
        for target, line, inside in graph.imports(name, path, known)
        if inside
    ]
    assert lazy == []


def test_no_module_or_class_oversized():
    graph = _import_graph()
    assert graph.oversized(graph.modules()) == []


def test_the_size_check_sees_a_long_class(tmp_path):
    graph = _import_graph()
    (tmp_path / "s2sad").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(graph.MAX_CLASS_LINES + 1))
    (tmp_path / "s2sad/big.py").write_text("class Big:\n" + body)
    assert graph.oversized(graph.modules(tmp_path)) == [
        f"class s2sad.big.Big: {graph.MAX_CLASS_LINES + 2} lines"
    ]


def test_the_check_finds_a_circle():
    graph = _import_graph()
    assert graph.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_imports_inside_functions_are_seen(tmp_path):
    graph = _import_graph()
    (tmp_path / "s2sad").mkdir()
    (tmp_path / "s2sad/__init__.py").write_text("")
    (tmp_path / "s2sad/a.py").write_text("from . import b\n")
    (tmp_path / "s2sad/b.py").write_text("def f():\n    from .a import x\n")
    edges = graph.graph(graph.modules(tmp_path))
    assert graph.cycles(edges) == [["s2sad.a", "s2sad.b"]]


# ---------------------------------------------------------------- node annotations: s2sad/ir.py only
ANNOTATIONS = {"src", "src_parsed", "end_copy", "merge_copy", "counter", "header", "liveout"}
ANNOTATIONS |= {"index", "trips", "iters", "merged", "op"}
OPERATOR_NODES = {"BinOp", "UnaryOp", "BoolOp", "AugAssign"}  # their `op` is the ast's own field
NOT_ANNOTATIONS = {  # attributes of the same names on objects that are not ast nodes
    ("s2sad/pipeline/resolve.py", "parent.index"),  # a Resolver's scope number
    ("s2sad/standalone.py", "order.index"),  # list.index, passed as a sort key
}


def _is_annotation(name):
    return name in ANNOTATIONS or name.startswith("s2sad_")


def _operator_field(node, parent):
    """`x.op` read as the ast operator: `isinstance(x.op, ...)`, `type(x.op)`, `ast.BinOp(.., x.op, ..)`."""
    if not isinstance(parent, ast.Call) or node not in parent.args:
        return False
    func = parent.func
    called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
    return called in {"isinstance", "type"} | OPERATOR_NODES


def annotation_uses(source, module=""):
    """Places that read or write a node annotation directly (`getattr(x, "src")`, `x.merged`)."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        parent = parents.get(node)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in {"getattr", "setattr", "hasattr", "delattr"} and len(node.args) > 1:
                name = node.args[1]
                if isinstance(name, ast.Constant) and _is_annotation(str(name.value)):
                    found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
        if not isinstance(node, ast.Attribute) or not _is_annotation(node.attr):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "ir"}:
            continue  # a class's own field, or ir's accessor
        if node.attr == "index" and isinstance(parent, ast.Call) and parent.func is node:
            continue  # list.index(...)
        if node.attr == "op" and _operator_field(node, parent):
            continue
        if (module, ast.unparse(node)) not in NOT_ANNOTATIONS:
            found.append(f"{module}:{node.lineno} {ast.unparse(node)}")
    return found


def test_node_annotations_only_through_ir():
    found = []
    for path in sorted((ROOT / "s2sad").rglob("*.py")):
        module = path.relative_to(ROOT).as_posix()
        if module != "s2sad/ir.py":
            found += annotation_uses(path.read_text(), module)
    assert found == []


def test_the_annotation_check_sees_direct_uses():
    source = (
        'a = getattr(stmt, "src", None)\nstmt.merged = []\nn = loop.index\n'
        'setattr(x, "s2sad_callee", f)\nk = s.op.kind\n'
        "ok = isinstance(b.op, ast.Add), self.src, xs.index(1), ast.BinOp(l, b.op, r), parsed.text\n"
    )
    assert [use.split(" ", 1)[1] for use in annotation_uses(source)] == [
        "getattr(stmt, 'src', None)",
        "stmt.merged",
        "loop.index",
        "setattr(x, 's2sad_callee', f)",
        "s.op",
    ]


# ----------------------------------------------------------------------------- rule templates


def _names_a_template_calls(template) -> set[str]:
    return {
        node.func.id
        for node in ast.walk(template)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    } | {node.id for node in ast.walk(template) if isinstance(node, ast.Name)}


def _library(func) -> bool:
    """Whether `func` is NumPy's, the math module's, SciPy's or s2sad's own (not a function a
    test registered a rule for, whose templates are the test's business)."""
    module = getattr(func, "__module__", None) or "numpy"  # ufuncs may name no module
    return module.split(".")[0] in ("numpy", "math", "scipy", "s2sad", "builtins")


def _templates():
    """(what, parameters, template) for every template the rule tables hold as code: adjoints
    (plain, batched, joint) and explicit tangents (plain and batched), of ops and helpers."""
    from s2sad.rules import registry

    funcs = {id(f): f for f in registry._KEEP_ALIVE}
    for key, rule in registry.VJP.items():
        if not _library(funcs.get(key)):
            continue  # a rule other tests registered for their own functions
        params = set(rule.signature.parameters)
        for param, template in {**rule.templates, **rule.batched_templates}.items():
            if isinstance(template, ast.AST):
                yield f"{rule.name}.{param}", params, template
        if rule.joint is not None:
            yield f"{rule.name} (joint)", params, rule.joint
    for table in (registry.FORWARD, registry.EXPLICIT):
        for key, entry in table.items():
            templates = entry[2] if table is registry.FORWARD else entry
            if not templates or not _library(funcs.get(key)):
                continue
            signature = registry.signature_of(funcs[key])
            params = set(signature.parameters) if signature is not None else set()
            name = getattr(funcs[key], "__name__", repr(funcs[key]))
            for param, template in templates.items():
                yield f"{name} tangent of {param}", params, template


def test_every_name_a_template_uses_is_defined():
    """Templates are code that names helpers; a misspelt one would only fail when a user's
    gradient runs. Every name they use is a parameter, a placeholder, `np`, `math`, a builtin or
    a registered helper."""
    import builtins

    from s2sad import runtime
    from s2sad.rules.registry import NAMESPACE  # rules users register (other tests' included)

    known = set(vars(runtime)) | set(vars(builtins)) | set(NAMESPACE)
    known |= {"np", "math", "g", "ans", "k", "t", "elt"}
    unknown = [
        f"{what}: {sorted(names)}"
        for what, params, template in _templates()
        if (names := _names_a_template_calls(template) - known - params)
    ]
    assert unknown == []
    assert len(list(_templates())) > 150  # the check reads the tables it means to


def test_the_template_check_sees_a_misspelt_helper():
    template = ast.parse("unbroadcst(g * x, x)", mode="eval").body
    assert _names_a_template_calls(template) - {"g", "x"} == {"unbroadcst"}


def test_two_helpers_of_one_name_are_refused():
    """Generated code calls helpers by name, so a family defining a helper another already has
    would silently replace it."""
    from s2sad.rules.helpers import helper

    def unbroadcast(g, x):  # the name of common.py's helper
        return g

    with pytest.raises(ValueError, match="helper unbroadcast .* already defined"):
        helper(unbroadcast)


def test_helpers_read_only_what_a_standalone_module_has():
    """`s2sad emit` copies the helpers a gradient calls, each by its source, with the number and
    string constants they read: every other global a helper reads must be a registered helper (so
    it is copied too), a module or a builtin. (Batched helpers serve `s2sad.jacobian` only, which
    `s2sad emit` does not write.)"""
    import builtins
    import types

    from s2sad.rules.helpers import RUNTIME, global_names

    missing = {
        name: sorted(
            g
            for g in global_names(func.__code__)
            if g not in RUNTIME
            and not hasattr(builtins, g)
            and not isinstance(func.__globals__.get(g), types.ModuleType)
            and type(func.__globals__.get(g)) not in (int, float, str, tuple)
            and g != "NonScalarOutputError"  # grad_seed's; standalone modules define it
        )
        for name, func in RUNTIME.items()
    }
    assert {name: g for name, g in missing.items() if g} == {}
