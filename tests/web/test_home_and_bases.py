"""The home page lists the newest listed saved plans; base documents behind what-if URLs are durable."""

from __future__ import annotations

import html
import re
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


def test_a_pasted_config_without_a_name_is_titled_by_its_shape(client: TestClient) -> None:  # noqa: F811
    # the home page's config.json form, no name given, a config with no _name_or_path: the page was
    # titled "Plan from a stored document"
    config = (Path(__file__).resolve().parents[1] / "data" / "configs" / "llama31-8b.json").read_text()
    response = client.post("/start/config", data={"config": config, "gpu": "H100 80GB"}, follow_redirects=True)
    assert response.status_code == 200
    title = re.search(r"<h1>([^<]*)</h1>", response.text)
    assert title is not None
    assert html.unescape(title[1]) == "config.json model: 32 layers, 8 KV heads × 128, bfloat16"
