"""Unguessable links that cannot be listed (issue 12 item 6): plans are listed only when saved as
listed, ledgers are addressed by slug (a numeric /l/{n} answers 410 Gone whether or not ledger n
exists), and with KVLEDGER_WRITE_TOKEN set every list needs the token (header, `token` query
parameter, or the cookie POST /unlock sets) while a record's own link stays open."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.settings import Settings

from .saved_support import (  # noqa: F401
    PLAN_DOC,
    add_deployment,
    add_ledger,
    backend,
    database_url,
    ledger,
    make_client,
    settings,
    with_token,
)
from .support import TestClient

TOKEN = {"X-KVLedger-Token": "s3cret"}
LISTS = ("/p", "/p.json", "/d", "/d.json", "/api/v1/deployments", "/d/dep", "/d/dep.json", "/d/dep/export.json")


@pytest.fixture
def token_client(settings: Settings) -> Iterator[TestClient]:  # noqa: F811
    add_deployment(settings, "dep")
    add_ledger(settings, "dep", ledger(note="boot"))
    with make_client(with_token(settings, "s3cret")) as client:
        yield client


def test_old_numeric_ledger_addresses_answer_410_for_every_number(settings: Settings) -> None:  # noqa: F811
    add_deployment(settings, "dep")
    stored = add_ledger(settings, "dep", ledger())
    with make_client(settings) as client:
        answers = {n: client.get(f"/l/{n}.json") for n in (stored, stored + 1000)}
        assert {r.status_code for r in answers.values()} == {410}
        assert answers[stored].json() == answers[stored + 1000].json()  # nothing about which numbers exist
        assert "no longer addressed by number" in answers[stored].json()["error"]["message"]
        page = client.get(f"/l/{stored}")
        assert page.status_code == 410 and "/l/&lt;slug&gt;" in page.text
        address = client.get("/d/dep.json").json()["ledgers"][0]["url"]
        slug = address.rsplit("/", 1)[1]
        assert len(slug) >= 22 and not slug.isdigit()
        assert client.get(address).status_code == 200 and client.get(f"{address}.json").json()["slug"] == slug


def test_every_list_needs_the_token_and_each_way_of_giving_it_works(token_client: TestClient) -> None:
    for path in LISTS:
        assert token_client.get(path).status_code == 401, path
        assert token_client.get(path, headers={"X-KVLedger-Token": "nope"}).status_code == 401, path
        assert token_client.get(path, headers=TOKEN).status_code == 200, path
        assert token_client.get(path, params={"token": "s3cret"}).status_code == 200, path
    assert "needs the server's token" in token_client.get("/p.json").json()["error"]["message"]


def test_a_records_own_link_stays_open_without_the_token(token_client: TestClient) -> None:
    saved = token_client.post("/api/v1/plans", json=PLAN_DOC, headers=TOKEN, params={"listed": "true"}).json()
    assert token_client.get(saved["url"]).status_code == 200
    assert token_client.get(saved["url"] + ".json").json()["listed"] is True
    address = token_client.get("/d/dep.json", headers=TOKEN).json()["ledgers"][0]["url"]
    assert token_client.get(address).status_code == 200 and token_client.get(address + ".json").status_code == 200
    assert saved["slug"] not in token_client.get("/").text  # the home page's list is a list too
    assert saved["slug"] in token_client.get("/", headers=TOKEN).text


def test_a_browser_unlocks_the_lists_with_a_cookie(token_client: TestClient) -> None:
    page = token_client.get("/d")
    assert page.status_code == 401 and 'id="unlock-form"' in page.text and 'value="/d"' in page.text
    assert token_client.post("/unlock", data={"token": "nope", "next": "/d"}).status_code == 403
    unlocked = token_client.post("/unlock", data={"token": "s3cret", "next": "/d"}, follow_redirects=False)
    assert unlocked.status_code == 303 and unlocked.headers["location"] == "/d"
    cookie = unlocked.headers["set-cookie"]
    assert "kvledger_token=" in cookie and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert token_client.get("/d").status_code == 200  # the client keeps the cookie
    # The cookie opens lists only: it never authorises a write (that needs the header or form field).
    assert token_client.post("/api/v1/plans", json=PLAN_DOC).status_code == 401
    away = token_client.post("/unlock", data={"token": "s3cret", "next": "//evil.example/"}, follow_redirects=False)
    assert away.headers["location"] == "/p"


def test_unlisted_is_the_default_everywhere(settings: Settings) -> None:  # noqa: F811
    with make_client(settings) as client:
        hidden = client.post("/api/v1/plans", json=PLAN_DOC).json()
        shown = client.post("/api/v1/plans", json=PLAN_DOC, params={"listed": "true", "title": "shown"}).json()
        form = client.post("/plans", data={"plan": "/plan?model=llama-3.1-8b", "listed": "1", "title": "by form"},
                           follow_redirects=False)
        unlisted_form = client.post("/plans", data={"plan": "/plan?model=llama-3.1-8b", "title": "quiet"},
                                    follow_redirects=False)
        assert form.status_code == unlisted_form.status_code == 303
        slugs = {p["slug"] for p in client.get("/p.json").json()["plans"]}
        assert shown["slug"] in slugs and form.headers["location"].rsplit("/", 1)[1] in slugs
        assert hidden["slug"] not in slugs and unlisted_form.headers["location"].rsplit("/", 1)[1] not in slugs
        assert (hidden["listed"], shown["listed"]) == (False, True)
