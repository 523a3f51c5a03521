"""Saved plans over HTTP, on SQLite and PostgreSQL: save → link → open gives identical numbers,
versions link to their parents, saved plans cannot be changed through any endpoint (nor by an
UPDATE: the database refuses it), and today's recomputation explains any difference."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from app.db import repository as repo
from app.db.session import make_engine, open_database, run_write
from app.services import plans
from app.services.base_documents import MemoryBaseStore
from app.settings import Settings
from app.web import querystring
from app.web.templating import RenderEvent

from .saved_support import (
    PLAN_DOC,
    XSS,
    app,
    backend,
    client,
    database_url,
    last_render,
    settings,
)
from .support import TestClient

__all__ = ["app", "backend", "client", "database_url", "settings"]  # fixtures

SEED000: dict[str, Any] = {
    "title": "Seed 000",
    "model": {"kv_bytes_per_token": 131072, "name": "seed-000"},
    "layout": {"tp": 2},
    "engine": {"gpu_memory_utilization": 0.9, "max_model_len": 12000, "block_size": 16},
    "ranks": [
        {"label": "0", "total": "80 GiB", "free_at_start": "79.3 GiB", "weights": "18 GiB", "non_torch": "4 GiB",
         "cuda_graphs": "3 GiB", "activation": "3 GiB"},
        {"label": "1", "total": "80 GiB", "free_at_start": "79.3 GiB", "weights": "18 GiB", "non_torch": "4 GiB",
         "cuda_graphs": "3 GiB", "activation": "5 GiB"},
    ],
}


def _save(client: TestClient, doc: dict[str, Any], **params: str) -> dict[str, Any]:
    response = client.post("/api/v1/plans", json=doc, params=params)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_save_link_open_gives_identical_numbers(client: TestClient, renders: list[RenderEvent]) -> None:
    saved = _save(client, PLAN_DOC)
    expected = plans.run_plan(PLAN_DOC)  # what `kvledger plan --json` prints
    assert saved["url"] == f"/p/{saved['slug']}" and len(saved["slug"]) >= 22  # ≥ 128 bits
    assert {k: v for k, v in saved.items() if k in expected} == expected

    opened = client.get(f"/p/{saved['slug']}.json").json()
    assert {k: opened[k] for k in expected} == expected
    assert opened["slug"] == saved["slug"] and opened["parent"] is None and opened["core_version"]
    assert opened["recomputed"]["same"] is True and opened["recomputed"]["differences"] == []
    assert client.get(f"/api/v1/plans/{saved['slug']}").json() == opened

    page = client.get(saved["url"])
    assert page.status_code == 200
    context = last_render(renders, "pages/saved_plan.html").context
    assert context["result"] == expected
    assert context["recomputed"].same
    assert next(k["value"] for k in context["kpis"]) == f"{expected['tokens']:,}"
    assert f"{expected['tokens']:,}" in page.text


def test_fresh_client_sees_the_same_numbers(settings: Settings, client: TestClient) -> None:
    saved = _save(client, SEED000)
    from .saved_support import make_client

    with make_client(settings) as other:  # another app process on the same database
        opened = other.get(f"/p/{saved['slug']}.json").json()
    assert opened["tokens"] == saved["tokens"] and opened["ranks"] == saved["ranks"]
    assert opened["title"] == "Seed 000"


def test_versions_link_to_their_parent(client: TestClient, renders: list[RenderEvent]) -> None:
    parent = _save(client, PLAN_DOC, title="first")
    page = client.get(parent["url"])
    edit_url = last_render(renders, "pages/saved_plan.html").context["edit_url"]
    assert edit_url.startswith("/plan?") and client.get(edit_url).status_code == 200

    response = client.post("/plans", data={"plan": edit_url + "&util=0.85", "parent": parent["slug"], "title": ""},
                           follow_redirects=False)
    assert response.status_code == 303, response.text
    child_url = response.headers["location"]
    child = client.get(child_url + ".json").json()
    assert child["parent"] == parent["slug"] and child["versions"] == [parent["slug"], child["slug"]]
    assert child["engine"]["gpu_memory_utilization"] == 0.85 and child["tokens"] != parent["tokens"]
    assert child["title"] == "first"  # the document's title carries over

    page = client.get(parent["url"])
    assert child["slug"] in page.text  # "newer versions made from this one"
    api_child = _save(client, PLAN_DOC, parent=child["slug"], title="third")
    assert client.get(api_child["url"] + ".json").json()["versions"] == [parent["slug"], child["slug"],
                                                                        api_child["slug"]]


def test_edit_of_a_measured_plan_survives_a_restart(client: TestClient, app: Any,
                                                    renders: list[RenderEvent]) -> None:
    saved = _save(client, SEED000)
    client.get(saved["url"])
    edit_url = last_render(renders, "pages/saved_plan.html").context["edit_url"]
    assert "base=" in edit_url and client.get(edit_url).status_code == 200
    app.state.bases = MemoryBaseStore()  # the in-memory base store is lost on restart
    response = client.post("/plans", data={"plan": edit_url + "&util=0.8", "parent": saved["slug"]},
                           follow_redirects=False)
    assert response.status_code == 303, response.text
    child = client.get(response.headers["location"] + ".json").json()
    assert child["parent"] == saved["slug"] and child["engine"]["gpu_memory_utilization"] == 0.8


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE", "POST"])
def test_saved_plans_cannot_be_modified_through_any_endpoint(client: TestClient, method: str) -> None:
    saved = _save(client, PLAN_DOC)
    before = client.get(saved["url"] + ".json").json()
    paths = [saved["url"], saved["url"] + ".json"]
    if method != "POST":
        paths.append(f"/api/v1/plans/{saved['slug']}")
    for path in paths:
        response = client.request(method, path, json={**PLAN_DOC, "layout": {"tp": 8}})
        assert response.status_code == 405, (method, path, response.text)
        assert "Allow" in response.headers
    api = client.request(method, saved["url"] + ".json")
    assert "immutable" in api.json()["error"]["message"]
    assert client.get(saved["url"] + ".json").json() == before


def test_the_database_refuses_updates_to_saved_plans(settings: Settings, client: TestClient) -> None:
    saved = _save(client, PLAN_DOC)
    engine = make_engine(settings.database_url)
    try:
        with pytest.raises(DBAPIError), engine.begin() as conn:
            conn.execute(text("UPDATE saved_plan SET title = 'changed' WHERE slug = :s"), {"s": saved["slug"]})
    finally:
        engine.dispose()
    assert client.get(saved["url"] + ".json").json()["title"] != "changed"


def test_todays_numbers_differ_is_explained(settings: Settings, client: TestClient,
                                            renders: list[RenderEvent]) -> None:
    result = plans.run_plan(PLAN_DOC)
    old = {**result, "tokens": result["tokens"] + 1000, "core_version": "0.0.9"}
    db = open_database(settings)
    try:
        slug = run_write(db.write, lambda s: repo.save_plan(s, PLAN_DOC, old, "0.0.9", "old"))
    finally:
        db.dispose()
    opened = client.get(f"/p/{slug}.json").json()
    assert opened["tokens"] == result["tokens"] + 1000  # the saved numbers are shown
    recomputed = opened["recomputed"]
    assert recomputed["same"] is False
    assert {"key": "tokens", "saved": result["tokens"] + 1000, "today": result["tokens"], "delta": -1000} in \
        recomputed["differences"]
    words = " ".join(recomputed["explanation"])
    assert "core 0.0.9" in words and "tokens" in words
    page = client.get(f"/p/{slug}")
    assert "Today&#39;s numbers differ" in page.text or "Today's numbers differ" in page.text
    assert not last_render(renders, "pages/saved_plan.html").context["recomputed"].same


def test_bad_input_is_a_clear_422_never_a_500(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/api/v1/plans", json={"model": {"catalogue": "no-such-model"}, "gpu": {"total": "1 GiB"}})
    assert response.status_code == 422 and response.json()["error"]["message"]
    assert client.post("/api/v1/plans", json=[1, 2]).status_code == 422
    assert client.post("/api/v1/plans", content=b"{not json", headers={"content-type": "application/json"}
                       ).status_code == 422
    response = client.post("/plans", data={"plan": ""})
    assert response.status_code == 422
    error = last_render(renders, "pages/saved_plans.html").context["error"]
    assert error["field"] == "plan" and f'id="err-plan" role="alert">{error["message"]}' in response.text
    response = client.post("/plans", data={"plan": "/plan?util=7&model=llama-3.1-8b"})
    error = last_render(renders, "pages/saved_plans.html").context["error"]
    assert response.status_code == 422 and error["field"] == "plan" and error["message"].endswith("(util)")
    response = client.post("/api/v1/plans", json=PLAN_DOC, params={"parent": "no-such-slug"})
    assert response.status_code == 404
    assert client.get("/p/no-such-slug").status_code == 404
    assert client.get("/p/no-such-slug.json").json()["error"]["message"]


def test_titles_render_inert(client: TestClient) -> None:
    saved = _save(client, {**PLAN_DOC, "title": XSS}, listed="true")
    for path in (saved["url"], "/p"):
        html = client.get(path).text
        assert XSS not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert client.get(saved["url"] + ".json").json()["title"] == XSS  # stored as given


def test_saved_list_and_its_twin(client: TestClient, renders: list[RenderEvent]) -> None:
    first = _save(client, PLAN_DOC, title="one", listed="true")
    second = _save(client, PLAN_DOC, title="two", parent=first["slug"], listed="true")
    hidden = _save(client, PLAN_DOC, title="three", parent=first["slug"])  # unlisted: the default
    assert hidden["listed"] is False and client.get(hidden["url"]).status_code == 200
    listed = client.get("/p.json").json()["plans"]
    assert hidden["slug"] not in {p["slug"] for p in listed} and hidden["slug"] not in client.get("/p").text
    assert [p["slug"] for p in listed][:2] == [second["slug"], first["slug"]]
    assert listed[0]["parent"] == first["slug"]
    assert client.get("/p").status_code == 200
    assert client.post("/plans", data={"plan": "nonsense"}).status_code == 422
    context = last_render(renders, "pages/saved_plans.html").context
    assert [p.slug for p in context["plans"]][:2] == [second["slug"], first["slug"]]  # the list stays


def test_demo_data_is_seeded_once_and_an_unmigrated_database_says_what_to_run(tmp_path: Any) -> None:
    from app.services.demo_data import prepare_database, seed_demo

    from .saved_support import make_client

    settings = Settings(database_url=f"sqlite:///{tmp_path / 'demo.sqlite3'}", demo_data=True)
    prepare_database(settings)
    prepare_database(settings)  # a second start: migrations are current, nothing is seeded twice
    assert seed_demo(settings) is False
    with make_client(settings) as client:
        plans = client.get("/p.json").json()["plans"]
        assert len(plans) == 3 and sum(1 for p in plans if p["parent"]) == 1
        history = client.get("/d/demo-3090-box.json").json()
        assert history["total"] == 3
        assert any("CUDA-graph memory now subtracted" in r for c in history["changes"] for r in c["readings"])
        for plan in plans:
            assert client.get(plan["url"] + ".json").json()["recomputed"]["same"] is True

    bare = Settings(database_url=f"sqlite:///{tmp_path / 'bare.sqlite3'}", demo_data=False)
    with make_client(bare) as client:
        response = client.get("/p.json")
        assert response.status_code == 503 and "kvledger db upgrade" in response.json()["error"]["message"]
        assert client.get("/d").status_code == 503
        assert client.post("/api/v1/plans", json=PLAN_DOC).status_code == 503


def test_the_router_lifespan_opens_and_disposes_the_database(settings: Settings) -> None:
    from app.db.session import Database

    from .saved_support import make_client

    with make_client(settings) as client:
        app = client.app
        assert isinstance(app.state.saved_db, Database)  # type: ignore[attr-defined]  # opened at startup
        assert client.get("/p.json").status_code == 200
    assert app.state.saved_db is None  # type: ignore[attr-defined]  # disposed at shutdown


def test_a_saved_plan_with_many_ranks_renders_like_the_plan_page(client: TestClient,
                                                                  renders: list[RenderEvent]) -> None:
    doc = {"model": {"catalogue": "llama-3.1-405b"}, "gpu": {"total": "80 GiB"}, "layout": {"tp": 8, "pp": 16}}
    saved = _save(client, doc)
    assert len(saved["ranks"]) == 128
    page = client.get(saved["url"])
    assert page.status_code == 200
    context = last_render(renders, "pages/saved_plan.html").context
    assert set(context["charts"]) >= {"pool", "dist"}  # the distribution view past MAX_BARS, as on /plan
    assert 'id="chart-dist-data"' in page.text and '<svg class="pool-svg"' in page.text


def test_the_what_if_of_a_saved_plan_saves_as_its_new_version(client: TestClient,
                                                              renders: list[RenderEvent]) -> None:
    """Issue 17 item 17: the "Edit as a what-if" page names the plan it edits (`from`), keeps it over
    slider ticks, and its own Save button makes a new version of it: no address to paste."""
    parent = _save(client, PLAN_DOC, title="first")
    client.get(parent["url"])
    edit_url = last_render(renders, "pages/saved_plan.html").context["edit_url"]
    assert f"from={parent['slug']}" in edit_url
    page = client.get(edit_url + "&util=0.85")
    assert page.status_code == 200 and "Save as a new version" in page.text
    form = re.search(r'<form id="save-plan".*?</form>', page.text, re.S)
    assert form is not None
    plan = html.unescape(re.search(r'name="plan" value="([^"]+)"', form[0])[1])  # type: ignore[index]
    assert f"from={parent['slug']}" in plan and "util=0.85" in plan
    tick = client.get(plan, headers={"HX-Request": "true", "HX-Target": "results"})
    assert f"from={parent['slug']}" in tick.headers["HX-Replace-Url"]  # a slider tick keeps it
    assert f'<a href="/p/{parent["slug"]}">' in page.text and f'<a href="/p/{parent["slug"]}">' in tick.text
    response = client.post("/plans", data={"plan": plan}, follow_redirects=False)  # only the page's own field
    assert response.status_code == 303, response.text
    child = client.get(response.headers["location"] + ".json").json()
    assert child["parent"] == parent["slug"] and child["versions"] == [parent["slug"], child["slug"]]
    assert child["engine"]["gpu_memory_utilization"] == 0.85 and child["title"] == "first"
    assert child["slug"] in client.get(parent["url"]).text
    # a `from` naming no saved plan is a clear error on the save, and no plan is stored
    missing = client.post("/plans", data={"plan": "/plan?from=nosuchplan&util=0.8"}, follow_redirects=False)
    assert missing.status_code in (404, 422) and "nosuchplan" in missing.text
    assert "from=" not in client.get("/plan?from=%3Cscript%3E&util=0.8").text.split("<body", 1)[1].split("plan-form")[0]


def test_the_default_plan_saves_from_its_own_page(client: TestClient) -> None:
    """The default plan's canonical address is a bare /plan (no query): its Save button posts that."""
    response = client.post("/plans", data={"plan": "/plan"}, follow_redirects=False)
    assert response.status_code == 303, response.text
    saved = client.get(response.headers["location"] + ".json").json()
    assert saved["tokens"] == client.get("/plan.json").json()["tokens"]
    assert client.post("/plans", data={"plan": "/sim"}).status_code == 422


