"""`ClientContext`: sets `app.services.clients.CLIENT` to the key of each request's client address."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.services.clients import CLIENT, key_of


class ClientContext:
    """A pure ASGI middleware (no task of its own, so the value reaches the route and its threads)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = CLIENT.set(key_of(client[0] if client else ""))
        try:
            await self.app(scope, receive, send)
        finally:
            CLIENT.reset(token)
