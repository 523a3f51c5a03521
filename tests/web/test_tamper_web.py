"""A record changed outside KV Ledger says so on every read (issue 12 item 5): the saved plan's
page, its .json and the API; a ledger's page, .json and the history list. On SQLite and
PostgreSQL, with the database's UPDATE guard lifted the way someone with write access could."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from app.db.records import CHANGED_OUTSIDE
from app.settings import Settings

from .saved_support import PLAN_DOC, add_deployment, add_ledger, backend, client, database_url, ledger, settings  # noqa: F401
from .support import TestClient

BANNER = "This record was changed outside KV Ledger."


def _tamper(url: str, table: str, statement: str) -> None:
    engine = create_engine(url)
    with engine.begin() as conn:
        on = f" ON {table}" if engine.dialect.name == "postgresql" else ""
        conn.execute(text(f"DROP TRIGGER {table}_append_only{on}"))
        conn.execute(text(statement))
    engine.dispose()


def _save(client: TestClient) -> str:  # noqa: F811
    reply = client.post("/api/v1/plans", json=PLAN_DOC)
    assert reply.status_code == 201, reply.text[:300]
    slug: str = reply.json()["slug"]
    return slug


def test_an_intact_plan_says_so(client: TestClient) -> None:  # noqa: F811
    slug = _save(client)
    assert BANNER not in client.get(f"/p/{slug}").text
    assert client.get(f"/p/{slug}/export/serve").status_code == 200
    for url in (f"/p/{slug}.json", f"/api/v1/plans/{slug}"):
        assert client.get(url).json()["integrity"] == {"intact": True, "message": None}


@pytest.mark.parametrize("change", ["title = 'forged'", "summary = document", "core_version = '9.9.9'"])
def test_a_changed_plan_says_so_on_every_read(
    client: TestClient, database_url: str, change: str  # noqa: F811
) -> None:
    slug = _save(client)
    _tamper(database_url, "saved_plan", f"UPDATE saved_plan SET {change} WHERE slug = '{slug}'")
    page = client.get(f"/p/{slug}")
    assert page.status_code == 200, page.text[:300]
    assert BANNER in page.text
    assert "catalogue or defaults" not in page.text  # the old, wrong blame
    export = client.get(f"/p/{slug}/export/serve")
    assert export.status_code == 409 and "changed outside KV Ledger" in export.text
    for url in (f"/p/{slug}.json", f"/api/v1/plans/{slug}"):
        reply = client.get(url)
        assert reply.status_code == 200, reply.text[:300]
        assert reply.json()["integrity"] == {"intact": False, "message": CHANGED_OUTSIDE}
        assert all(CHANGED_OUTSIDE not in w or w.startswith(CHANGED_OUTSIDE)
                   for w in reply.json()["recomputed"]["explanation"])


@pytest.mark.parametrize(
    ("table", "change"),
    [("ledger_rank", "UPDATE ledger_rank SET kv_bytes = 1"), ("ledger", "UPDATE ledger SET note = 'forged'"),
     ("ledger", "UPDATE ledger SET source_log = 'INFO forged'")],
)
def test_a_changed_ledger_says_so(
    client: TestClient, settings: Settings, database_url: str, table: str, change: str  # noqa: F811
) -> None:
    add_deployment(settings, "dep")
    add_ledger(settings, "dep", ledger(note="boot"))
    reply = client.get("/d/dep.json")
    assert reply.json()["ledgers"][0]["integrity"]["intact"] is True
    address = reply.json()["ledgers"][0]["url"]
    _tamper(database_url, table, change)
    page = client.get(address)
    assert page.status_code == 200 and BANNER in page.text
    body = client.get(f"{address}.json").json()
    assert body["integrity"] == {"intact": False, "message": CHANGED_OUTSIDE}
    history = client.get("/d/dep.json").json()["ledgers"][0]
    # The history list reads no log text; it verifies everything else.
    assert history["integrity"]["intact"] is ("source_log" in change)
    assert ("changed outside KV Ledger" in client.get("/d/dep").text) is ("source_log" not in change)
