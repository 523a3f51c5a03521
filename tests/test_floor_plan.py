"""The floor plan of app/: no import cycles, and every layer imports only the layers below it.

*web and cli call services; services use core, ingest and db; core imports nothing of ours but
itself.* The graph is read from the source with `ast` — every import statement, including those
under `if TYPE_CHECKING:` and inside functions — so a cycle cannot hide behind a lazy import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app"

#: layer → the layers it must never import (its own sub-packages are always allowed).
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "app.core": ("app.services", "app.db", "app.web", "app.ingest", "app.schemas", "app.cli", "app.settings"),
    "app.ingest": ("app.services", "app.db", "app.web", "app.cli"),
    "app.db": ("app.services", "app.web", "app.cli"),
    "app.services": ("app.web", "app.cli"),
    "app.schemas": ("app.services", "app.db", "app.web", "app.cli"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(APP.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(APP.rglob("*.py"))}


def _imported(node: ast.AST, package: str, known: Mapping[str, Path]) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:  # relative: resolve against the importing module's package
            parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        for alias in node.names:
            full = f"{base}.{alias.name}"
            yield full if full in known else base


def import_graph() -> dict[str, set[str]]:
    """Each module of app/ → the modules of app/ it imports (anywhere in its source)."""
    known = modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets.update(t for t in _imported(node, package, known) if t == "app" or t.startswith("app."))
        graph[name] = {t for t in targets if t != name}
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def in_layer(module: str, layer: str) -> bool:
    return module == layer or module.startswith(layer + ".")


def layer_violations(graph: Mapping[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (source, target)
        for source, targets in graph.items()
        for layer, forbidden in FORBIDDEN.items()
        if in_layer(source, layer)
        for target in targets
        if any(in_layer(target, f) for f in forbidden)
    )


def test_the_graph_sees_lazy_and_type_checking_imports() -> None:
    graph = import_graph()
    assert len(graph) > 60
    assert "app.services.plans" in graph["app.cli"]  # imported inside a function
    assert "app.web.plan.routes" in graph["app.web.app"]
    assert "app.core.shape" in graph["app.core.params"]


def test_no_import_cycles_in_app() -> None:
    assert cycles(import_graph()) == []


def test_every_layer_imports_only_the_layers_below_it() -> None:
    assert layer_violations(import_graph()) == []


def test_the_checks_can_fail() -> None:
    """The same checks on a graph with a cycle and a core → web import do report them."""
    bad = {"app.core.a": {"app.core.b", "app.web.x"}, "app.core.b": {"app.core.a"}, "app.web.x": set()}
    assert cycles(bad) == [["app.core.a", "app.core.b"]]
    assert layer_violations(bad) == [("app.core.a", "app.web.x")]


#: Domain errors the web layer must not translate by hand: `app.web.errors` registers a handler
#: for each (InputError and its SimInputError, the repository's errors, JobLimitError).
HANDLED = {"InputError", "SimInputError", "NotFound", "Conflict", "InvalidInput", "JobLimitError", "RepositoryError"}


def _caught_names(handler: ast.ExceptHandler) -> set[str]:
    nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return {n.attr if isinstance(n, ast.Attribute) else n.id for n in nodes if isinstance(n, ast.Attribute | ast.Name)}


def _is_route(node: ast.AST) -> bool:
    """A function decorated as a route (`@router.get(...)`, `@api.post(...)`, …)."""
    return isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
        isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
        and d.func.attr in ("get", "post", "put", "patch", "delete", "api_route")
        for d in node.decorator_list
    )


def test_web_routes_leave_domain_errors_to_the_registered_handlers() -> None:
    """No route catches a domain error to re-raise it as HTTP (helpers may still say which form
    field a lookup belongs to), and the old `domain_errors` blocks are gone everywhere."""
    offenders = []
    for path in sorted((APP / "web").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for route in (n for n in ast.walk(tree) if _is_route(n)):
            for node in ast.walk(route):
                if isinstance(node, ast.ExceptHandler) and node.type is not None:
                    translated = _caught_names(node) & (HANDLED - {"InputError"})
                    if translated and any(isinstance(n, ast.Raise) for n in ast.walk(node)):
                        offenders.append((path.name, node.lineno, sorted(translated)))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name | ast.Attribute) and "domain_errors" in ast.unparse(node):
                offenders.append((path.name, node.lineno, ["domain_errors"]))
    assert offenders == []
