"""All reading of htmx's HX-* request headers, and writing of its response headers, lives here.

Responses whose body depends on HX-Request carry `Vary: HX-Request` so that caches keep the
full page and the fragment apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote

from starlette.requests import Request
from starlette.responses import Response


@dataclass(frozen=True)
class HtmxDetails:
    """What htmx told us about a request (all falsy for a plain browser request)."""

    request: bool
    boosted: bool
    target: str | None
    trigger: str | None
    trigger_name: str | None
    current_url: str | None
    history_restore: bool

    @property
    def wants_fragment(self) -> bool:
        """A partial update: htmx asked, and it is neither a boosted navigation nor a history restore."""
        return self.request and not self.boosted and not self.history_restore


def _header(request: Request, name: str) -> str | None:
    value = request.headers.get(name)
    if value is None:
        return None
    if request.headers.get(f"{name}-URI-AutoEncoded") == "true":
        value = unquote(value)
    return value


def details(request: Request) -> HtmxDetails:
    """Parse the HX-* headers of a request."""
    return HtmxDetails(
        request=request.headers.get("HX-Request") == "true",
        boosted=request.headers.get("HX-Boosted") == "true",
        target=_header(request, "HX-Target"),
        trigger=_header(request, "HX-Trigger"),
        trigger_name=_header(request, "HX-Trigger-Name"),
        current_url=_header(request, "HX-Current-URL"),
        history_restore=request.headers.get("HX-History-Restore-Request") == "true",
    )


def add_vary(response: Response) -> None:
    """Mark a response whose body branches on HX-Request."""
    existing = response.headers.get("Vary")
    values = [v.strip() for v in existing.split(",")] if existing else []
    if "HX-Request" not in values:
        values.append("HX-Request")
    response.headers["Vary"] = ", ".join(values)


def replace_url(response: Response, url: str) -> None:
    """Ask htmx to replace the address bar with `url` (no new history entry)."""
    response.headers["HX-Replace-Url"] = url
