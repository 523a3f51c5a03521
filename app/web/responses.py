"""Page responses: a whole page, or the named blocks an htmx request needs (with Vary).

A route that renders a page first declares it with `expect_page`: the template, the context the
page needs even when computing fails (form values), and the blocks of its htmx fragment. The
error mapping (`errors.py`) uses that declaration to show an InputError inline on the same
page, as a full page or as the same fragment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse

from app.web import htmx
from app.web.templating import Templates

ContextSource = Mapping[str, Any] | Callable[[], Mapping[str, Any]]


@dataclass(frozen=True)
class PageSpec:
    """A page: its template, its base context (or a function that builds it, called only when the
    page is rendered from it, e.g. for an error) and the blocks of its htmx fragment."""

    template: str
    context: ContextSource
    fragment: tuple[str, ...] = field(default=())
    #: The form key an InputError's field path belongs to (None: the what-if keys of the plan form).
    field_key: Callable[[str], str | None] | None = None

    def base_context(self) -> Mapping[str, Any]:
        return self.context() if callable(self.context) else self.context


def templates_of(request: Request) -> Templates:
    templates: Templates = request.app.state.templates
    return templates


def expect_page(
    request: Request,
    template: str,
    context: ContextSource,
    fragment: tuple[str, ...] = (),
    field_key: Callable[[str], str | None] | None = None,
) -> PageSpec:
    """Declare the page this request renders (for inline errors), and return the declaration."""
    spec = PageSpec(template, context, fragment, field_key)
    request.state.page = spec
    return spec


def declared_page(request: Request) -> PageSpec | None:
    spec = getattr(request.state, "page", None)
    return spec if isinstance(spec, PageSpec) else None


def render(
    request: Request,
    spec: PageSpec,
    context: Mapping[str, Any] | None = None,
    status_code: int = 200,
    headers: Mapping[str, str] | None = None,
    merge_base: bool = True,
) -> HTMLResponse:
    """Render the declared page: the fragment blocks for htmx, else the page.

    `context` is laid over the page's base context, or used alone (`merge_base=False`) when it
    is already complete (the base context may then never be built).
    """
    base = spec.base_context() if merge_base or context is None else {}
    ctx: dict[str, Any] = {**base, **(context or {})}
    templates = templates_of(request)
    if spec.fragment and htmx.details(request).wants_fragment:
        ctx["fragment"] = True
        html = templates.render_blocks(spec.template, ctx, list(spec.fragment))
    else:
        ctx["fragment"] = False
        html = templates.render(spec.template, ctx)
    response = HTMLResponse(html, status_code=status_code, headers=dict(headers or {}))
    if spec.fragment:
        htmx.add_vary(response)
    return response


class FastJSONResponse(JSONResponse):
    """JSON rendered by orjson: a big import's reply (tens of MB for thousands of runs) in a tenth
    of the stdlib's time, on the thread that slider requests share the GIL with. The same JSON
    (shortest-repr floats, UTF-8); a NaN, which the stdlib refuses here, is written as null."""

    def render(self, content: Any) -> bytes:
        return orjson.dumps(content)
