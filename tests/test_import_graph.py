"""The layering of docs/ARCHITECTURE.md, read from the code's own imports (function-level ones included):
estimator and runners import nothing else of ours, no estimator module imports a higher layer, and there is
no import circle anywhere in the estimator."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# layer of each estimator part (docs/ARCHITECTURE.md, "The estimator, bottom up")
LAYER = {
    "estimator.specs": 1,
    "estimator.validate": 1,
    "estimator.catalog": 2,
    "estimator.engines": 2,
    "estimator.physics": 3,
    "estimator.render": 3,
    "estimator.report": 4,
    "estimator.app": 5,
    "estimator.__main__": 5,
}
ROOT_PACKAGE_LAYER = 0  # ``estimator`` itself holds only the version and imports nothing


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every ``ours`` module named by an import anywhere in the file (top level or inside a function)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.split(".")[0] in ("estimator", "runners", "harness", "calibration")}


def _graph(package: str) -> dict[str, set[str]]:
    files = {_module_name(p): p for p in (ROOT / package).rglob("*.py")}
    return {m: {t for t in _imports(p) if t in files and t != m} for m, p in files.items()}


def _layer(module: str) -> int:
    if module == "estimator":
        return ROOT_PACKAGE_LAYER
    for prefix in sorted(LAYER, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return LAYER[prefix]
    raise AssertionError(f"{module} has no layer in LAYER (docs/ARCHITECTURE.md)")


def test_estimator_and_runners_import_nothing_else_of_ours():
    for package in ("estimator", "runners"):
        for path in (ROOT / package).rglob("*.py"):
            foreign = {m for m in _imports(path) if m.split(".")[0] != package}
            assert not foreign, f"{path.relative_to(ROOT)} imports {sorted(foreign)}"


def test_no_estimator_module_imports_a_higher_layer():
    for module, targets in _graph("estimator").items():
        for t in targets:
            assert _layer(t) <= _layer(module), f"{module} (layer {_layer(module)}) imports {t} ({_layer(t)})"


def test_no_import_circle_in_the_estimator():
    graph = _graph("estimator")
    state: dict[str, int] = {}  # 1 on the path, 2 done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                raise AssertionError("import circle: " + " -> ".join(path[path.index(t) :] + [m, t]))
            if t not in state:
                visit(t, path + [m])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
