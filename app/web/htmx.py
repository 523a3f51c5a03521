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


_HX_NAMES = frozenset(
    {
        "hx-request", "hx-boosted", "hx-target", "hx-trigger", "hx-trigger-name", "hx-current-url",
        "hx-history-restore-request", "hx-target-uri-autoencoded", "hx-trigger-uri-autoencoded",
        "hx-trigger-name-uri-autoencoded", "hx-current-url-uri-autoencoded",
    }
)


def _hx_headers(request: Request) -> dict[str, str]:
    """The request's HX-* headers by lower-case name, read in one pass (first value wins)."""
    found: dict[str, str] = {}
    for raw_name, raw_value in request.scope["headers"]:
        if raw_name[:3].lower() == b"hx-":
            name = raw_name.decode("latin-1").lower()
            if name in _HX_NAMES and name not in found:
                found[name] = raw_value.decode("latin-1")
    return found


def _value(headers: dict[str, str], name: str) -> str | None:
    value = headers.get(name)
    if value is not None and headers.get(f"{name}-uri-autoencoded") == "true":
        value = unquote(value)
    return value


def details(request: Request) -> HtmxDetails:
    """The HX-* headers of a request, parsed once (a route and the page renderer both ask)."""
    cached = request.scope.get("kvledger.htmx")
    if isinstance(cached, HtmxDetails):
        return cached
    request.scope["kvledger.htmx"] = parsed = _parse(request)
    return parsed


def _parse(request: Request) -> HtmxDetails:
    headers = _hx_headers(request)
    return HtmxDetails(
        request=headers.get("hx-request") == "true",
        boosted=headers.get("hx-boosted") == "true",
        target=_value(headers, "hx-target"),
        trigger=_value(headers, "hx-trigger"),
        trigger_name=_value(headers, "hx-trigger-name"),
        current_url=_value(headers, "hx-current-url"),
        history_restore=headers.get("hx-history-restore-request") == "true",
    )


def add_vary(response: Response) -> None:
    """Mark a response whose body branches on HX-Request."""
    existing = response.headers.get("Vary")
    values = [v.strip() for v in existing.split(",")] if existing else []
    if "HX-Request" not in values:
        values.append("HX-Request")
    response.headers["Vary"] = ", ".join(values)


def push_url(response: Response, url: str) -> None:
    """Ask htmx to push `url` as a new history entry (instead of the element's own hx-push-url)."""
    response.headers["HX-Push-Url"] = url


def replace_url(response: Response, url: str) -> None:
    """Ask htmx to replace the address bar with `url` (no new history entry)."""
    response.headers["HX-Replace-Url"] = url
