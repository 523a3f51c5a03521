"""Every POST route of the app's router (enumerated from `app.routes`, so a new route cannot miss
it) answers a hostile JSON body with a 4xx naming what is wrong, never a 500: JSON nested past the
decoder's recursion limit, and a string holding an unpaired UTF-16 surrogate ("\\ud800", valid
JSON, not encodable as UTF-8)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.routing import iter_route_contexts

from app.db.session import upgrade_to_head
from app.web.app import create_app

from .support import TestClient, make_settings

DEEP = b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
SURROGATE = b'{"text": "\\ud800 Available KV cache memory: 10.55 GiB", "model": "\\udfff", "title": "\\ud800"}'


def _posts(tmp_path: Path) -> tuple[TestClient, list[str]]:
    url = f"sqlite:///{tmp_path / 'kvledger.sqlite3'}"
    upgrade_to_head(url)
    app = create_app(make_settings(database_url=url))
    paths = []
    for route in iter_route_contexts(app.routes):
        if "POST" in (getattr(route, "methods", None) or ()):
            paths.append(re.sub(r"\{[^}]+\}", "x", str(route.path_format)))
    assert "/api/v1/import/log" in paths and "/api/v1/plan" in paths
    return TestClient(app, raise_server_exceptions=False), paths


@pytest.mark.parametrize("body", [DEEP, SURROGATE], ids=["deep", "surrogate"])
def test_no_post_route_fails_on_a_hostile_json_body(tmp_path: Path, body: bytes) -> None:
    client, paths = _posts(tmp_path)
    with client:
        for path in paths:
            resp = client.post(path, content=body,
                               headers={"content-type": "application/json", "origin": "http://testserver"})
            assert resp.status_code < 500, (path, resp.status_code, resp.text[:300])


def test_deep_json_is_refused_naming_the_body(client: TestClient) -> None:
    resp = client.post("/api/v1/import/log", content=DEEP, headers={"content-type": "application/json"})
    assert resp.status_code == 422, resp.text
    assert resp.json()["error"]["field"] == "body"
    assert "too deeply" in resp.json()["error"]["message"]


def test_a_lone_surrogate_is_read_as_a_replacement_character(client: TestClient) -> None:
    resp = client.post("/api/v1/import/log", content=SURROGATE, headers={"content-type": "application/json"})
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "model", resp.text  # \udfff: no such model
    body = b'{"text": "\\ud800 Available KV cache memory: 10.55 GiB"}'
    resp = client.post("/api/v1/import/log", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == 200, resp.text
    run = resp.json()["runs"][0]
    assert run["ranks"][0]["kv_bytes"] == round(10.55 * 2**30)
    metrics = client.post("/api/v1/import/metrics", content=b'{"text": "\\ud800"}',
                          headers={"content-type": "application/json"})
    assert metrics.status_code == 422 and metrics.json()["error"]["field"] == "metrics", metrics.text
