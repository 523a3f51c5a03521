"""The home page lists the newest listed saved plans; base documents behind what-if URLs are durable."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from app.settings import Settings

from .saved_support import backend, client, database_url, make_client, settings  # noqa: F401

DATA = Path(__file__).resolve().parents[1] / "data"


def test_home_lists_recently_saved_plans(client: TestClient) -> None:  # noqa: F811
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "24 GiB"}}
    saved = client.post("/api/v1/plans?title=<img src=x onerror=alert(1)> box&listed=true", json=doc)
    assert saved.status_code == 201, saved.text
    unlisted = client.post("/api/v1/plans", json=doc)
    home = client.get("/")
    assert home.status_code == 200
    assert f'href="/p/{saved.json()["slug"]}"' in home.text
    assert unlisted.json()["slug"] not in home.text  # listing is opt-in
    assert "&lt;img src=x onerror=alert(1)&gt; box" in home.text and "<img src=x" not in home.text


def test_base_documents_survive_a_restart(settings: Settings) -> None:  # noqa: F811
    """An imported log's what-if URL (`/plan?base=<id>`) still opens on a fresh app (another server)."""
    log = (DATA / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log").read_text(encoding="utf-8")
    with make_client(settings) as first:
        preview = first.post("/api/v1/import/log", data={"text": log})
        assert preview.status_code == 200, preview.text
        url = preview.json()["plans"][0]["url"]
        assert "base=" in url
        before = first.get(url.replace("/plan?", "/plan.json?")).json()
    with make_client(settings) as second:
        after = second.get(url.replace("/plan?", "/plan.json?"))
        assert after.status_code == 200, after.text
        assert after.json()["tokens"] == before["tokens"] and after.json()["blocks"] == before["blocks"]
