"""app/core imports nothing from the web, database, template or plot packages."""

from __future__ import annotations

import ast
from pathlib import Path

FORBIDDEN = {"fastapi", "starlette", "sqlalchemy", "jinja2", "plotly", "uvicorn", "alembic", "httpx"}
CORE = Path(__file__).resolve().parents[2] / "app" / "core"


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_core_is_pure() -> None:
    files = sorted(CORE.rglob("*.py"))
    assert len(files) > 10
    offenders = {str(p.relative_to(CORE)): sorted(imported_roots(p) & FORBIDDEN) for p in files}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_does_not_import_the_app_layers() -> None:
    for path in CORE.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        for layer in ("app.web", "app.db", "app.services.plans", "app.schemas"):
            assert f"from {layer}" not in text and f"import {layer}" not in text, (path, layer)
