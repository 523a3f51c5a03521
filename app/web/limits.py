"""Request body size caps, as a pure ASGI middleware (no buffering, no BaseHTTPMiddleware).

Log uploads get `Settings.max_log_bytes`; every other body `Settings.max_body_bytes`. A body
announced too large by Content-Length is refused before it is read; a streamed body is counted
as it arrives and refused as soon as it crosses the cap. The answer is a 413 with a plain
message (JSON under /api/ and for .json twins, text otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from starlette.types import ASGIApp, Message, Receive, Scope, Send

LOG_PATHS = ("/api/v1/import/log", "/import", "/import.json", "/start/log")


def is_ledger_import(path: str) -> bool:
    """A log imported as a new ledger of a deployment (/d/{slug}/ledgers and its API twin)."""
    return path.endswith("/ledgers") and path.startswith(("/d/", "/api/v1/deployments/"))


def too_large_message(limit: int) -> str:
    return f"The request body is larger than the {limit / 1024 / 1024:g} MiB this server accepts."


def wants_json(path: str) -> bool:
    return path.startswith("/api/") or path.endswith(".json")


class BodySizeLimit:
    """Cap request bodies per path; see the module docstring."""

    def __init__(
        self, app: ASGIApp, max_body_bytes: int, max_log_bytes: int, log_paths: Iterable[str] = LOG_PATHS
    ) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_log_bytes = max_log_bytes
        self.log_paths = frozenset(log_paths)

    def limit_for(self, path: str) -> int:
        if path in self.log_paths or is_ledger_import(path):
            return self.max_log_bytes
        return self.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit = self.limit_for(path)
        has_body = False
        for name, value in scope["headers"]:
            if name == b"content-length":
                if value.isdigit() and int(value) > limit:
                    await self._refuse(path, limit, send)
                    return
                has_body = value != b"0"
            elif name == b"transfer-encoding":
                has_body = True
        if not has_body and scope.get("method") in ("GET", "HEAD"):
            # A GET without Content-Length or Transfer-Encoding has no body (RFC 9112 section
            # 6.3) and no GET route reads one: nothing to count, a slider tick goes straight through.
            await self.app(scope, receive, send)
            return
        received = 0
        refused = False
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit and not response_started:
                    # Answer now; the app then sees a disconnected client and its reply is dropped.
                    refused = True
                    await self._refuse(path, limit, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if refused:
                return
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        await self.app(scope, counting_receive, guarded_send)

    @staticmethod
    async def _refuse(path: str, limit: int, send: Send) -> None:
        message = too_large_message(limit)
        if wants_json(path):
            body = json.dumps({"error": {"field": "body", "message": message}}).encode()
            content_type = b"application/json"
        else:
            body = message.encode()
            content_type = b"text/plain; charset=utf-8"
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", content_type),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
