"""User text is inert everywhere: autoescaped in HTML, escaped inside embedded JSON."""

from __future__ import annotations

import json
from pathlib import Path

from app.web.templating import RenderEvent

from .support import HX, TestClient

PAYLOAD = "<img src=x onerror=window.__xss=1>"
DATA = Path(__file__).resolve().parents[1] / "data"


def test_payload_in_plan_fields_is_escaped(client: TestClient) -> None:
    for key in ("gpu", "reserve", "vllm", "kv_bytes", "model", "kv_dtype"):
        for headers in ({}, HX):
            response = client.get("/plan", params={key: PAYLOAD}, headers=headers)
            assert response.status_code == 422, key
            assert PAYLOAD not in response.text, key


def test_payload_in_search_compare_and_import_is_escaped(client: TestClient) -> None:
    assert PAYLOAD not in client.get("/", params={"q": PAYLOAD}).text
    assert PAYLOAD not in client.get("/compare", params={"a": PAYLOAD, "b": PAYLOAD}).text
    assert PAYLOAD not in client.post("/import", data={"text": PAYLOAD}).text
    assert PAYLOAD not in client.post("/start/config", data={"config": PAYLOAD}).text
    assert PAYLOAD not in client.post("/start/nvidia-smi", data={"text": PAYLOAD}).text


def test_model_name_from_a_config_is_escaped_in_html_and_chart_json(
    client: TestClient, renders: list[RenderEvent]
) -> None:
    config = json.loads((DATA / "configs" / "llama31-8b.json").read_text())
    name = "</script><script>window.__xss=1</script>"
    response = client.post("/start/config", data={"config": json.dumps(config), "name": name})
    assert response.status_code == 200
    assert name not in response.text
    assert "</script><script>" not in response.text
    assert renders[-1].context["result"]["model"]["name"] == name


def test_rank_labels_from_a_log_are_escaped(client: TestClient) -> None:
    text = (DATA / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text()
    response = client.post("/import", data={"text": text + "\n" + PAYLOAD + "\n"})
    assert response.status_code == 200
    assert PAYLOAD not in response.text


# --- security headers on every response, 500s included (issue 12 item 8) ------------------------


def test_every_response_carries_the_security_headers_even_a_500() -> None:
    from fastapi import APIRouter

    from app.web.app import create_app
    from app.web.headers import HEADERS

    from .support import TestClient as Client
    from .support import make_settings

    app = create_app(make_settings())
    boom = APIRouter()

    @boom.get("/boom")
    def _boom_page() -> None:
        raise RuntimeError("a bug")

    @boom.get("/api/v1/boom")
    def _boom_api() -> None:
        raise RuntimeError("a bug")

    app.include_router(boom)
    with Client(app, raise_server_exceptions=False) as c:
        replies = [c.get("/boom"), c.get("/api/v1/boom"), c.get("/nowhere"), c.get("/"),
                   c.post("/api/v1/plan", json={"model": {}}), c.get("/openapi.json")]
    assert [r.status_code for r in replies] == [500, 500, 404, 200, 422, 200]
    for reply in replies:
        for name, value in HEADERS:
            assert reply.headers.get(name.decode()) == value.decode(), (reply.url, name)
    assert "a bug" not in replies[0].text and "Traceback" not in replies[1].text
