"""`app.web.edge.Edge`, the app's one middleware, sends what Starlette's GZipMiddleware sends (its
identity path is written out in Edge, its gzip path is Starlette's), with the security headers
added to the start of every response, for responses of every shape gzip treats apart: small and
large bodies, streamed bodies, an already-encoded body, a 206, excluded media types, trailers and
early hints, pathsend."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import Message, Receive, Scope, Send

from app.services.clients import CLIENT, key_of
from app.services.memo import CURRENT, PlanMemo
from app.web.edge import Edge
from app.web.headers import HEADERS

BIG = b"0123456789" * 100  # over the 800-byte minimum

RESPONSES: dict[str, list[Message]] = {
    "small": [{"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]},
              {"type": "http.response.body", "body": b"tiny"}],
    "large": [{"type": "http.response.start", "status": 200,
               "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"vary", b"HX-Request"),
                           (b"content-length", b"1000")]},
              {"type": "http.response.body", "body": BIG}],
    "no headers": [{"type": "http.response.start", "status": 200}, {"type": "http.response.body", "body": BIG}],
    "streamed": [{"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]},
                 {"type": "http.response.body", "body": b"[", "more_body": True},
                 {"type": "http.response.body", "body": BIG, "more_body": True},
                 {"type": "http.response.body", "more_body": False}],
    "encoded": [{"type": "http.response.start", "status": 200,
                 "headers": [(b"content-type", b"text/css"), (b"content-encoding", b"br")]},
                {"type": "http.response.body", "body": BIG}],
    "partial": [{"type": "http.response.start", "status": 206, "headers": [(b"content-type", b"text/plain")]},
                {"type": "http.response.body", "body": BIG}],
    "image": [{"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"IMAGE/PNG")]},
              {"type": "http.response.body", "body": BIG}],
    "video": [{"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"video/mp4; x=1")]},
              {"type": "http.response.body", "body": BIG}],
    "grpc": [{"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/grpc+proto")]},
             {"type": "http.response.body", "body": BIG}],
    "hints and trailers": [{"type": "http.response.early_hint", "links": ["</a.css>; rel=preload"]},
                           {"type": "http.response.start", "status": 200, "trailers": True,
                            "headers": [(b"content-type", b"text/plain")]},
                           {"type": "http.response.body", "body": BIG},
                           {"type": "http.response.trailers", "headers": []}],
    "pathsend": [{"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]},
                 {"type": "http.response.pathsend", "path": "/x"}],
    "own security header": [{"type": "http.response.start", "status": 200,
                             "headers": [(b"content-type", b"text/html"), (b"referrer-policy", b"no-referrer")]},
                            {"type": "http.response.body", "body": BIG}],
}



def _on_own_loop(coroutine: Coroutine[Any, Any, None]) -> None:
    """Run on a loop of its own in a thread: a Playwright test earlier in the same pytest worker
    leaves its event loop running in this thread, where `asyncio.run` refuses to start."""
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, coroutine).result()

def _app(messages: list[Message], seen: dict[str, Any]) -> Any:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen["client"], seen["memo"] = CLIENT.get(None), CURRENT.get(None)
        for message in messages:
            await send({**message, "headers": list(message["headers"])} if "headers" in message else dict(message))

    return app


def _run(middleware: Any, encoding: bytes | None, method: str = "GET") -> list[Message]:
    headers = [(b"host", b"127.0.0.1")] + ([(b"accept-encoding", encoding)] if encoding is not None else [])
    scope = {"type": "http", "method": method, "path": "/plan", "query_string": b"", "headers": headers,
             "client": ("10.0.0.7", 1234)}
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    _on_own_loop(middleware(scope, receive, send))
    return sent


def _secured(messages: list[Message]) -> list[Message]:
    """The security headers added to a start message, as every response gets them."""
    out = []
    for message in messages:
        if message["type"] == "http.response.start":
            names = {name for name, _ in message.get("headers", [])}
            message = {**message, "headers": [*message.get("headers", []), *(h for h in HEADERS if h[0] not in names)]}
        out.append(message)
    return out


@pytest.mark.parametrize("encoding", [None, b"identity", b"br", b"gzip", b"gzip, deflate, br"])
@pytest.mark.parametrize("shape", list(RESPONSES))
def test_edge_sends_what_starlettes_gzip_sends_with_the_security_headers(shape: str, encoding: bytes | None) -> None:
    memo = PlanMemo()
    seen: dict[str, Any] = {}
    ours = _run(Edge(_app(RESPONSES[shape], seen), max_body_bytes=1024, max_log_bytes=2048, memo=memo), encoding)
    starlette = _run(GZipMiddleware(_app(RESPONSES[shape], {}), minimum_size=800, compresslevel=6), encoding)
    assert ours == _secured(starlette)
    assert seen == {"client": key_of("10.0.0.7"), "memo": memo}  # the context variables, inside the request
    assert CLIENT.get(None) is None and CURRENT.get(None) is None  # and reset after it


def test_a_bodiless_get_skips_the_body_caps_and_a_post_does_not() -> None:
    """A GET without Content-Length goes straight to the app; a POST is counted against the caps
    (its announced 5,000 bytes over the 1,024 allowed: a 413, the app never runs)."""
    seen: dict[str, Any] = {}
    edge = Edge(_app(RESPONSES["small"], seen), max_body_bytes=1024, max_log_bytes=2048)
    assert _run(edge, None)[0]["status"] == 200 and seen
    seen.clear()
    scope = {"type": "http", "method": "POST", "path": "/start/serve", "query_string": b"", "client": None,
             "headers": [(b"content-length", b"5000"), (b"accept-encoding", b"identity")]}
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    _on_own_loop(edge(scope, receive, send))
    assert sent[0]["status"] == 413 and not seen
    assert [h for h in sent[0]["headers"] if h in HEADERS] == HEADERS
