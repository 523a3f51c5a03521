"""`ClientContext`: the per-request context variables, set once for each HTTP request.

- `app.services.clients.CLIENT`: the key of the request's client address (per-client caps);
- `app.services.memo.CURRENT`: the app's plan memo (`PlanCache.memo`), so the plan's pure
  sub-results are reused across the requests of this app and of no other.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.services.clients import CLIENT, key_of
from app.services.memo import CURRENT, PlanMemo


class ClientContext:
    """A pure ASGI middleware (no task of its own, so the values reach the route and its threads)."""

    def __init__(self, app: ASGIApp, memo: PlanMemo | None = None) -> None:
        self.app = app
        self.memo = memo

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        token = CLIENT.set(key_of(client[0] if client else ""))
        memo_token = CURRENT.set(self.memo)
        try:
            await self.app(scope, receive, send)
        finally:
            CURRENT.reset(memo_token)
            CLIENT.reset(token)
