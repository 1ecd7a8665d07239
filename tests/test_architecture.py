"""The package's shape (scripts/import_graph.py): no import circles among s2sad's modules, no
import of one inside a function, no module over 600 lines and no class over 400."""

import importlib.util
from pathlib import Path

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
