"""The GPU field (a preset or a size), the checkpoint index on the config form, and nvidia-smi
totals mapped to presets: each walked through the routes a user takes."""

from __future__ import annotations

import json
import re
from pathlib import Path

from app.core.gpus import PRESETS, find_preset
from app.services import plans
from app.web.templating import RenderEvent

from .support import TestClient

DATA = Path(__file__).resolve().parents[1] / "data"
LLAMA8B_INDEX_TOTAL = 16_060_522_496  # Meta-Llama-3.1-8B model.safetensors.index.json (catalogue pin)


def _index(total: int) -> str:
    weight_map = {"lm_head.weight": "model-00004-of-00004.safetensors"}
    return json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map})


def test_the_plan_opens_on_a_real_card_with_every_preset_offered(client: TestClient) -> None:
    html = client.get("/plan").text
    field = re.search(r'<input[^>]*name="gpu"[^>]*>', html)
    assert field is not None and 'value="H100 80GB"' in field.group(0) and 'list="list-gpu"' in field.group(0)
    offered = re.findall(r'<option value="([^"]+)" label="[^"]*GiB usable', html)
    assert offered == [p.name for p in PRESETS]
    result = client.get("/plan.json").json()
    h100 = find_preset("H100 80GB")
    assert h100 is not None and result["ranks"][0]["total_bytes"] == h100.total_bytes
    assert any("H100 80GB preset" in note for note in result["notes"])


def test_free_text_sizes_and_product_strings_are_taken(client: TestClient) -> None:
    sized = client.get("/plan.json?gpu=75 GiB").json()
    assert sized["ranks"][0]["total_bytes"] == 75 * 1024**3 and sized["url"] == "/plan?gpu=75GiB"
    product = client.get("/plan.json", params={"gpu": "NVIDIA A100-SXM4-80GB"}).json()
    assert product["url"] == "/plan?gpu=A100+80GB" and product["ranks"][0]["total_bytes"] == round(79.15 * 2**30)


def test_an_older_gpu_total_link_still_opens(client: TestClient) -> None:
    response = client.get("/plan?gpu_total=40GiB&model=llama-3.1-8b", follow_redirects=False)
    assert response.status_code == 303 and response.headers["location"] == "/plan?gpu=40GiB"


def test_an_unknown_gpu_is_an_inline_error_naming_the_field(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan?gpu=H900")
    assert response.status_code == 422
    assert "unknown GPU 'H900'" in renders[-1].context["field_errors"]["gpu"]


def test_serve_form_takes_a_preset(client: TestClient, renders: list[RenderEvent]) -> None:
    command = "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192"
    response = client.post("/start/serve", data={"command": command, "gpu": "L40S"})
    assert response.status_code == 200
    l40s = find_preset("L40S 48GB")
    assert l40s is not None and renders[-1].context["result"]["ranks"][0]["total_bytes"] == l40s.total_bytes
    assert renders[-1].context["form"]["gpu"] == "L40S 48GB"


def test_config_form_takes_the_checkpoint_index(client: TestClient, renders: list[RenderEvent]) -> None:
    config = (DATA / "configs" / "llama31-8b.json").read_text()
    with_index = client.post("/start/config", data={"config": config, "gpu": "H100 80GB",
                                                    "index": _index(LLAMA8B_INDEX_TOTAL)})
    assert with_index.status_code == 200
    weights = renders[-1].context["result"]["ranks"][0]["weights_bytes"]
    # the same document through the API path (the index's total_size sizes the weights)
    doc = {"model": {"config": json.loads(config), "safetensors_index": json.loads(_index(LLAMA8B_INDEX_TOTAL))},
           "gpu": {"name": "H100 80GB"}}
    assert weights == plans.run_plan(doc, with_levers=False)["ranks"][0]["weights_bytes"]
    bigger = client.post("/start/config", files={"index_file": ("model.safetensors.index.json",
                                                                _index(2 * LLAMA8B_INDEX_TOTAL).encode())},
                         data={"config": config, "gpu": "H100 80GB"})
    assert bigger.status_code == 200
    assert renders[-1].context["result"]["ranks"][0]["weights_bytes"] > 1.9 * weights


def test_a_bad_index_is_an_error_naming_the_field(client: TestClient, renders: list[RenderEvent]) -> None:
    config = (DATA / "configs" / "llama31-8b.json").read_text()
    for index, field in (("{not json", "model.safetensors_index"), ("[1]", "model.safetensors_index"),
                         ('{"metadata": {"total_size": -5}}', "model.safetensors_index.metadata.total_size")):
        response = client.post("/start/config", data={"config": config, "index": index})
        assert response.status_code == 422, index
        assert renders[-1].template == "pages/home.html" and renders[-1].context["active_form"] == "config"
        assert renders[-1].context["error"]["field"] == field, index


def test_nvidia_smi_import_says_which_preset_total_it_took(client: TestClient, renders: list[RenderEvent]) -> None:
    text = (DATA / "nvidia-smi" / "table-r550-4gpu.txt").read_text()
    response = client.post("/start/nvidia-smi", data={"text": text, "model": "llama-3.1-70b"})
    assert response.status_code == 200
    notes = renders[-1].context["result"]["notes"]
    assert any(n.startswith("GPU 0, 1, 2, 3 — NVIDIA H100 80GB HBM3: the H100 80GB preset's total, 79.19 GiB")
               and "nvidia-smi says 79.65 GiB" in n for n in notes), notes
    assert "the H100 80GB preset&#39;s total" in response.text


def test_an_unsupported_architecture_is_shown_on_the_form(client: TestClient, renders: list[RenderEvent]) -> None:
    config = json.loads((DATA / "configs" / "llama31-8b.json").read_text())
    config["architectures"] = ["LlamaForCausalLm"]
    response = client.post("/start/config", data={"config": json.dumps(config)})
    assert response.status_code == 422
    error = renders[-1].context["error"]
    assert error["field"] == "model.config.architectures" and "nearest: LlamaForCausalLM" in error["message"]
    api = client.post("/api/v1/plan", json={"model": {"config": config}, "gpu": {"name": "H100 80GB"}})
    assert api.status_code == 422 and "LlamaForCausalLm" in api.text
