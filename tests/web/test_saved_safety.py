"""The write guard: cross-site writes are refused (Origin, Referer, Sec-Fetch-Site), scripts
without those headers pass, and a configured write token is required on every write (header or
form field) while reads of a record by its link stay open (the lists need it: test_listing.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from app.settings import Settings

from .saved_support import PLAN_DOC, log_text, make_client
from .support import TestClient

LOG = "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"
Write = Callable[[TestClient, dict[str, str]], int]


@pytest.fixture
def base_settings(tmp_path: Path) -> Settings:
    from app.services.demo_data import prepare_database

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'db.sqlite3'}", demo_data=False)
    prepare_database(settings)
    return settings


@pytest.fixture
def client(base_settings: Settings) -> Iterator[TestClient]:
    with make_client(base_settings) as test_client:
        assert test_client.post("/api/v1/deployments", json={"slug": "dep", "name": "Dep"}).status_code == 201
        yield test_client


def _writes() -> dict[str, Write]:
    return {
        "api-plan": lambda c, h: c.post("/api/v1/plans", json=PLAN_DOC, headers=h).status_code,
        "form-plan": lambda c, h: c.post("/plans", data={"plan": "/plan?model=llama-3.1-8b"}, headers=h,
                                         follow_redirects=False).status_code,
        "api-deployment": lambda c, h: c.post("/api/v1/deployments", json={"slug": f"d{len(h)}x", "name": "n"},
                                              headers=h).status_code,
        "form-deployment": lambda c, h: c.post("/d", data={"slug": f"f{len(h)}x", "name": "n"}, headers=h,
                                               follow_redirects=False).status_code,
        "form-ledger": lambda c, h: c.post("/d/dep/ledgers", data={"text": log_text(LOG)}, headers=h,
                                           follow_redirects=False).status_code,
        "api-ledger": lambda c, h: c.post("/api/v1/deployments/dep/ledgers", data={"text": log_text(LOG)},
                                          headers=h).status_code,
        "api-import": lambda c, h: c.post("/api/v1/deployments/import", json={"format": "nope"},
                                          headers=h).status_code,
    }


WRITES = _writes()
CROSS_SITE = {
    "origin": {"Origin": "http://evil.example"},
    "null-origin": {"Origin": "null"},
    "referer": {"Referer": "http://evil.example/page"},
    "sec-fetch-site": {"Sec-Fetch-Site": "cross-site"},
}


@pytest.mark.parametrize("write", sorted(WRITES))
@pytest.mark.parametrize("headers", sorted(CROSS_SITE))
def test_cross_site_writes_are_refused(client: TestClient, write: str, headers: str) -> None:
    before = client.get("/p.json").json(), client.get("/d.json").json(), client.get("/d/dep.json").json()["total"]
    assert WRITES[write](client, CROSS_SITE[headers]) == 403
    assert (client.get("/p.json").json(), client.get("/d.json").json(), client.get("/d/dep.json").json()["total"]) \
        == before


def test_the_refusal_says_why(client: TestClient) -> None:
    api = client.post("/api/v1/plans", json=PLAN_DOC, headers={"Origin": "http://evil.example"})
    assert "another site" in api.json()["error"]["message"]
    page = client.post("/d", data={"slug": "x", "name": "x"}, headers={"Origin": "http://evil.example"})
    assert page.status_code == 403 and "another site" in page.text


@pytest.mark.parametrize("write", sorted(WRITES))
def test_same_origin_and_script_writes_pass(client: TestClient, write: str) -> None:
    same = {"Origin": "http://testserver", "Sec-Fetch-Site": "same-origin", "Referer": "http://testserver/p"}
    assert WRITES[write](client, same) in (201, 303, 422)  # 422: the import body is deliberately invalid
    assert WRITES[write](client, {}) in (201, 303, 422)


@pytest.fixture
def token_client(base_settings: Settings) -> Iterator[TestClient]:
    with make_client(replace(base_settings, write_token="s3cret")) as test_client:
        assert test_client.post("/api/v1/deployments", json={"slug": "dep", "name": "Dep"},
                                headers={"X-KVLedger-Token": "s3cret"}).status_code == 201
        yield test_client


@pytest.mark.parametrize("write", sorted(WRITES))
def test_write_token_is_required(token_client: TestClient, write: str) -> None:
    assert WRITES[write](token_client, {}) == 401
    assert WRITES[write](token_client, {"X-KVLedger-Token": "wrong"}) == 403
    assert WRITES[write](token_client, {"X-KVLedger-Token": "s3cret"}) in (201, 303, 422)


def test_write_token_in_a_form_field_and_clear_messages(token_client: TestClient) -> None:
    missing = token_client.post("/api/v1/plans", json=PLAN_DOC)
    assert "X-KVLedger-Token" in missing.json()["error"]["message"]
    form = token_client.post("/plans", data={"plan": "/plan?model=llama-3.1-8b", "token": "s3cret"},
                             follow_redirects=False)
    assert form.status_code == 303
    wrong = token_client.post("/d", data={"slug": "x", "name": "x", "token": "nope"})
    assert wrong.status_code == 403 and "token is wrong" in wrong.text
    page = token_client.get("/p", headers={"X-KVLedger-Token": "s3cret"})  # a list: it needs the token too
    assert page.status_code == 200 and 'name="token"' in page.text  # the forms ask for it
