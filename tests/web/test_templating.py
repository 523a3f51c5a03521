"""The template environment's output escaping (templating.EscapeToText) and block rendering.

Output expressions compile to `escape_text`, which returns plain text instead of a Markup
object. These tests pin the compiled form (a Jinja upgrade that changes its code generator
fails here, not silently) and check that every page renders byte for byte what a stock
autoescaping Jinja environment renders.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
import markupsafe
import pytest
from fastapi import FastAPI
from hypothesis import given
from hypothesis import strategies as st

from app.web.templating import Environment, Templates, escape_text

from .support import HX, TestClient

ROOT = Path(__file__).resolve().parents[2]


def env() -> Environment:
    return Environment(autoescape=True, undefined=jinja2.StrictUndefined)


def test_output_compiles_to_escape_text() -> None:
    source = env().compile("<p>{{ x }}</p>", raw=True)
    assert "environment.escape_text(" in source
    assert " escape(" not in source


@given(st.text())
def test_escape_text_is_markupsafe_escape(text: str) -> None:
    assert escape_text(text) == str(markupsafe.escape(text))
    assert env().from_string("{{ x }}").render(x=text) == str(markupsafe.escape(text))


class Html:
    def __html__(self) -> str:
        return "<b>trusted</b>"


class Shout:
    def __str__(self) -> str:
        return "<shout & 'quote'>"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
        ('"\'&', "&#34;&#39;&amp;"),
        (markupsafe.Markup("<i>kept</i>"), "<i>kept</i>"),
        (markupsafe.escape("<i>"), "&lt;i&gt;"),  # already escaped once: not twice
        (Html(), "<b>trusted</b>"),
        (Shout(), "&lt;shout &amp; &#39;quote&#39;&gt;"),
        (42, "42"),
        (None, "None"),
    ],
)
def test_escape_text_values(value: object, expected: str) -> None:
    assert escape_text(value) == expected
    assert env().from_string("{{ x }}").render(x=value) == expected


def test_captured_output_is_not_escaped_twice() -> None:
    e = env()
    x = "<x>"
    cases = {
        "{% macro m(v) %}<b>{{ v }}</b>{% endmacro %}{{ m(x) }}": "<b>&lt;x&gt;</b>",
        "{% set y %}<p>{{ x }}</p>{% endset %}{{ y }}{{ y }}": "<p>&lt;x&gt;</p><p>&lt;x&gt;</p>",
        "{% filter upper %}<p>{{ x }}</p>{% endfilter %}": "<P>&LT;X&GT;</P>",
        "{{ '<a>' ~ x }}": "&lt;a&gt;&lt;x&gt;",
        "{{ x|e }}|{{ x|safe }}": "&lt;x&gt;|<x>",
        "{% autoescape false %}{{ x }}{% endautoescape %}": "<x>",
        "{% for v in [x, x] %}{{ loop.index }}{{ v }}{% endfor %}": "1&lt;x&gt;2&lt;x&gt;",
    }
    for source, expected in cases.items():
        assert e.from_string(source).render(x=x) == expected, source


def test_strict_undefined_still_raises() -> None:
    with pytest.raises(jinja2.UndefinedError):
        env().from_string("{{ missing }}").render()


def stock_templates(ours: Templates) -> Templates:
    """The app's templates in a stock jinja2.Environment (markupsafe's own escape)."""
    templates = Templates(ROOT / "templates", ours.env.globals)
    settings = {k: getattr(templates.env, k) for k in ("autoescape", "trim_blocks", "lstrip_blocks")}
    stock = jinja2.Environment(loader=templates.env.loader, undefined=jinja2.StrictUndefined, **settings)
    stock.filters.update(templates.env.filters)
    stock.globals.update(templates.env.globals)
    templates.env = stock  # type: ignore[assignment]
    return templates


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("/plan?model=llama-3.1-8b&tp=8&util=0.85", {}),
        ("/plan?model=llama-3.1-8b&tp=8&util=0.85", HX),
        ("/plan?ranks=1024&tp=8", {}),
        ("/plan?model=llama-3.1-8b&util=1.5", {}),
        ("/", {}),
        ("/import", {}),
        ("/sim", {}),
        ("/compare?a=%2Fplan%3Fmodel%3Dllama-3.1-8b&b=%2Fplan%3Fmodel%3Dllama-3.1-8b%26util%3D0.8", {}),
    ],
)
def test_pages_render_as_with_stock_jinja(app: FastAPI, path: str, headers: dict[str, str]) -> None:
    with TestClient(app) as client:
        ours = client.get(path, headers=headers)
        app.state.templates = stock = stock_templates(app.state.templates)
        assert stock.env.__class__ is jinja2.Environment
        theirs = client.get(path, headers=headers)
    assert ours.status_code == theirs.status_code
    assert ours.text == theirs.text
    assert len(ours.text) > 500
