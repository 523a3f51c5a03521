"""Every route of the app's router that takes a body (enumerated from `app.routes`, every method
but GET/HEAD/OPTIONS, so a new route cannot miss it) answers a hostile body with a 4xx naming what
is wrong, never a 500: not JSON, a JSON array / string / number / null / true, JSON nested past the
decoder's recursion limit, a number past Python's digit limit or past a float, NaN and Infinity, a
string holding an unpaired UTF-16 surrogate ("\\ud800", valid JSON, not encodable as UTF-8), bytes
that are not UTF-8, wrong types in the usual fields, an empty body and a 1 MB string. A 400 or 422
carries a message (the JSON `error.message`, or the page's text)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts

from app.db.session import upgrade_to_head
from app.web.app import create_app

from .support import TestClient, make_settings

DEEP = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
SURROGATE = b'{"text": "\\ud800 Available KV cache memory: 10.55 GiB", "model": "\\udfff", "title": "\\ud800"}'
MB_STRING = json.dumps({"text": "x" * 2**20, "model": "y" * 2**20, "title": "z" * 2**20}).encode()
BODIES: dict[str, bytes] = {
    "deep": DEEP,
    "surrogate": SURROGATE,
    "not-json": b'{"model": {"catalogue": "llama-3.1-8b"}, ',
    "array": b'[{"model": {"catalogue": "llama-3.1-8b"}}, 1, "two"]',
    "string": b'"a plan"',
    "number": b"42",
    "null": b"null",
    "true": b"true",
    "empty": b"",
    "digits": b'{"text": 1' + b"9" * 5000 + b', "gpu": {"total": 1' + b"0" * 5000 + b"}}",
    "past-float": b'{"model": {"kv_bytes_per_token": 1e400}, "gpu": {"total": -1e400}, "ramp": [1e400]}',
    "nan": b'{"model": {"catalogue": NaN}, "gpu": {"total": NaN}, "text": NaN, "pool": {"blocks": Infinity}}',
    "not-utf8": b'{"text": "\xff\xfe\xfd", "model": "\xc3\x28"}',
    "wrong-types": b'{"model": 5, "gpu": "H100", "layout": [], "engine": "fast", "text": 5, "plan": 3, '
                   b'"a": [], "b": null, "pool": "big", "slug": {}, "name": [], "target": 7, "ranks": {}}',
    "one-mb-string": MB_STRING,
}
BODY_METHODS = ("POST", "PUT", "PATCH", "DELETE")


def _routes(tmp_path: Path) -> tuple[TestClient, list[tuple[str, str]]]:
    url = f"sqlite:///{tmp_path / 'kvledger.sqlite3'}"
    upgrade_to_head(url)
    app = create_app(make_settings(database_url=url))
    routes = []
    for route in iter_route_contexts(app.routes):
        for method in sorted(set(getattr(route, "methods", None) or ()) & set(BODY_METHODS)):
            routes.append((method, re.sub(r"\{[^}]+\}", "x", str(route.path_format))))
    paths = {path for _, path in routes}
    assert {"/api/v1/import/log", "/api/v1/plan", "/api/v1/simulate", "/api/v1/size"} <= paths
    assert ("PATCH", "/api/v1/plans/x") in routes
    return TestClient(app, raise_server_exceptions=False), routes


def _message(resp: Any) -> str:
    """The JSON `error.message`, or the page's text."""
    if str(resp.headers.get("content-type", "")).startswith("application/json"):
        body = resp.json()
        error = body.get("error") if isinstance(body, dict) else None
        return str(error.get("message") or "") if isinstance(error, dict) else ""
    return str(resp.text).strip()


@pytest.mark.parametrize("name", list(BODIES))
def test_no_route_fails_on_a_hostile_body(tmp_path: Path, name: str) -> None:
    client, routes = _routes(tmp_path)
    body = BODIES[name]
    with client:
        for method, path in routes:
            resp = client.request(method, path, content=body,
                                  headers={"content-type": "application/json", "origin": "http://testserver"})
            assert resp.status_code < 500, (name, method, path, resp.status_code, resp.text[:300])
            if resp.status_code in (400, 422):
                assert _message(resp), (name, method, path, resp.status_code, resp.text[:300])
                # not stopped at the CPU allowance (web/isolation.py): a bad body is refused at once
                assert "processor time" not in _message(resp), (name, method, path)


def test_deep_json_is_refused_naming_the_body(client: TestClient) -> None:
    resp = client.post("/api/v1/import/log", content=DEEP, headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == "body"
    assert "too deeply" in resp.json()["error"]["message"]


def test_a_lone_surrogate_is_read_as_a_replacement_character(client: TestClient) -> None:
    # SURROGATE's "title" is not a field of this body: refused by name (a misspelt key is not ignored)
    resp = client.post("/api/v1/import/log", content=SURROGATE, headers={"content-type": "application/json"})
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "title", resp.text
    body = b'{"text": "\\ud800 Available KV cache memory: 10.55 GiB", "model": "\\udfff"}'
    resp = client.post("/api/v1/import/log", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "model", resp.text  # \udfff: no such model
    body = b'{"text": "\\ud800 Available KV cache memory: 10.55 GiB"}'
    resp = client.post("/api/v1/import/log", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    run = resp.json()["runs"][0]
    assert run["ranks"][0]["kv_bytes"] == round(10.55 * 2**30)
    metrics = client.post("/api/v1/import/metrics", content=b'{"text": "\\ud800"}',
                          headers={"content-type": "application/json"})
    assert metrics.status_code == 422 and metrics.json()["error"]["field"] == "metrics", metrics.text
