"""ONE write policy over every route the app has (issue 12 item 3): every request with a method
other than GET/HEAD/OPTIONS must be same-origin and, when KVLEDGER_WRITE_TOKEN is set, carry
the token. The routes are enumerated from the app's router, so a new route cannot miss it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from app.web.app import create_app
from app.web.deps import SAFE_METHODS, TOKEN_HEADER, write_policy

from .support import TestClient, make_settings

TOKEN = "s3cret-token"


def _app() -> FastAPI:
    return create_app(make_settings(write_token=TOKEN))


def _routes(app: FastAPI) -> list[Any]:
    """Every route of the app, included routers flattened (FastAPI's own walk of its tree)."""
    return list(iter_route_contexts(app.routes))


def _writes(app: FastAPI) -> list[tuple[str, str]]:
    out = []
    for route in _routes(app):
        for method in sorted(set(route.methods or ()) - SAFE_METHODS):
            out.append((method, re.sub(r"\{[^}]+\}", "1", route.path_format)))
    return out


def test_every_route_carries_the_policy_or_only_reads() -> None:
    app = _app()
    assert len(_writes(app)) >= 16  # the simulation, import, start, plan, save and ledger writes
    for route in _routes(app):
        dependant = getattr(route.route, "dependant", None) if isinstance(route.route, APIRoute) else None
        dependant = getattr(route._effective_route, "dependant", None) or dependant
        if dependant is not None:
            calls = [dep.call for dep in dependant.dependencies]
            assert write_policy in calls, f"{route.path} has no write policy"
        else:  # the OpenAPI document and other plain routes: read-only
            assert set(route.methods or ()) <= SAFE_METHODS, f"{route.path} writes without the policy"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(_app())


@pytest.mark.parametrize(("method", "path"), _writes(_app()))
def test_cross_site_writes_are_refused(client: TestClient, method: str, path: str) -> None:
    reply = client.request(method, path, headers={"Origin": "https://evil.example", TOKEN_HEADER: TOKEN})
    assert reply.status_code == 403, reply.text
    reply = client.request(method, path, headers={"Sec-Fetch-Site": "cross-site", TOKEN_HEADER: TOKEN})
    assert reply.status_code == 403, reply.text


@pytest.mark.parametrize(("method", "path"), _writes(_app()))
def test_writes_without_the_token_are_refused(client: TestClient, method: str, path: str) -> None:
    assert client.request(method, path).status_code == 401
    assert client.request(method, path, headers={TOKEN_HEADER: "wrong"}).status_code == 403
    # A form field works as well as the header (pages post forms).
    reply = client.request(method, path, data={"token": "wrong"})
    assert reply.status_code == 403


@pytest.mark.parametrize(("method", "path"), _writes(_app()))
def test_with_the_token_the_request_reaches_the_route(client: TestClient, method: str, path: str) -> None:
    reply = client.request(method, path, headers={TOKEN_HEADER: TOKEN})
    assert reply.status_code not in (401, 403), (path, reply.text)
    assert reply.status_code != 500, (path, reply.text)  # 503 here: this test app has no schema
