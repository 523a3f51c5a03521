"""Pages render the right template, block and context; htmx gets fragments; errors show inline."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from app.services import plan_query, plans
from app.web.templating import RenderEvent

from .support import HX, TestClient

DATA = Path(__file__).resolve().parents[1] / "data"
PLAN_BLOCKS = ["results", "summary", "field_errors_oob"]


def _pages(renders: list[RenderEvent]) -> list[tuple[str, str | None]]:
    return [(e.template, e.block) for e in renders]


def test_home_renders_examples_and_catalogue(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/")
    assert response.status_code == 200
    assert _pages(renders) == [("pages/home.html", None)]
    context = renders[0].context
    assert context["examples"] and all(e.url.startswith("/plan") for e in context["examples"])
    assert context["models"] and context["models"][0]["url"].startswith("/plan?model=")


def test_home_search_as_you_type_returns_only_the_results_block(
    client: TestClient, renders: list[RenderEvent]
) -> None:
    response = client.get("/?q=llama 70b", headers=HX)
    assert _pages(renders) == [("pages/home.html", "search_results")]
    assert "HX-Request" in response.headers["vary"]
    assert "<html" not in response.text
    assert any(m["slug"] == "llama-3.1-70b" for m in renders[0].context["models"])


def test_plan_page_context_is_the_planning_result(client: TestClient, renders: list[RenderEvent]) -> None:
    query = {"model": "llama-3.1-70b", "tp": "4"}
    response = client.get("/plan?model=llama-3.1-70b&tp=4")
    assert response.status_code == 200
    assert _pages(renders) == [("pages/plan.html", None)]
    context = renders[0].context
    expected = plans.run_plan(plan_query.plan_from_query(query))
    assert context["result"]["tokens"] == expected["tokens"]
    assert context["url"] == "/plan?model=llama-3.1-70b&tp=4"
    assert set(context["charts"]) == {"pool", "levers"}
    assert context["form"]["tp"] == "4"
    assert ("4", "4") in context["options"]["tp"]
    assert "HX-Request" in response.headers["vary"]


def test_slider_request_gets_fragment_with_canonical_replace_url(
    client: TestClient, renders: list[RenderEvent]
) -> None:
    response = client.get("/plan?model=llama-3.1-70b&tp=4&util=0.85&mnbt=8192&growth=0", headers=HX)
    assert response.status_code == 200
    assert _pages(renders) == [("pages/plan.html", b) for b in PLAN_BLOCKS]
    assert response.headers["HX-Replace-Url"] == "/plan?model=llama-3.1-70b&tp=4&util=0.85"
    assert "HX-Request" in response.headers["vary"]
    assert response.text.lstrip().startswith('<section id="results"')
    # the pool chart drawn, marked with the numbers' version; its figure is not sent as JSON (unread)
    version = re.search(r'id="kpis" data-version="([0-9a-f]+)"', response.text)
    assert version and f'id="chart-pool" class="chart chart-svg" data-drawn="{version[1]}"' in response.text
    assert '<svg class="pool-svg"' in response.text and 'chart-pool-data' not in response.text
    assert 'hx-swap-oob="true"' in response.text


def test_plain_get_with_every_field_redirects_to_the_canonical_url(client: TestClient) -> None:
    response = client.get(
        "/plan?model=llama-3.1-70b&tp=4&util=0.92&mnbt=8192&growth=0&pp=1&kv_bytes=&live=", follow_redirects=False
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/plan?model=llama-3.1-70b&tp=4"


def test_canonical_url_renders_the_same_numbers(client: TestClient, renders: list[RenderEvent]) -> None:
    first = client.get("/plan.json?tp=2&util=0.8&kv_dtype=fp8").json()
    page = client.get(urlsplit(first["url"]).path + "?" + urlsplit(first["url"]).query)
    assert page.status_code == 200
    assert renders[-1].context["result"]["tokens"] == first["tokens"]


def test_invalid_field_shows_inline_error_on_the_page(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan?util=1.5")
    assert response.status_code == 422
    context = renders[-1].context
    assert renders[-1].template == "pages/plan.html" and renders[-1].block is None
    assert "util" in context["field_errors"]
    assert context["result"] is None
    assert 'id="err-util"' in response.text


def test_invalid_field_in_htmx_request_is_a_fragment_with_the_error_slot(
    client: TestClient, renders: list[RenderEvent]
) -> None:
    response = client.get("/plan?tp=3", headers=HX)
    assert response.status_code == 422
    assert [e.block for e in renders] == PLAN_BLOCKS
    assert "tp" in renders[0].context["field_errors"]
    # the address bar shows what was asked (a reload shows this refusal), not the last good plan
    assert response.headers["HX-Replace-Url"] == "/plan?tp=3"
    assert "Traceback" not in response.text


def test_unknown_base_id_is_an_input_error(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan?base=ffffffffffffffff")
    assert response.status_code == 422
    assert renders[-1].context["error"]["field"] == "base"


def test_seed000_base_binds_on_rank_2(client: TestClient, renders: list[RenderEvent]) -> None:
    client.get("/plan?base=seed000")
    result = renders[-1].context["result"]
    assert result["binding_rank"] == "2"
    assert renders[-1].context["rows_kind"] == "measured"
    assert renders[-1].context["show_memory"] is False


def test_many_ranks_aggregate_and_defer_levers(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan?ranks=1024&tp=8")
    assert response.status_code == 200
    context = renders[-1].context
    assert set(context["charts"]) == {"pool", "dist"}
    assert len(context["charts"]["pool"].figure["data"][0]["x"]) <= 3
    assert len(context["rank_rows"]) < 30
    assert context["levers_url"].startswith("/plan/levers?")
    levers = client.get(context["levers_url"], headers=HX)
    assert levers.status_code == 200
    assert renders[-1].block == "levers"
    assert renders[-1].context["result"]["levers"]


def test_import_log_preview_and_plan_link(client: TestClient, renders: list[RenderEvent]) -> None:
    text = (DATA / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log").read_text()
    response = client.post("/import", data={"text": text})
    assert response.status_code == 200
    runs = renders[-1].context["runs"]
    assert [r["rank"] for r in runs[0]["run"]["ranks"]] == ["TP0", "TP1", "TP2", "TP3"]
    plan_url = runs[0]["plan_url"]
    assert plan_url.startswith("/plan?base=")
    client.get(plan_url)
    assert [r["rank"] for r in renders[-1].context["result"]["ranks"]] == ["TP0", "TP1", "TP2", "TP3"]


def test_import_upload_file(client: TestClient, renders: list[RenderEvent]) -> None:
    data = (DATA / "vllm-logs" / "01-v064-llama31-8b-rtx3090-tp1.log").read_bytes()
    response = client.post("/import", files={"file": ("rank0.log", data, "text/plain")})
    assert response.status_code == 200
    assert len(renders[-1].context["runs"]) >= 1


def test_import_empty_text_is_an_inline_error(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/import", data={"text": "  "})
    assert response.status_code == 422
    assert renders[-1].template == "pages/import.html"
    assert renders[-1].context["error"]["field"] == "log"


def test_start_from_config_redirects_to_a_plan(client: TestClient, renders: list[RenderEvent]) -> None:
    config = (DATA / "configs" / "llama31-8b.json").read_text()
    response = client.post("/start/config", data={"config": config, "gpu": "24GiB"}, follow_redirects=False)
    assert response.status_code == 303
    location = response.headers["location"]
    assert dict(parse_qsl(urlsplit(location).query)).keys() == {"base"}
    assert client.get(location).status_code == 200
    assert renders[-1].context["result"]["ranks"][0]["total_bytes"] == 24 * 1024**3


def test_start_from_bad_config_shows_the_error_on_home(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/start/config", data={"config": "{not json"})
    assert response.status_code == 422
    assert renders[-1].template == "pages/home.html"
    assert renders[-1].context["active_form"] == "config"
    assert renders[-1].context["error"]["field"] == "config"


def test_compare_page_rows_have_deltas(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/compare", params={"a": "/plan?tp=2", "b": "tp=2&util=0.8"})
    assert response.status_code == 200
    comparison = renders[-1].context["comparison"]
    assert comparison["results"]["tokens"]["delta"] < 0
    assert comparison["ranks"][0]["rows"]["requested_bytes"]["delta"] < 0


def test_compare_groups_ranks_with_the_same_rows(client: TestClient, renders: list[RenderEvent]) -> None:
    # TP8 × PP8: the 64 ranks fall into the stages that hold embeddings or the LM head and the rest.
    a, b = "model=llama-3.1-405b&tp=8&pp=8", "model=llama-3.1-405b&tp=8&pp=8&util=0.95"
    assert client.get("/compare", params={"a": a, "b": b}).status_code == 200
    context = renders[-1].context
    groups, ranks = context["rank_groups"], context["comparison"]["ranks"]
    assert sum(len(g["labels"]) for g in groups) == len(ranks) == 64
    assert 1 < len(groups) < 8
    by_label = {r["rank"]: r["rows"] for r in ranks}
    for group in groups:
        rows = {**group["changed"], **group["unchanged"]}
        assert all(by_label[label] == rows for label in group["labels"])  # every member has these rows
        assert set(group["changed"]) == {"requested_bytes", "headroom_bytes", "kv_bytes", "blocks", "tokens"}
        assert all(r["a"] == r["b"] for r in group["unchanged"].values())
    same = client.get("/compare", params={"a": a, "b": a})
    assert same.status_code == 200 and all(not g["changed"] for g in renders[-1].context["rank_groups"])


def test_compare_json_twin(client: TestClient) -> None:
    body = client.get("/compare.json", params={"a": "tp=2", "b": "tp=4"}).json()
    assert body["a_url"] == "/plan?tp=2" and body["b_url"] == "/plan?tp=4"
    assert "tokens" in body["results"]
    assert client.get("/compare.json", params={"a": "tp=2"}).status_code == 422


def test_docs_page_lists_the_api_without_swagger_cdn(client: TestClient) -> None:
    response = client.get("/docs")
    assert response.status_code == 200
    assert "/api/v1/plan" in response.text
    assert "cdn" not in response.text.lower()
    assert client.get("/openapi.json").json()["paths"]["/api/v1/plan"]["post"]


def test_not_found_is_a_page_and_json_under_api(client: TestClient) -> None:
    assert client.get("/nope").status_code == 404
    response = client.get("/api/v1/nope")
    assert response.status_code == 404
    assert response.json()["error"]["message"]


def test_start_from_nvidia_smi_plans_on_those_gpus(client: TestClient, renders: list[RenderEvent]) -> None:
    text = (DATA / "nvidia-smi" / "table-r550-4gpu.txt").read_text()
    response = client.post("/start/nvidia-smi", data={"text": text, "model": "llama-3.1-70b"})
    assert response.status_code == 200
    result = renders[-1].context["result"]
    assert result["layout"]["tp"] == 4 and len(result["ranks"]) == 4
    # nvidia-smi says 81559 MiB (85520809984 B); vLLM budgets against torch's total, the H100 preset's
    assert result["ranks"][0]["total_bytes"] == 85029615043


def test_start_from_empty_nvidia_smi_is_an_inline_error(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/start/nvidia-smi", data={"text": "no gpus here", "model": "llama-3.1-8b"})
    assert response.status_code == 422
    assert renders[-1].context["active_form"] == "nvidia_smi"


@pytest.mark.parametrize(
    "query",
    [
        "gpu=40GiB&model=llama-3.1-70b&tp=4",
        "gpu=16GiB&model=llama-3.1-70b&tp=2",
        "kv_bytes=70GiB&tp=2",
        "max_model_len=10000000&tp=2",
        "base=seed001&reserve=0&live=4000",
        "base=seed000&tp=8&mnbt=2048",
        "model=deepseek-v3&tp=8&pp=2&kv_dtype=fp8",
        "model=gemma-3-27b-it&tp=2",
        "model=qwen3-next-80b-a3b&tp=4",
        "model=falcon-mamba-7b",
    ],
)
def test_hard_plans_render_for_page_and_fragment(client: TestClient, query: str) -> None:
    for headers in ({}, HX):
        response = client.get(f"/plan?{query}", headers=headers, follow_redirects=True)
        assert response.status_code in (200, 422), response.text[:300]


def test_import_with_a_chosen_model_shows_residuals_and_plans(client: TestClient, renders: list[RenderEvent]) -> None:
    text = (DATA / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log").read_text()
    response = client.post("/import", data={"text": text, "model": "qwen3-235b-a22b-fp8"})
    assert response.status_code == 200
    run = renders[-1].context["runs"][0]
    assert run["run"]["residuals"]["engine"]["residual_blocks"] == 0
    assert all(not isinstance(v, dict) for v in run["engine"].values())
    assert client.get(run["plan_url"]).status_code == 200
    assert len(renders[-1].context["result"]["ranks"]) == 8


def test_import_with_an_unknown_model_is_an_inline_error(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.post("/import", data={"text": "x", "model": "no-such-model"})
    assert response.status_code == 422
    assert renders[-1].context["error"]["field"] == "model"


@pytest.mark.parametrize(
    ("page", "twin", "key"),
    [
        ("/", "/index.json", "examples"),
        ("/plan?model=llama-3.1-8b&tp=2", "/plan.json?model=llama-3.1-8b&tp=2", "ranks"),
        ("/import", "/import.json", "max_log_bytes"),
        ("/compare?a=%2Fplan%3Ftp%3D2&b=%2Fplan%3Ftp%3D4", "/compare.json?a=%2Fplan%3Ftp%3D2&b=%2Fplan%3Ftp%3D4",
         "results"),
        ("/sim", "/sim.json", None),
        ("/docs", "/docs.json", "paths"),
    ],
)
def test_every_page_has_a_json_twin(client: TestClient, page: str, twin: str, key: str | None) -> None:
    # (The saved-plan and deployment pages, /p and /d, need a database: test_saved_*.py checks their twins.)
    assert client.get(page).headers["content-type"].startswith("text/html")
    response = client.get(twin)
    assert response.status_code == 200, (twin, response.text[:200])
    assert response.headers["content-type"].startswith("application/json")
    if key is not None:
        assert key in response.json()


def test_sliders_move_the_kv_of_an_imported_run(client: TestClient, renders: list[RenderEvent]) -> None:
    # The measured KV room of a log holds at the logged utilization (0.9) and prefill chunk;
    # moving either slider moves it (utilization exactly, by each rank's Δrequested).
    text = (DATA / "vllm-logs" / "14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log").read_text()
    base = client.post("/import.json", data={"text": text}).json()["plans"][0]["url"]
    logged = client.get(base.replace("/plan", "/plan.json", 1)).json()
    assert logged["engine"]["gpu_memory_utilization"] == 0.9
    higher = client.get(base.replace("/plan", "/plan.json", 1) + "&util=0.95").json()
    assert higher["url"].endswith("util=0.95") and higher["tokens"] > logged["tokens"]
    rank0, moved0 = logged["ranks"][0], higher["ranks"][0]
    assert moved0["kv_bytes"] - rank0["kv_bytes"] == moved0["requested_bytes"] - rank0["requested_bytes"]
    client.get(base)
    assert renders[-1].context["options"]["quant"] == [("", "as measured")]  # no model shape to resize weights
    # the log names no model: nothing prices the chunk's activation, so it moves no row and says why
    unpriced = client.get(base.replace("/plan", "/plan.json", 1) + "&mnbt=1024").json()
    assert unpriced["tokens"] == logged["tokens"]
    assert any("the activation row is not moved" in note for note in unpriced["notes"])
    named = client.post("/import.json", data={"text": text, "model": "qwen3-235b-a22b-fp8"}).json()["plans"][0]["url"]
    named_logged = client.get(named.replace("/plan", "/plan.json", 1)).json()
    smaller_chunk = client.get(named.replace("/plan", "/plan.json", 1) + "&mnbt=1024").json()
    assert smaller_chunk["tokens"] > named_logged["tokens"]
    fragment = client.get(base + "&util=0.8", headers=HX)
    assert fragment.status_code == 200 and fragment.headers["hx-replace-url"].endswith("util=0.8")


def test_weights_at_fp8_from_the_form(client: TestClient, renders: list[RenderEvent]) -> None:
    plain = client.get("/plan.json", params={"model": "llama-3.1-70b", "tp": "4"}).json()
    fp8 = client.get("/plan", params={"model": "llama-3.1-70b", "tp": "4", "quant": "fp8"}, headers=HX)
    assert fp8.status_code == 200 and fp8.headers["hx-replace-url"] == "/plan?model=llama-3.1-70b&quant=fp8&tp=4"
    result = renders[-1].context["result"]
    assert result["tokens"] > plain["tokens"] and "--quantization fp8" in result["flags"]
    client.get("/plan", params={"model": "llama-3.1-70b", "tp": "4"})
    assert renders[-1].context["options"]["quant"] == [("default", "as the checkpoint (bfloat16)"),
                                                       ("fp8", "fp8 (--quantization fp8)")]
    # A quantized checkpoint offers only itself; fp8 on an FP8 checkpoint changes nothing, and on
    # another quantization (mxfp4) it is an inline error at the field, as vLLM refuses it.
    client.get("/plan", params={"model": "qwen3-30b-a3b-fp8"})
    assert renders[-1].context["options"]["quant"] == [("", "as the checkpoint (fp8)")]
    same = client.get("/plan.json", params={"model": "qwen3-30b-a3b-fp8", "quant": "fp8"}).json()
    assert same["tokens"] == client.get("/plan.json", params={"model": "qwen3-30b-a3b-fp8"}).json()["tokens"]
    refused = client.get("/plan", params={"model": "gpt-oss-120b", "quant": "fp8"})
    assert refused.status_code == 422 and "already quantized" in renders[-1].context["field_errors"]["quant"]
    bad = client.get("/plan.json", params={"model": "llama-3.1-8b", "quant": "int3"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "engine.quantization"
