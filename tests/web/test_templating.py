"""Template rendering goes through Jinja2's public API only, and a block renders what the same
block renders inside its page."""

from __future__ import annotations

import ast
from pathlib import Path

import jinja2
import markupsafe
import pytest
from fastapi import FastAPI

from app.web.templating import Templates

from .support import HX, TestClient

ROOT = Path(__file__).resolve().parents[2]
TEMPLATING = ROOT / "app" / "web" / "templating.py"


def test_templating_uses_only_public_jinja2_and_markupsafe() -> None:
    """No private module (jinja2.compiler, jinja2.nodes), no `_name` of jinja2 or markupsafe,
    no subclass of their classes: a Jinja upgrade cannot silently break the renderer."""
    tree = ast.parse(TEMPLATING.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("jinja2", "markupsafe"):
            assert node.module in ("jinja2", "markupsafe"), node.module  # not jinja2.compiler, jinja2.nodes
            assert not any(a.name.startswith("_") for a in node.names)
        if isinstance(node, ast.Import):
            assert all(a.name in ("jinja2", "markupsafe", "orjson") or "." not in a.name for a in node.names)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in (
            "jinja2", "markupsafe"
        ):
            assert not node.attr.startswith("_"), node.attr
        if isinstance(node, ast.ClassDef):
            assert not any("jinja2" in ast.unparse(b) or "markupsafe" in ast.unparse(b) for b in node.bases)


def test_the_environment_is_stock_jinja2(app: FastAPI) -> None:
    templates: Templates = app.state.templates
    assert type(templates.env) is jinja2.Environment
    assert templates.env.autoescape is True


def test_a_block_renders_as_inside_its_page(tmp_path: Path) -> None:
    (tmp_path / "page.html").write_text(
        "<main>{% block a %}<p>{{ x }}</p>{% for i in items %}{{ i }}{% endfor %}{% endblock %}"
        "{% block b %}[{{ y|upper }}]{% endblock %}</main>"
    )
    templates = Templates(tmp_path)
    context = {"x": "<x & 'y'>", "items": [1, markupsafe.Markup("<i>2</i>")], "y": "b"}
    page = templates.render("page.html", context)
    block_a = templates.render("page.html", context, "a")
    assert block_a == "<p>&lt;x &amp; &#39;y&#39;&gt;</p>1<i>2</i>"
    assert page == f"<main>{block_a}[B]</main>"
    assert templates.render_blocks("page.html", context, ["a", "b"]) == block_a + "[B]"
    with pytest.raises(LookupError, match="no block 'c'"):
        templates.render("page.html", context, "c")


def test_strict_undefined_still_raises(tmp_path: Path) -> None:
    (tmp_path / "t.html").write_text("{{ missing }}")
    with pytest.raises(jinja2.UndefinedError):
        Templates(tmp_path).render("t.html", {})


def test_the_slider_fragment_is_the_pages_blocks(app: FastAPI) -> None:
    """The htmx fragment of a slider tick holds the same results block as the full page."""
    with TestClient(app) as client:
        page = client.get("/plan?model=llama-3.1-8b&tp=8&util=0.85").text
        fragment = client.get("/plan?model=llama-3.1-8b&tp=8&util=0.85", headers=HX).text
    start = fragment.index('<section id="results"')
    results = fragment[start:fragment.index("</section>", start)]
    assert len(results) > 500 and results in page
