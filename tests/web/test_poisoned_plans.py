"""A stored plan that can no longer be computed opens with an explanation, never a 500 (issue 12
item 2): rows written straight into the database (bypassing the validator), on SQLite and
PostgreSQL. And a save stores only what computes again from its stored form."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from sqlalchemy import create_engine, insert

from app.db.models import SavedPlan

from .saved_support import app, backend, client, database_url, settings  # noqa: F401
from .support import TestClient

POISONS: list[tuple[str, Any, Any]] = [
    ("digits", {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80 GiB"},
                "policy": {"avg_live_tokens": int("9" * 401)}}, {"blocks": 1}),
    ("not-a-document", {"model": 5}, {"blocks": 1}),
    ("summary-not-an-object", {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80 GiB"}}, [1, 2]),
    ("no-such-model", {"model": {"catalogue": "gone-model"}, "gpu": {"total": "80 GiB"}}, {}),
]


def _poison(url: str, slug: str, document: Any, summary: Any) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(insert(SavedPlan).values(
            slug=slug, parent_id=None, title="poisoned", document=document, summary=summary,
            core_version="0.0.1", created_at=dt.datetime.now(dt.UTC)))
    engine.dispose()


@pytest.mark.parametrize(("name", "document", "summary"), POISONS, ids=[p[0] for p in POISONS])
def test_a_poisoned_row_opens_with_an_explanation(
    client: TestClient, database_url: str, name: str, document: Any, summary: Any  # noqa: F811
) -> None:
    slug = f"poisoned-{name}"
    _poison(database_url, slug, document, summary)
    page = client.get(f"/p/{slug}")
    assert page.status_code == 200, page.text[:500]
    assert "cannot recompute this plan" in page.text or "This saved plan cannot be shown" in page.text
    for url in (f"/p/{slug}.json", f"/api/v1/plans/{slug}"):
        reply = client.get(url)
        assert reply.status_code == 200, (url, reply.text[:500])
        body = reply.json()
        assert body["slug"] == slug
        assert body["recomputed"]["error"] or name == "summary-not-an-object", body


def test_an_absurd_document_is_never_stored(client: TestClient) -> None:  # noqa: F811
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80 GiB"},
           "policy": {"avg_live_tokens": int("9" * 401)}}
    reply = client.post("/api/v1/plans", content=json.dumps(doc),
                        headers={"Content-Type": "application/json"})
    assert reply.status_code == 422, reply.text[:300]
    assert "avg_live_tokens" in reply.json()["error"]["field"]
    assert client.get("/p.json").json().get("plans", []) == [] or all(
        p["title"] != "poisoned" for p in client.get("/p.json").json()["plans"])
