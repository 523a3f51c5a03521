"""The JSON API: results equal the .json twins, errors are 422/413 JSON, never a stack trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from app.services import plan_query, plans
from app.web.app import create_app
from app.web.plan.examples import SEED000

from .support import TestClient, make_settings

DATA = Path(__file__).resolve().parents[1] / "data"


def test_post_plan_returns_result_and_canonical_url(client: TestClient) -> None:
    doc = plan_query.plan_from_query({"model": "llama-3.1-70b", "tp": "4", "util": "0.85"})
    body = client.post("/api/v1/plan", json=doc).json()
    assert body["url"] == "/plan?model=llama-3.1-70b&tp=4&util=0.85"
    twin = client.get("/plan.json?model=llama-3.1-70b&tp=4&util=0.85").json()
    assert twin == body


# tp=1 (and pp=1) stay in the URL where TP1 does not start at the query's own settings (20 GiB,
# fp8 KV): a URL without it would open at another layout (opening.opening_layout, opening.opening_pp)
@pytest.mark.parametrize("query", ["tp=2", "gpu=20GiB&kv_dtype=fp8&model=qwen3-8b&pp=1&tp=1", "live=12000&pp=2&tp=2"])
def test_json_twin_equals_api_result(client: TestClient, query: str) -> None:
    twin = client.get(f"/plan.json?{query}").json()
    assert twin["url"] == f"/plan?{query}"
    params = dict(p.split("=", 1) for p in query.split("&"))
    api = client.post("/api/v1/plan", json=plan_query.plan_from_query(params)).json()
    assert api == twin


def test_post_plan_of_measured_document_gets_a_base_url(client: TestClient) -> None:
    body = client.post("/api/v1/plan", json=SEED000).json()
    assert body["url"].startswith("/plan?base=")
    twin = client.get(body["url"].replace("/plan?", "/plan.json?")).json()
    assert twin["tokens"] == body["tokens"] and twin["binding_rank"] == body["binding_rank"] == "2"


def test_bad_document_is_422_with_field(client: TestClient) -> None:
    response = client.post("/api/v1/plan", json={"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80 GiB"},
                                                 "engine": {"gpu_memory_utilization": 1.7}})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["field"] == "engine.gpu_memory_utilization"
    assert error["message"]


def test_non_object_body_is_422(client: TestClient) -> None:
    response = client.post("/api/v1/plan", content=b"[1, 2]", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert set(response.json()["error"]) == {"field", "message"}


def test_json_twin_errors_are_json(client: TestClient) -> None:
    response = client.get("/plan.json?util=abc")
    assert response.status_code == 422
    assert response.json()["error"]["field"] == "util"


def test_models_search(client: TestClient) -> None:
    models = client.get("/api/v1/models", params={"q": "qwen3 8b"}).json()["models"]
    assert models[0]["slug"] == "qwen3-8b"


def test_import_log_api_text_and_upload(client: TestClient) -> None:
    text = (DATA / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text()
    body = client.post("/api/v1/import/log", data={"text": text}).json()
    assert [r["rank"] for r in body["runs"][0]["ranks"]] == ["TP0", "TP1", "TP2", "TP3"]
    assert body["plans"][0]["url"].startswith("/plan?base=")
    upload = client.post("/api/v1/import/log", files={"file": ("x.log", text.encode(), "text/plain")}).json()
    assert upload["runs"] == body["runs"]
    assert client.get("/api/v1/import/log").status_code == 405


def test_compare_api(client: TestClient) -> None:
    a = plan_query.plan_from_query({"tp": "2"})
    b = plan_query.plan_from_query({"tp": "2", "util": "0.8"})
    body = client.post("/api/v1/compare", json={"a": a, "b": b}).json()
    assert body["results"]["tokens"]["delta"] < 0
    bad = client.post("/api/v1/compare", json={"a": a, "b": {"gpu": {"total": "x"}}})
    assert bad.status_code == 422
    assert bad.json()["error"]["field"].startswith("b")


@pytest.fixture
def small_app() -> FastAPI:
    return create_app(make_settings(max_body_bytes=2048, max_log_bytes=8192))


def test_body_over_the_cap_is_413(small_app: FastAPI) -> None:
    with TestClient(small_app) as client:
        big = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80GiB"}, "title": "x" * 4000}
        response = client.post("/api/v1/plan", content=json.dumps(big), headers={"content-type": "application/json"})
        assert response.status_code == 413
        assert "MiB" in response.json()["error"]["message"]


def test_log_uploads_have_their_own_larger_cap(small_app: FastAPI) -> None:
    with TestClient(small_app) as client:
        ok = client.post("/api/v1/import/log", data={"text": "INFO nothing here\n" * 200})
        assert ok.status_code == 200
        too_big = client.post("/api/v1/import/log", files={"file": ("x.log", b"x" * 20000, "text/plain")})
        assert too_big.status_code == 413
        page = client.post("/import", data={"text": "y" * 20000})
        assert page.status_code == 413
        assert "larger than" in page.text


def test_streamed_body_without_length_is_counted(small_app: FastAPI) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(10):
            yield b"x" * 1000

    with TestClient(small_app) as client:
        response = client.post("/api/v1/plan", content=chunks(), headers={"content-type": "application/json"})
        assert response.status_code == 413


def test_unexpected_errors_are_plain_500s(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(plans, "run_plan", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        page = client.get("/plan?tp=2")
        api = client.post("/api/v1/plan", json={})
    assert page.status_code == 500 and api.status_code == 500
    for text in (page.text, api.text):
        assert "secret internals" not in text and "Traceback" not in text
    assert "reference" in api.json()["error"]["message"]


def test_pasted_log_larger_than_one_mib_is_accepted(client: TestClient) -> None:
    text = (DATA / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text()
    padding = "INFO 01-01 00:00:00 [core.py:1] nothing to see here\n" * 40_000
    response = client.post("/api/v1/import/log", data={"text": padding + text})
    assert response.status_code == 200
    assert len(response.json()["runs"][0]["ranks"]) == 4


def test_plan_check_true_adds_the_checks_list(client: TestClient) -> None:
    # issue 17, item 10: POST /api/v1/plan?check=true gates a deployment like `kvledger plan --check`
    engine = {"max_model_len": 8192, "kv_cache_memory_bytes": "1 TiB"}
    doc = {"model": {"kv_bytes_per_token": 131072}, "engine": engine,
           "ranks": [{"total": "80 GiB", "weights": "18 GiB", "non_torch": "2 GiB", "activation": "3 GiB"}]}
    body = client.post("/api/v1/plan?check=true", json=doc).json()
    assert body["checks_pass"] is False and body["url"]
    assert [c["check"] for c in body["checks"] if not c["ok"]] == ["rank_starts"]
    assert "checks" not in client.post("/api/v1/plan", json=doc).json()
    operation = client.get("/openapi.json").json()["paths"]["/api/v1/plan"]["post"]
    assert "check" in {p["name"] for p in operation["parameters"]}
