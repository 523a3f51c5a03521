"""A config that states none of vLLM's length keys (Falcon-Mamba-7B, a pure Mamba model): vLLM starts
with max_model_len 2048 and a warning (vllm/config/model.py `_get_and_verify_max_len` @28be48fa9,
"Assuming the model's maximum length is 2048"). The home page's catalogue link to it opened a 422
("required: the model does not state max_position_embeddings"); kv-bytes and sizing refused it too."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.cli import main
from app.ingest.catalogue import get_model


def test_the_catalogue_link_opens_a_plan_at_vllms_assumed_length(client: TestClient) -> None:
    assert 'href="/plan?model=falcon-mamba-7b"' in client.get("/").text
    page = client.get("/plan?model=falcon-mamba-7b")
    assert page.status_code == 200
    plan = client.get("/plan.json?model=falcon-mamba-7b").json()
    assert plan["engine"]["max_model_len"] == 2048
    assert any("vLLM assumes 2,048" in note for note in plan["notes"])
    stated = client.get("/plan.json?model=falcon-mamba-7b&max_model_len=8192").json()
    assert stated["engine"]["max_model_len"] == 8192
    assert not any("vLLM assumes" in note for note in stated["notes"])


def test_kv_bytes_and_sizing_take_the_same_length(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(dict(get_model("falcon-mamba-7b").config)))
    assert main(["kv-bytes", str(config), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_model_len"] == 2048
    size = tmp_path / "size.json"
    size.write_text(json.dumps({"model": {"catalogue": "falcon-mamba-7b"}, "target": {"concurrency": 8},
                                "gpus": ["H100 80GB"]}))
    assert main(["size", str(size), "--json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["target"]["max_model_len"] == 2048


def test_a_max_model_len_above_the_models_length_is_refused_under_the_field(client: TestClient) -> None:
    """vLLM refuses max_model_len 65,536 for Qwen3-14B (max_position_embeddings 40,960) unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm/config/model.py _get_and_verify_max_len @28be48fa9);
    the plan was computed at 65,536 before."""
    api = client.get("/plan.json?model=qwen3-14b&max_model_len=65536")
    assert api.status_code == 422
    assert "derived maximum length 40,960" in api.text and "max_model_len" in api.text
    page = client.get("/plan?model=qwen3-14b&max_model_len=65536")
    assert page.status_code == 422 and "derived maximum length 40,960" in page.text
    assert client.get("/plan.json?model=qwen3-14b&max_model_len=40960").status_code == 200
