"""User text is inert everywhere: autoescaped in HTML, escaped inside embedded JSON."""

from __future__ import annotations

import json
from pathlib import Path

from app.web.templating import RenderEvent

from .support import HX, TestClient

PAYLOAD = "<img src=x onerror=window.__xss=1>"
DATA = Path(__file__).resolve().parents[1] / "data"


def test_payload_in_plan_fields_is_escaped(client: TestClient) -> None:
    for key in ("gpu_total", "reserve", "vllm", "kv_bytes", "model", "kv_dtype"):
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
