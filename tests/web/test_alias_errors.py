"""An error of an input given by another name (a vLLM flag, an environment variable, a `vllm serve`
flag or a --config YAML key) names what the user wrote, and may add our name: before, a link with
`gpu-memory-utilization=1.7` was answered "Input should be less than or equal to 1" under
`engine.gpu_memory_utilization`, and a serve command's `--gpu-memory-utilization 1.7` the same."""

from __future__ import annotations

import json
import re
from html import unescape
from pathlib import Path

import pytest

from app.cli import main

from .support import TestClient

UTIL = "1.7 is out of range: give a fraction in (0, 1] (read as util: engine.gpu_memory_utilization)"


def _slot(html: str, key: str) -> str:
    found = re.search(rf'<span class="field-error" id="err-{key}" role="alert">([^<]*)</span>', html)
    assert found is not None, key
    return unescape(found.group(1))


@pytest.mark.parametrize(("written", "value", "key", "message"), [
    ("gpu-memory-utilization", "1.7", "util", f"gpu-memory-utilization {UTIL}"),
    ("gpu_memory_utilization", "1.7", "util", f"gpu_memory_utilization {UTIL}"),
    ("tensor-parallel-size", "0", "tp",
     "tensor-parallel-size 0 is out of range: give a whole number from 1 to 4,096 (read as tp: layout.tp)"),
    ("VLLM_MLA_DISABLE", "maybe", "mla_off",
     "VLLM_MLA_DISABLE: expected true or false, got 'maybe' (read as mla_off: engine.mla_disable)"),
    ("max-model-len", "0", "max_model_len", "max-model-len 0 is out of range: give a whole number from 1 to "
                                            "100,000,000 (read as max_model_len: engine.max_model_len)"),
])
def test_a_what_if_key_written_by_another_name_is_named_so(
    client: TestClient, written: str, value: str, key: str, message: str
) -> None:
    answer = client.get("/plan.json", params={written: value})
    assert answer.status_code == 422
    assert answer.json()["error"] == {"field": written, "message": message}
    page = client.get("/plan", params={written: value})
    assert page.status_code == 422
    assert _slot(page.text, key) == message  # beside the knob's own input


def test_our_own_key_keeps_its_field_path_and_the_last_value_decides(client: TestClient) -> None:
    own = client.get("/plan.json", params={"util": "1.7"}).json()["error"]
    assert own == {"field": "engine.gpu_memory_utilization",
                   "message": "gpu_memory_utilization 1.7 is out of range: give a fraction in (0, 1]"}
    last = client.get("/plan.json?util=0.5&gpu-memory-utilization=1.7").json()["error"]
    assert last["field"] == "gpu-memory-utilization"
    assert client.get("/plan.json?gpu-memory-utilization=1.7&util=0.5").status_code == 200


PLAN = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}}


@pytest.mark.parametrize(("section", "field", "message"), [
    ({"serve": "vllm serve meta-llama/Llama-3.1-8B --gpu-memory-utilization 1.7"}, "serve --gpu-memory-utilization",
     "--gpu-memory-utilization 1.7 is out of range: give a fraction in (0, 1] (read as engine.gpu_memory_utilization)"),
    ({"serve": "vllm serve meta-llama/Llama-3.1-8B -tp 0"}, "serve -tp",
     "-tp 0 is out of range: give a whole number from 1 to 4,096 (read as layout.tp)"),
    ({"vllm_config": "gpu_memory_utilization: 1.7\n"}, "vllm_config gpu_memory_utilization",
     "gpu_memory_utilization 1.7 is out of range: give a fraction in (0, 1] (read as engine.gpu_memory_utilization)"),
    # the document's own field wins over the command's flag: its error is the document's
    ({"serve": "vllm serve x --gpu-memory-utilization=0.5", "engine": {"gpu_memory_utilization": 1.2}},
     "engine.gpu_memory_utilization", "gpu_memory_utilization 1.2 is out of range: give a fraction in (0, 1]"),
])
def test_a_command_lines_flag_is_named_as_written_on_the_api_and_the_cli(
    client: TestClient, tmp_path: Path, capsys: pytest.CaptureFixture[str], section: dict[str, object], field: str,
    message: str,
) -> None:
    doc = {**PLAN, **section}
    answer = client.post("/api/v1/plan", json=doc)
    assert answer.status_code == 422
    assert answer.json()["error"] == {"field": field, "message": message}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert main(["plan", str(path)]) == 2
    assert capsys.readouterr().err.strip() == f"kvledger: error: {field}: {message}"


def test_the_simulators_plan_names_the_key_as_written(client: TestClient) -> None:
    """/sim takes the plan page's what-if keys (under `plan.`): the same rule."""
    answer = client.get("/sim.json", params={"gpu-memory-utilization": "1.7"})
    assert answer.status_code == 422
    assert answer.json()["error"] == {"field": "plan.gpu-memory-utilization",
                                      "message": f"gpu-memory-utilization {UTIL}"}
    page = client.get("/sim", params={"gpu-memory-utilization": "1.7"})
    assert page.status_code == 422 and f"gpu-memory-utilization {UTIL}" in unescape(page.text)


def test_a_query_parameters_bound_is_said_in_our_words_too(client: TestClient) -> None:
    """FastAPI's own parameter checks went out in pydantic's words ("String should have at most 300
    characters"): the error mapping states them as the document's bounds are (app.schema_bounds)."""
    answer = client.post("/api/v1/plans", params={"title": "x" * 301}, json=PLAN,
                         headers={"Sec-Fetch-Site": "same-origin"})
    assert answer.status_code == 422
    assert answer.json()["error"] == {"field": "title",
                                      "message": "title is too long (301 characters): give at most 300 characters"}
