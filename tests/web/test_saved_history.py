"""Deployments, ledgers and their history over HTTP, on SQLite and PostgreSQL: create, import
logs as ledgers, the history chart with evidence readings, alerts, the ledger diff, export →
import round trip, size caps, and user text rendered inert."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from app.settings import Settings
from app.web.templating import RenderEvent

from .saved_support import (
    GIB,
    XSS,
    add_deployment,
    add_ledger,
    app,
    backend,
    client,
    database_url,
    last_render,
    ledger,
    log_text,
    make_client,
    rows,
    settings,
)
from .support import TestClient

__all__ = ["app", "backend", "client", "database_url", "settings"]  # fixtures

OLD_LOG = "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"
NEW_LOG = "21-v021plus-6x3090-tp4-cg-profiling.log"


def _create(client: TestClient, slug: str = "qwen-3090", name: str = "Qwen on 3090s") -> None:
    response = client.post("/api/v1/deployments", json={"slug": slug, "name": name, "model": "Qwen3-VL-30B",
                                                        "layout": "TP4", "hardware": "4× RTX 3090"})
    assert response.status_code == 201, response.text


def _import(client: TestClient, slug: str, log: str, **fields: str) -> dict[str, Any]:
    response = client.post(f"/api/v1/deployments/{slug}/ledgers", data={"text": log_text(log), **fields})
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def test_import_logs_and_read_the_history(client: TestClient, renders: list[RenderEvent]) -> None:
    _create(client)
    old = _import(client, "qwen-3090", OLD_LOG, captured_at="2025-10-02", note="before the upgrade")
    assert [r["rank"] for r in old["ranks"]] == ["TP0", "TP1", "TP2", "TP3"]
    assert old["ranks"][0]["kv_bytes"] == 2480343613 and old["evidence"]["tp"] == 4
    assert old["evidence"]["vllm_version"].startswith("0.10.2")
    assert "engine_min_of_workers" in old["note"]  # the parser's findings travel with the note

    response = client.post("/d/qwen-3090/ledgers", data={"text": log_text(NEW_LOG), "captured_at": "2026-05-14"},
                           follow_redirects=False)
    assert response.status_code == 303
    new_slug = response.headers["location"].rsplit("/", 1)[1]
    new_id = client.get(f"/l/{new_slug}.json").json()["id"]

    page = client.get("/d/qwen-3090")
    assert page.status_code == 200
    context = last_render(renders, "pages/deployment.html").context
    chart = context["chart"]
    names = ["rank TP0", "rank TP1", "rank TP2", "rank TP3", "tokens (binding rank)"]
    assert [t["name"] for t in chart["data"]] == names
    assert chart["data"][0]["y"] == [pytest.approx(2480343613 / GIB), pytest.approx(16879221473 / GIB)]
    assert chart["data"][4]["y"] == [6297 * 16, None]  # the engine's blocks × the implied block size
    notes = [a["hovertext"] for a in chart["layout"]["annotations"]]
    assert len(notes) == 1 and "CUDA-graph memory now subtracted from the budget" in notes[0]
    assert 'id="chart-history-data"' in page.text

    twin = client.get("/d/qwen-3090.json").json()
    assert [item["id"] for item in twin["ledgers"]] == [new_id, old["id"]]
    assert twin["changes"][0]["ledger"] == new_id and twin["changes"][0]["slug"] == new_slug
    assert [item["url"] for item in twin["ledgers"]] == [f"/l/{new_slug}", old["url"]]
    newer = client.get(f"/l/{new_slug}.json").json()
    assert (newer["previous"], newer["previous_slug"]) == (old["id"], old["slug"])
    ledger_page = client.get(f"/l/{new_slug}")
    assert ledger_page.status_code == 200 and "Available KV cache memory" in ledger_page.text  # the source log


def test_diff_every_row_on_every_rank(settings: Settings, client: TestClient, renders: list[RenderEvent]) -> None:
    add_deployment(settings, "dep")
    add_ledger(settings, "dep", ledger("0.20.1", ranks=rows(kv_gib=60, graph_mib=300)))
    add_ledger(settings, "dep", ledger("0.21.0", ranks=rows(kv_gib=58, graph_mib=2348, free_drop_rank=3)))
    b, a = (item["slug"] for item in client.get("/d/dep.json").json()["ledgers"])
    page = client.get(f"/diff?a={a}&b={b}&max_model_len=32768")
    assert page.status_code == 200
    view = last_render(renders, "pages/ledger_diff.html").context["view"]
    assert len(view.diff.ranks) == 8 and all(len(r.rows) == 11 for r in view.diff.ranks)
    assert page.text.count('data-row="') == 8 * 12
    twin = client.get(f"/diff.json?a={a}&b={b}&max_model_len=32768").json()
    assert twin["ranks"][1]["rows"]["kv_bytes"]["delta"] == -2 * GIB
    assert twin["min_kv_tokens"]["delta"] == 0 and twin["concurrency"]["before"] == pytest.approx(99_999 * 16 / 32768)
    assert twin["evidence_changes"] == [{"key": "vllm_version", "before": "0.20.1", "after": "0.21.0"}]
    readings = " ".join(twin["readings"])
    assert "CUDA-graph memory now subtracted from the budget" in readings
    assert "more complete profile, not a leak" in readings and "rank 3 lost 4.00 GiB" in readings


def test_alerts_on_the_newest_ledger(settings: Settings, client: TestClient) -> None:
    add_deployment(settings, "dep")
    tight = rows(kv_gib=68)  # free 79 − 8 − 0.5 − 0.3 − 2 − 68 GiB: reserve below the 0.9 GiB policy
    tight[5] = replace(tight[5], free_at_start_bytes=70 * GIB)
    add_ledger(settings, "dep", ledger(ranks=tight))
    alerts = client.get("/d/dep.json").json()["alerts"]
    codes = {a["code"] for a in alerts}
    assert {"free_at_start_spread", "reserve_below_policy", "free_below_requested"} <= codes
    assert "rank 5" in client.get("/d/dep").text


def test_export_import_round_trip_over_http(client: TestClient) -> None:
    _create(client, "src")
    _import(client, "src", OLD_LOG, note=XSS)
    _import(client, "src", NEW_LOG)
    exported = client.get("/d/src/export.json")
    assert exported.headers["content-disposition"].startswith("attachment")
    data = exported.json()
    response = client.post("/api/v1/deployments/import", json=data, params={"slug": "copy"})
    assert response.status_code == 201, response.text
    again = client.get("/d/copy/export.json").json()
    assert again["deployment"].pop("slug") == "copy" and data["deployment"].pop("slug") == "src"
    assert again == data

    upload = client.post("/d/import", data={"slug": "copy2"},
                         files={"file": ("export.json", json.dumps(client.get("/d/src/export.json").json()))},
                         follow_redirects=False)
    assert upload.status_code == 303 and upload.headers["location"] == "/d/copy2"
    taken = client.post("/api/v1/deployments/import", json=data, params={"slug": "copy"})
    assert taken.status_code == 409 and taken.json()["error"]["field"] == "slug"
    assert client.post("/api/v1/deployments/import", json={"format": "x"}).status_code == 422


def test_bad_input_is_inline_or_422_never_500(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/d", data={"slug": "Bad Slug!", "name": "x"})
    assert response.status_code == 422
    assert last_render(renders, "pages/deployments.html").context["error"]["field"] == "slug"
    assert client.post("/d", data={"slug": "ok", "name": ""}).status_code == 422
    assert client.post("/api/v1/deployments", json={"slug": "a.json", "name": "x"}).status_code == 422
    _create(client, "dep")
    taken = client.post("/api/v1/deployments", json={"slug": "dep", "name": "again"})
    assert taken.status_code == 409 and "already exists" in taken.json()["error"]["message"]
    form = client.post("/d", data={"slug": "dep", "name": "again"})  # the form shows it beside the field
    assert form.status_code == 409
    assert last_render(renders, "pages/deployments.html").context["error"]["field"] == "slug"
    for data, field in (({"text": ""}, "log"), ({"text": "hello\nworld\n"}, "log"),
                        ({"text": log_text(OLD_LOG), "captured_at": "yesterday"}, "captured_at"),
                        ({"text": log_text(OLD_LOG), "run": "7"}, "run")):
        response = client.post("/d/dep/ledgers", data=data)
        assert response.status_code == 422, (data, response.text)
        assert last_render(renders, "pages/deployment.html").context["error"]["field"] == field
        api = client.post("/api/v1/deployments/dep/ledgers", data=data)
        assert api.status_code == 422 and api.json()["error"]["field"] == field
    assert client.post("/api/v1/deployments/nope/ledgers", data={"text": log_text(OLD_LOG)}).status_code == 404
    assert client.get("/d/nope").status_code == 404 and client.get("/l/no-such-ledger").status_code == 404
    assert client.get("/diff?a=x&b=1").status_code == 422
    numbers = client.get("/diff.json?a=1&b=999999")  # ledger numbers are not addresses
    assert numbers.status_code == 422 and "no longer addresses" in numbers.json()["error"]["message"]
    assert client.get("/d/dep.json").json()["total"] == 0  # nothing half-stored


def test_user_text_renders_inert(settings: Settings, client: TestClient) -> None:
    _create(client, "xss", name=XSS)
    add_ledger(settings, "xss", ledger(XSS, note=XSS, ranks=[*rows(2), replace(rows(1)[0], rank=XSS)],
                                       log=XSS + "\n"))
    add_ledger(settings, "xss", ledger("0.21.0", ranks=rows(2)))
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    b, a = (item["slug"] for item in client.get("/d/xss.json").json()["ledgers"])
    for path in ("/d", "/d/xss", f"/l/{a}", f"/diff?a={a}&b={b}"):
        html = client.get(path).text
        assert XSS not in html and escaped in html, path
    chart = client.get("/d/xss").text.split('id="chart-history-data"', 1)[1].split("</script>", 1)[0]
    assert "<img" not in chart and "\\u0026lt;img" in chart  # escaped for plotly, then for HTML
    assert client.get(f"/l/{a}.json").json()["note"] == XSS  # stored as given


def test_oversized_logs_get_a_clear_413(database_url: str) -> None:
    settings = Settings(database_url=database_url, demo_data=False, max_body_bytes=16 * 1024, max_log_bytes=64 * 1024)
    from app.services.demo_data import prepare_database

    prepare_database(settings)
    with make_client(settings) as client:
        _create(client, "dep")
        big = "x" * (80 * 1024)
        page = client.post("/d/dep/ledgers", data={"text": big})
        assert page.status_code == 413 and "larger than" in page.text
        api = client.post("/api/v1/deployments/dep/ledgers", files={"file": ("big.log", big)})
        assert api.status_code == 413 and "larger than" in api.json()["error"]["message"]
        assert client.get("/d/dep.json").json()["total"] == 0


def test_a_large_pasted_log_under_the_cap_is_stored(client: TestClient) -> None:
    _create(client, "dep")
    padding = "INFO padding line that the parser ignores\n" * 30_000  # ≈ 1.3 MB, over multipart's 1 MiB default
    response = client.post("/d/dep/ledgers", data={"text": padding + log_text(OLD_LOG)}, follow_redirects=False)
    assert response.status_code == 303, response.text[:300]


def test_upload_a_log_file_and_ledgers_stay_immutable(client: TestClient) -> None:
    _create(client, "dep")
    response = client.post("/api/v1/deployments/dep/ledgers", data={"note": "uploaded"},
                           files={"file": ("boot.log", log_text(OLD_LOG).encode())})
    assert response.status_code == 201, response.text
    ledger_id = response.json()["slug"]
    assert response.headers["location"] == f"/l/{ledger_id}"
    before = client.get(f"/l/{ledger_id}.json").json()
    assert before["source_log"] == log_text(OLD_LOG) and before["note"].startswith("uploaded")
    for method in ("PUT", "PATCH", "DELETE"):
        for path in (f"/l/{ledger_id}", f"/l/{ledger_id}.json", "/d/dep"):
            assert client.request(method, path).status_code == 405, (method, path)
    assert client.get(f"/l/{ledger_id}.json").json() == before


def test_an_upgrade_that_renamed_the_engine_process_diffs_the_same_gpu(
    client: TestClient, renders: list[RenderEvent]
) -> None:
    """Qwen3-30B-A3B-2507 on one H100 under vLLM 0.10.2 (public/72: the rank prints as EngineCore_DP0)
    and 0.22.1 (public/71: `EngineCore`, #36822). The diff showed the one GPU as 'removed' and
    'added' with no delta on any row; it is one rank, compared row by row."""
    _create(client, "q3", "Qwen3-30B upgrade")
    old = _import(client, "q3", "public/72-v0102-qwen3-30b-a3b-2507-h100-tp1-native-sampler.log")
    new = _import(client, "q3", "public/71-v0221-qwen3-30b-a3b-2507-online-fp8-h100-tp1-cg-estimate.log")
    # Both single-GPU runs label their one rank TP0 (the process name stays evidence); the diff and the
    # chart pair the ranks by the same rule whatever the processes were called.
    assert [r["rank"] for r in old["ranks"]] == ["TP0"] and [r["rank"] for r in new["ranks"]] == ["TP0"]
    twin = client.get(f"/diff.json?a={old['slug']}&b={new['slug']}").json()
    (rank,) = twin["ranks"]
    assert (rank["rank"], rank["status"]) == ("TP0", "both")
    weights = rank["rows"]["weights_bytes"]
    assert (weights["before"], weights["after"]) == (old["ranks"][0]["weights_bytes"], new["ranks"][0]["weights_bytes"])
    assert weights["delta"] == new["ranks"][0]["weights_bytes"] - old["ranks"][0]["weights_bytes"] < 0
    assert rank["tokens"]["delta"] == 464656 - 94784
    assert not any("only one ledger" in r for r in twin["readings"])
    page = client.get(f"/diff?a={old['slug']}&b={new['slug']}")
    assert page.status_code == 200 and "TP0" in page.text
    assert '<span class="badge bad">' not in page.text
    # the history chart: one line for the one GPU, not two half lines
    assert client.get("/d/q3").status_code == 200
    chart = last_render(renders, "pages/deployment.html").context["chart"]
    (line,) = [t for t in chart["data"] if t["name"].startswith("rank ")]
    assert line["name"] == "rank TP0"
    kv = [side["ranks"][0]["kv_bytes"] / GIB for side in (old, new)]
    assert line["y"] == [pytest.approx(kv[0]), pytest.approx(kv[1])]


def test_a_run_or_length_in_other_digits_is_a_422_not_a_500(client: TestClient) -> None:
    """run='²' (str.isdigit() but not int()) and a 5,000-digit max_model_len (beyond int()'s 4,300)
    were 500s on the ledger import and the diff."""
    _create(client)
    for run in ("\u00b2", "\u0661", "9" * 5000):
        response = client.post("/api/v1/deployments/qwen-3090/ledgers", data={"text": log_text(OLD_LOG), "run": run})
        assert response.status_code == 422 and response.json()["error"]["field"] == "run", response.text
    a = _import(client, "qwen-3090", OLD_LOG)["slug"]
    b = _import(client, "qwen-3090", NEW_LOG)["slug"]
    for tokens in ("\u00b2", "9" * 5000):
        diff = client.get(f"/diff.json?a={a}&b={b}&max_model_len={tokens}")
        assert diff.status_code == 422 and diff.json()["error"]["field"] == "max_model_len", diff.text
    assert client.get(f"/diff.json?a={a}&b={b}&max_model_len=32768").status_code == 200
