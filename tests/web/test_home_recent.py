"""The home page lists the newest saved plans (rendered on the server, inert)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from .saved_support import backend, client, database_url, settings  # noqa: F401


def test_home_lists_recently_saved_plans(client: TestClient) -> None:  # noqa: F811
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "24 GiB"}}
    saved = client.post("/api/v1/plans?title=<img src=x onerror=alert(1)> box", json=doc)
    assert saved.status_code == 201, saved.text
    home = client.get("/")
    assert home.status_code == 200
    assert f'href="/p/{saved.json()["slug"]}"' in home.text
    assert "&lt;img src=x onerror=alert(1)&gt; box" in home.text and "<img src=x" not in home.text
