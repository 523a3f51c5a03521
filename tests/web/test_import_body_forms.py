"""Issue 17 item 21: `/api/v1/import/log` and `/api/v1/import/nvidia-smi` take the same body forms —
JSON `{"text": …}`, a multipart form with a `text` field or a `file` upload, and an urlencoded
form — with the same result for each, and /openapi.json documents all three."""

from __future__ import annotations

from pathlib import Path

import pytest

from .support import TestClient

DATA = Path(__file__).resolve().parents[1] / "data"
TEXTS = {
    "/api/v1/import/log": DATA / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log",
    "/api/v1/import/nvidia-smi": DATA / "nvidia-smi" / "table-r550-4gpu.txt",
}
FORMS = ("json", "multipart-text", "multipart-file", "urlencoded")


def _post(client: TestClient, path: str, form: str, text: str) -> object:
    if form == "json":
        return client.post(path, json={"text": text})
    if form == "multipart-text":
        return client.post(path, data={"text": text}, files={"unused": ("", b"")})
    if form == "multipart-file":
        return client.post(path, files={"file": ("x.txt", text.encode(), "text/plain")})
    return client.post(path, data={"text": text})


@pytest.mark.parametrize("path", sorted(TEXTS))
def test_every_form_gives_the_same_result(client: TestClient, path: str) -> None:
    text = TEXTS[path].read_text(encoding="utf-8")
    results = []
    for form in FORMS:
        response = _post(client, path, form, text)
        assert response.status_code == 200, (form, response.text)  # type: ignore[attr-defined]
        body = response.json()  # type: ignore[attr-defined]
        body.pop("plans", None)  # plan links carry fresh base ids; the parse is what must agree
        results.append(body)
    assert all(r == results[0] for r in results[1:])


@pytest.mark.parametrize("path", sorted(TEXTS))
def test_bad_bodies_are_422_naming_what_is_wrong(client: TestClient, path: str) -> None:
    for response, field in (
        (client.post(path, content=b"{not json", headers={"content-type": "application/json"}), "body"),
        (client.post(path, json=["text"]), "body"),
        (client.post(path, json={"text": 5}), "text"),
        (client.post(path, content=b"hello", headers={"content-type": "text/plain"}), "body"),
    ):
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["field"] == field and error["message"]


def test_the_log_route_takes_model_in_every_form(client: TestClient) -> None:
    text = TEXTS["/api/v1/import/log"].read_text(encoding="utf-8")
    by_json = client.post("/api/v1/import/log", json={"text": text, "model": "qwen3-30b-a3b"}).json()
    by_form = client.post("/api/v1/import/log", data={"text": text, "model": "qwen3-30b-a3b"}).json()
    by_json.pop("plans"), by_form.pop("plans")
    assert by_json == by_form
    bad = client.post("/api/v1/import/log", json={"text": text, "model": "no-such-model"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "model"


def test_openapi_documents_the_three_forms(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    for path in TEXTS:
        body = spec["paths"][path]["post"]["requestBody"]["content"]
        assert set(body) == {"application/json", "multipart/form-data", "application/x-www-form-urlencoded"}
        assert "text" in body["application/json"]["schema"]["properties"]
        assert body["multipart/form-data"]["schema"]["properties"]["file"]["format"] == "binary"


@pytest.mark.parametrize("path", list(TEXTS))
def test_a_misspelt_json_key_is_named(client: TestClient, path: str) -> None:
    # {"log": "…"} used to read as an empty text: "paste a vLLM startup log or choose a log file"
    resp = client.post(path, json={"log": TEXTS[path].read_text(encoding="utf-8")})
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["field"] == "log" and "unknown field" in error["message"] and "text" in error["message"]
