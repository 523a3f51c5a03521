"""Jinja2 rendering: whole pages or one named block of a page template (an htmx fragment).

One template per page, with named blocks. A full request renders the page; an htmx request
renders only the block it needs, by calling the compiled block function from
`Template.blocks` with a fresh template context (what jinja2-fragments does, in a few lines).
Every render is announced to `Templates.listeners`, so tests assert which template, block and
context were rendered instead of matching HTML.

Output escaping. Autoescaped `{{ value }}` compiles to markupsafe's `escape(value)`, which
wraps every escaped string in a new `Markup` object (a Python-level constructor) only for the
template to join it into the page text at once. `EscapeToText` compiles output expressions to
`escape_text(value)` instead: the same escaping (markupsafe's own C routine, `__html__` honoured,
nothing escaped twice) returning plain text. It applies only where a value is written to the
output, whose buffers Jinja wraps in `Markup` itself wherever they are captured (macros,
`{% set %}` blocks, filter blocks). On the plan page's slider fragment this is about a third of
the render time. tests/web/test_templating.py pins the compiled form and the escaping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
import markupsafe
import orjson
from jinja2.compiler import CodeGenerator, Frame
from jinja2.nodes import Expr
from markupsafe import Markup

from app.web import formatting


@dataclass(frozen=True)
class RenderEvent:
    """What a render produced: the template, the block (None for the whole page), the context."""

    template: str
    block: str | None
    context: Mapping[str, Any]


Listener = Callable[[RenderEvent], None]

def _escape_inner_fallback(text: str) -> str:
    return str(markupsafe.escape(text))


# markupsafe's C escaping routine (markupsafe 2.1+; its pure-Python twin when not compiled).
_escape_inner: Callable[[str], str] = getattr(markupsafe, "_escape_inner", _escape_inner_fallback)


def escape_text(value: object) -> str:
    """markupsafe.escape(value) as plain text: `__html__` objects (Markup) are trusted as they
    are, strings and everything else (via str) have & < > ' " replaced by entities."""
    if type(value) is not str:
        html = getattr(value, "__html__", None)
        if html is not None:
            return str(html())
        value = str(value)
    return _escape_inner(value)


class EscapeToText(CodeGenerator):
    """Compile autoescaped output expressions to `environment.escape_text(...)` (see the module doc)."""

    def _output_child_pre(self, node: Expr, frame: Frame, finalize: Any) -> None:
        if frame.eval_ctx.autoescape and not frame.eval_ctx.volatile and finalize.src is None:
            self.write("environment.escape_text(")
        else:
            super()._output_child_pre(node, frame, finalize)


class Environment(jinja2.Environment):
    code_generator_class = EscapeToText
    escape_text = staticmethod(escape_text)


def json_for_html(value: object) -> Markup:
    """JSON safe to embed in a <script type="application/json">: <, > and & escaped (no `</script>`
    or comment can form), and U+2028/U+2029 too. A NaN or infinity becomes null (a gap in a chart).

    orjson, not json: the pool chart of every slider tick is ~6 KB of floats, 60 µs with json
    and under 10 µs with orjson (the same shortest-repr floats, so the same figure)."""
    text = orjson.dumps(value).decode()
    # str.replace per character class: several times faster than one str.translate over the text.
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


class Templates:
    """A Jinja2 environment over `templates/` plus the block renderer and the render hook."""

    def __init__(self, directory: Path, globals_: Mapping[str, Any] | None = None) -> None:
        self.env = Environment(
            loader=jinja2.FileSystemLoader(str(directory)),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,
            enable_async=False,
        )
        self.env.filters.update(formatting.FILTERS)
        self.env.filters["tojson_html"] = json_for_html
        self.env.globals.update(globals_ or {})
        self.listeners: list[Listener] = []

    def render(self, name: str, context: Mapping[str, Any], block: str | None = None) -> str:
        """Render a page template, or only one of its named blocks."""
        template = self.env.get_template(name)
        if block is None:
            html = template.render(context)
        else:
            try:
                block_func = template.blocks[block]
            except KeyError:
                raise LookupError(f"template {name!r} has no block {block!r}") from None
            html = "".join(block_func(template.new_context(dict(context))))
        event = RenderEvent(template=name, block=block, context=context)
        for listener in self.listeners:
            listener(event)
        return html

    def render_blocks(self, name: str, context: Mapping[str, Any], blocks: list[str]) -> str:
        """Several named blocks of one page, concatenated (a fragment plus out-of-band swaps)."""
        return "".join(self.render(name, context, block) for block in blocks)
