"""`Edge`: every HTTP request's one pure-ASGI layer in front of the app (no buffering, no task).

It applies, in the order four layers applied them before (outermost first), each policy unchanged:

1. the per-request context variables (`app.services.clients.CLIENT`, the client address's key for
   per-client caps; `app.services.memo.CURRENT`, this app's plan memo), set for the whole request;
2. the security headers on every response (`app.web.headers.HEADERS`, any the app set left as set);
3. gzip: a client whose Accept-Encoding names gzip gets Starlette's `GZipResponder`; any other gets
   what Starlette's identity responder does, written out here: the body untouched, and
   `Vary: Accept-Encoding` on a response of `minimum_size` bytes or more that gzip would have
   compressed (not already encoded, not a 206, not an excluded media type);
4. the body caps (`app.web.limits.BodySizeLimit`), for a request that can carry a body: a GET or
   HEAD without Content-Length or Transfer-Encoding has none (RFC 9112 section 6.3), and goes
   straight to the app.

One layer instead of four: a slider tick walks one coroutine and one send wrapper, and its request
headers are scanned once (it was four coroutines, three send wrappers and three header scans).
"""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.middleware.gzip import GZipMiddleware, GZipResponder
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.services.clients import CLIENT, key_of
from app.services.memo import CURRENT, PlanMemo
from app.web.headers import HEADERS
from app.web.limits import BodySizeLimit

PASSED = ("http.response.early_hint", "http.response.trailers")  # what the identity responder forwards as is


class Edge:
    def __init__(
        self, app: ASGIApp, max_body_bytes: int, max_log_bytes: int, memo: PlanMemo | None = None,
        minimum_size: int = 800, compresslevel: int = 6,
    ) -> None:
        self.app = app
        self.memo = memo
        self.limited = BodySizeLimit(app, max_body_bytes=max_body_bytes, max_log_bytes=max_log_bytes)
        # Starlette's own settings of gzip (its excluded media types normalised), read once, not per request
        gzip = GZipMiddleware(self.limited, minimum_size=minimum_size, compresslevel=compresslevel)
        self.minimum_size, self.compresslevel = gzip.minimum_size, gzip.compresslevel
        self.thread_minimum_size, self.excluded = gzip.thread_minimum_size, gzip.exclude_content_types

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        encoding: bytes | None = None
        may_have_body = scope.get("method") not in ("GET", "HEAD")
        for name, value in scope["headers"]:
            if name == b"accept-encoding":
                encoding = value if encoding is None else encoding  # the first, as Starlette's Headers.get
            elif name in (b"content-length", b"transfer-encoding"):
                may_have_body = True
        inner = self.limited if may_have_body else self.app
        client = scope.get("client")
        token = CLIENT.set(key_of(client[0] if client else ""))
        memo_token = CURRENT.set(self.memo)
        try:
            secured = _secured(send)
            if encoding is not None and b"gzip" in encoding:
                responder = GZipResponder(inner, self.minimum_size, compresslevel=self.compresslevel,
                                          thread_minimum_size=self.thread_minimum_size,
                                          exclude_content_types=self.excluded)
                await responder(scope, receive, secured)
            else:
                await inner(scope, receive, self._identity(secured))
        finally:
            CURRENT.reset(memo_token)
            CLIENT.reset(token)

    def _identity(self, send: Send) -> Send:
        """What Starlette's `IdentityResponder` sends (Vary on a response gzip would compress)."""
        initial: Message = {}
        as_is = started = False

        async def send_identity(message: Message) -> None:
            nonlocal initial, as_is, started
            kind = message["type"]
            if kind == "http.response.start":
                initial = message
                headers = message.setdefault("headers", [])
                as_is = message["status"] == 206 or self._not_compressed(headers)
                if as_is:
                    await send(message)
            elif as_is and kind in ("http.response.body", "http.response.pathsend"):
                await send(message)
            elif kind == "http.response.body" and not started:
                started = True
                if len(message.get("body", b"")) >= self.minimum_size or message.get("more_body", False):
                    MutableHeaders(raw=initial["headers"]).add_vary_header("Accept-Encoding")
                await send(initial)
                await send(message)
            elif kind == "http.response.body":
                message["body"] = message.get("body", b"")
                await send(message)
            elif kind in PASSED:
                await send(message)
            elif kind == "http.response.pathsend":
                await send(initial)
                await send(message)

        return send_identity

    def _not_compressed(self, headers: list[tuple[bytes, bytes]]) -> bool:
        """A response gzip leaves alone: already encoded, or of an excluded media type."""
        content_type = b""
        found = False
        for name, value in headers:
            if name == b"content-encoding":
                return True
            if name == b"content-type" and not found:
                content_type, found = value, True
        media_type = content_type.decode("latin-1").partition(";")[0].strip().lower()
        media_types = {media_type, media_type.partition("/")[0] + "/*"}
        if media_type.startswith("application/grpc+"):
            media_types.add("application/grpc")
        return not media_types.isdisjoint(self.excluded)


def _secured(send: Send) -> Send:
    """`send` with the security headers added to the response's start (those it lacks)."""

    async def send_secured(message: Message) -> None:
        if message["type"] == "http.response.start":
            names = {name.lower() for name, _ in message.get("headers", [])}
            extra = [(n, v) for n, v in HEADERS if n not in names]
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return send_secured