def test_the_edit_link_of_a_saved_tp1_plan_opens_tp1(client: TestClient, renders: list[RenderEvent]) -> None:
    """A saved plan at TP1 that does not start (a 70B model on one H100): its edit link and every
    start lever on its page keep TP1 (a plan URL without TP opens at the smallest layout that starts:
    the edit link opened a TP4 plan, the fp8-KV lever a TP4 one)."""
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"name": "H100 80GB"}, "layout": {"tp": 1}}
    saved = _save(client, doc, title="one card")
    page = client.get(saved["url"]).text
    edit_url = last_render(renders, "pages/saved_plan.html").context["edit_url"]
    opened = client.get(edit_url.replace("/plan?", "/plan.json?")).json()
    assert opened["layout"]["tp"] == 1 and opened["tokens"] == saved["tokens"] == 0
    levers = [html.unescape(u) for u in re.findall(r'href="(/plan\?[^"]*(?:kv_dtype|quant)=fp8[^"]*)"', page)]
    assert levers and all("tp=1" in url for url in levers), levers


@pytest.mark.parametrize("layout", [(1, 1), (1, 2), (1, 4), (2, 2), (4, 1)])
def test_the_edit_link_is_the_canonical_url_of_the_saved_layout(
    client: TestClient, renders: list[RenderEvent], layout: tuple[int, int]
) -> None:
    """70B on H100s: TP1 and TP1 × PP2 do not start; TP1 × PP4, TP2 × PP2 and TP4 do. A saved plan's
    edit link opens its layout and is the URL the plan page and the API give that plan (one rule,
    `opening.layout_in_url`: a TP or PP of 1 is stated where the layout does not start). The saved
    page had its own rule (both stated wherever TP1 × PP1 does not start: pp=4&tp=1, pp=1&tp=4)."""
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"name": "H100 80GB"},
           "layout": {"tp": layout[0], "pp": layout[1]}}
    saved = _save(client, doc)
    client.get(saved["url"])
    edit_url = last_render(renders, "pages/saved_plan.html").context["edit_url"]
    opened = client.get(edit_url.replace("/plan?", "/plan.json?")).json()
    assert (opened["layout"]["tp"], opened["layout"]["pp"]) == layout and opened["tokens"] == saved["tokens"]
    assert opened["url"] == edit_url
    shareable = client.post("/api/v1/plan", json=doc).json()["url"]
    assert querystring.from_text(edit_url) == {**querystring.from_text(shareable), "from": saved["slug"]}, shareable
