"""Sizing with VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (the plan's engine.allow_long_max_model_len): before, a
target max_model_len above the model's derived length was refused by sizing with no way round it
(gemma-2-9b-it states max_position_embeddings 8192; a 16k target). Now the sizing document, the
`kvledger size` flag and the /size page's box plan it as vLLM starts it (vllm/config/model.py
_get_and_verify_max_len @28be48fa9: a warning instead of the ValueError), and every option carries the
variable to its plan link and its environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from .support import TestClient

DOC: dict[str, Any] = {
    "model": {"catalogue": "gemma-2-9b-it"}, "target": {"max_model_len": 16384, "concurrency": 1},
    "gpus": ["H100 80GB"], "max_gpus": 1,
    "options": {"kv_cache_dtype": ["auto"], "quantization": [None], "engines_per_gpu": [1]},
}  # fmt: skip
QUERY = (
    "model=gemma-2-9b-it&max_model_len=16384&concurrency=1&gpus=H100+80GB&max_gpus=1&kv_dtype=auto&quant=none&engines=1"
)


def test_api_refuses_then_sizes_with_the_variable(client: TestClient) -> None:
    refused = client.post("/api/v1/size", json=DOC)
    assert refused.status_code == 422
    body = refused.text
    assert "target.max_model_len" in body and "derived maximum length 8,192" in body
    assert "engine.allow_long_max_model_len: true in the sizing document" in body
    assert "--allow-long-max-model-len to kvledger size" in body and "on the plan page" not in body

    answer = client.post("/api/v1/size", json={**DOC, "engine": {"allow_long_max_model_len": True}})
    assert answer.status_code == 200
    out = answer.json()
    (note,) = out["notes"]
    assert note.startswith("max_model_len 16,384 is more than the model's derived maximum length 8,192")
    option = out["options"][0]
    assert option["plan"]["engine"]["allow_long_max_model_len"] is True
    assert option["env"] == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    assert "--max-model-len 16384" in option["flags"]
    link = dict(parse_qsl(urlsplit(option["url"]).query))
    assert link["allow_long"] == "true" and link["max_model_len"] == "16384"
    # the option's link reopens the same plan: the plan page runs it at 16k with the variable
    plan = client.get("/plan.json?" + urlsplit(option["url"]).query).json()
    assert plan["engine"]["max_model_len"] == 16384 and plan["tokens"] == option["tokens"]


def test_size_page_box_and_json_twin(client: TestClient) -> None:
    refused = client.get(f"/size?{QUERY}")
    assert "derived maximum length 8,192" in refused.text and 'id="f-allow_long"' in refused.text
    page = client.get(f"/size?{QUERY}&allow_long=false&allow_long=true")  # a ticked box after its hidden "false"
    assert page.status_code == 200 and 'id="size-options"' in page.text and "size-note" in page.text
    assert 'id="f-allow_long" name="allow_long" value="true" checked' in page.text
    twin = client.get(f"/size.json?{QUERY}&allow_long=true").json()
    assert twin["document"]["engine"] == {"allow_long_max_model_len": True}
    assert twin["options"][0]["env"] == {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}
    unticked = client.get(f"/size.json?{QUERY}&allow_long=false")
    assert unticked.status_code == 422 and "target.max_model_len" in unticked.text
    bad = client.get(f"/size.json?{QUERY}&allow_long=yes")
    assert bad.status_code == 422 and "allow_long" in bad.text and "expected true or false" in bad.text


def test_cli_size_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli import main

    path = tmp_path / "size.json"
    path.write_text(json.dumps(DOC))
    assert main(["size", str(path)]) == 2
    assert "--allow-long-max-model-len to kvledger size" in capsys.readouterr().err
    assert main(["size", str(path), "--allow-long-max-model-len"]) == 0
    table = capsys.readouterr().out
    assert "env: VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in table and "allow_long=true" in table
    assert "derived maximum length 8,192" in table.splitlines()[1]
    assert main(["size", str(path), "--allow-long-max-model-len", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["options"][0]["plan"]["engine"]["allow_long_max_model_len"] is True
