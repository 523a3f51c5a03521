"""Issue 17 items 7 and 16 and the public/39 defect, on the server side: an imported run's plan
knows its model (title, JSON) and TP degree, the deploy command is pasteable, the import page
keeps what was pasted and asks only for fields it has, and a plan that cannot be computed shows
the base document's values (not slider midpoints) under the model's name.

public/39 (vllm-project/vllm#15815: v0.7.2, Qwen/Qwen2.5-32B-Instruct TP2 on 2× L40S) names
neither its model nor max_model_len in the log; both ranks print 7.71 GiB of KV and the engine
'# CUDA blocks: 3947'. Independent arithmetic: Qwen2.5-32B has 64 layers, 8 KV heads of 128 —
at TP2, 4 heads per rank: 64 × 4 × 128 × 2 (K, V) × 2 B × 16 tokens = 2 MiB per block, and
7.71 GiB / 2 MiB = 3,947.5 → 3,947 blocks (TP1: 1,973; TP4: 7,894).
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.services import imports, plans
from app.services.imported_runs import model_doc, tp_from_blocks

from .support import TestClient

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
LOG39 = next((LOGS / "public").glob("39-*.log")).read_text()
SAME = {"Sec-Fetch-Site": "same-origin"}


def _import(client: TestClient, **form: str) -> dict[str, Any]:
    response = client.post("/import.json", data={"text": LOG39, **form}, headers=SAME)
    assert response.status_code == 200, response.text
    out: dict[str, Any] = response.json()
    return out


def _title(html: str) -> str:
    match = re.search(r"<title>(.*?)</title>", html)
    assert match is not None
    return match[1]


def test_a_log_naming_neither_model_nor_length_asks_for_the_model(client: TestClient) -> None:
    (plan,) = _import(client)["plans"]
    assert plan["url"] is None
    assert "does not name its model" in plan["error"] and "config.json" in plan["error"]
    page = client.post("/import", data={"text": LOG39}, headers=SAME).text
    assert "Model list above or paste its config.json" in page
    assert "INFO 04-02 10:20:45 model_runner.py:1116] Loading model weights took 30.7098 GB" in page  # kept
    assert "add model.config" not in page and "(CLI: --config)" not in page


def test_the_chosen_model_gives_the_run_its_tp_degree_and_name(client: TestClient) -> None:
    (plan,) = _import(client, model="qwen2.5-32b")["plans"]
    result = client.get(plan["url"].replace("/plan?", "/plan.json?")).json()
    assert result["model"]["name"] == "Qwen/Qwen2.5-32B"
    assert result["layout"]["tp"] == 2 and result["layout"]["ranks"] == 2
    assert result["blocks"] == 3947  # the engine's logged block count, per rank of TP2
    page = client.get(plan["url"]).text
    assert _title(page) == "Plan · Qwen/Qwen2.5-32B · KV Ledger"
    assert "Plan from a stored document" not in page
    # The log does not state the run's max_model_len, so the plan takes the model's 131,072, which
    # does not fit in 3,947 blocks: the page leads with that and offers the largest that fits.
    assert 'id="flags-refused"' in page and 'id="flags-text"' not in page
    (core,) = [w for w in result["warnings"] if w["code"] == "max_model_len_does_not_fit"]
    assert "max_model_len was not stated" in core["message"] and "default 131,072 was assumed" in core["message"]
    assert "max_model_len was not stated" in html.unescape(page)
    lever = re.search(r'<tr data-knob="max_model_len"[^>]*>\s*<td><a href="([^"]+)"', page)
    assert lever is not None
    fitted = client.get(html.unescape(lever.group(1))).text
    assert "vllm serve Qwen/Qwen2.5-32B \\\n  --tensor-parallel-size 2" in fitted
    assert "--max-model-len 63152" in fitted
    assert "max_model_len was not stated" not in fitted  # the lever states it


def test_a_pasted_config_json_stands_for_the_model(client: TestClient) -> None:
    import json

    from app.ingest.catalogue import get_model

    config = json.dumps(get_model("qwen2.5-32b").config_dict())
    (plan,) = _import(client, config=config)["plans"]
    result = client.get(plan["url"].replace("/plan?", "/plan.json?")).json()
    assert result["layout"]["tp"] == 2 and result["blocks"] == 3947
    page = client.post("/import", data={"text": LOG39, "config": "{not json"}, headers=SAME)
    assert page.status_code == 422 and "not valid JSON" in page.text
    assert "{not json" in page.text and "30.7098 GB" in page.text  # both boxes keep what was pasted


def test_tp_from_blocks_needs_a_unique_match() -> None:
    from app.ingest.catalogue import get_model

    parsed = imports.import_log(LOG39)
    run = parsed["runs"][0]
    config = get_model("qwen2.5-32b").config_dict()
    assert tp_from_blocks(run, config) == 2
    other = {**run, "engine": {**run["engine"], "num_gpu_blocks": 3000}}
    assert tp_from_blocks(other, config) is None  # no degree gives 3,000 blocks: left unknown
    assert tp_from_blocks({**run, "engine": {}}, config) is None


def test_model_doc_refuses_a_config_that_is_not_an_object() -> None:
    with pytest.raises(InputError) as err:
        model_doc("", "[1, 2]")
    assert err.value.field == "config"
    assert model_doc("", "  ") is None
    assert model_doc("", '{"_name_or_path": "org/m", "num_hidden_layers": 2}') == {
        "config": {"_name_or_path": "org/m", "num_hidden_layers": 2}, "name": "org/m"}


def test_a_plan_that_cannot_compute_shows_the_base_documents_values(client: TestClient) -> None:
    doc = {"model": {"kv_bytes_per_token": 131089, "name": "my-model"}, "vllm_version": "0.7.2",
           "layout": {"tp": 2}, "engine": {"gpu_memory_utilization": 0.9},
           "ranks": [{"total": "44.42 GiB", "kv_room": "7.71 GiB"}, {"total": "44.42 GiB", "kv_room": "7.71 GiB"}]}
    base = client.app.state.bases.put(doc)  # type: ignore[attr-defined]
    page = client.get(f"/plan?base={base}")
    assert page.status_code == 422
    html = page.text
    assert "engine.max_model_len" in html
    assert _title(html) == "Plan · my-model · KV Ledger"
    assert re.search(r'name="util"[^>]*value="0.9"', html), "utilization of the document, not the midpoint"
    assert re.search(r'<option value="2" selected', html), "TP of the document"
    assert re.search(r'name="growth"[^>]*value="0"', html)
    # the document states no block size: "vLLM's choice" (its 16 here), not block 1 (the first size)
    assert '<option value="default" selected>' in html


def test_deploy_command_has_the_runs_expert_parallel_flag() -> None:
    from app.schemas import validate_plan
    from app.services.evidence import document_from_log

    # worker names carry `_EP{ep_rank}` only with expert parallel on (multiproc_executor.py @28be48fa)
    text = "".join(f"(Worker_TP{i}_EP{i} pid={i + 10}) INFO 01-01 00:00:0{i} [gpu_worker.py:1] Available KV cache "
                   "memory: 10.00 GiB\n" for i in range(2))
    parsed = imports.import_log(text)
    doc = document_from_log(validate_plan({"from_log": {"runs": parsed["runs"][:1]}, "model": {
        "catalogue": "llama-3.1-8b"}}), None)
    assert doc.layout.expert_parallel is True
    result = plans.run_plan(doc.model_dump(mode="json", exclude_none=True), with_levers=False)
    assert "--enable-expert-parallel" in result["flags"]


def test_a_run_with_graphs_in_its_budget_takes_the_logged_estimate_and_vllms_advice() -> None:
    # public/32 (vllm PR #37296): TP0 'Estimated CUDA graph memory: 4.38 GiB total', 'Available KV
    # cache memory: 25.46 GiB', and per rank the util-equivalence advice (opt-in wording)
    from app.schemas import validate_plan
    from app.services.evidence import document_from_log

    parsed = imports.import_log(next((LOGS / "public").glob("32-*.log")).read_text())
    doc = document_from_log(validate_plan({"from_log": parsed, "model": {"kv_bytes_per_token": 65536},
                                           "engine": {"max_model_len": 4096}}), None)
    (tp0,) = doc.ranks or []
    assert tp0.label == "TP0" and abs((tp0.cuda_graphs or 0) / 2**30 - 4.38) <= 0.005
    assert any("(TP0)" in n and "0.9000" in n and "0.8015" in n and "0.9985" in n for n in doc.notes)
    assert any("(TP1)" in n and "0.8033" in n and "0.9967" in n for n in doc.notes)
    result = plans.run_plan(doc.model_dump(mode="json", exclude_none=True), with_levers=False)
    assert any("vLLM's advice (TP0)" in n for n in result["notes"])


def test_a_run_without_model_or_kv_bytes_names_the_fields_the_import_page_has(client: TestClient) -> None:
    # tests/data/vllm-logs/22 (v0.27.1, TP2): no model named and no bytes per token in its KV lines.
    text = (LOGS / "22-v0271-tp2-cg-profiling.log").read_text()
    page = client.post("/import", data={"text": text}, headers=SAME).text
    assert "add model.config" not in page
    assert "Model list" in page and "config.json" in page


def test_the_advice_never_promises_a_box_it_emptied(client: TestClient) -> None:
    """Issue 17 item 16: a log too large to keep in the box (over 1 MiB) is not said to stay there."""
    padding = "INFO 01-01 00:00:00 [core.py:1] nothing to see here\n" * 25_000
    big = client.post("/import", data={"text": padding + LOG39}, headers=SAME)
    assert big.status_code == 200
    assert "the log stays in the box" not in big.text and "paste or choose the log again" in big.text
    small = client.post("/import", data={"text": LOG39}, headers=SAME)
    assert "the log stays in the box" in small.text



def test_an_open_version_range_reads_in_words(client: TestClient) -> None:
    """public/05 (vLLM 0.9.2, unstated) implies "0.9.1 or later" with no upper bound: the import
    page said "vLLM not stated (inferred 0.9.1 – <?)"."""
    from app.web.plan.workflows import run_display

    text = next((LOGS / "public").glob("05-*.log")).read_text()
    (run,) = imports.import_log(text)["runs"]
    low = run["version"]["inferred_min"]
    assert low and run["version"]["inferred_max_exclusive"] is None
    page = client.post("/import", data={"text": text}, headers=SAME).text
    assert f"not stated (inferred {low} or later)" in page and "&lt;?" not in page and "<?" not in page
    both = run_display(0, {"version": {"inferred_min": "0.8.0", "inferred_max_exclusive": "0.9.0"}})
    assert both["version_text"] == "not stated (inferred 0.8.0 – <0.9.0)"
    assert run_display(0, {"version": {}})["version_text"] == "not stated (no version inferred)"


def test_an_imported_run_shows_each_rank_the_blocks_its_own_log_line_prints(client: TestClient) -> None:
    """Log 14 (v0.10.2, Qwen3-235B-A22B-FP8 TP8 on 8× L40S) prints one 'GPU KV cache size' per worker
    (238,208 / 237,392 / 237,344 / 237,520 / 238,256 / 237,344 / 237,392 / 237,520) and each rank's KV
    in bytes. Its plan took 48,129 B per token (the binding rank's bytes ÷ its tokens) where the model
    has 48,128 (94 layers × 1 KV head at TP8 × 128 × 2 × 2 B), and showed TP1, TP3, TP6, TP7 one block
    (16 tokens) below their own lines: 237,376 for 237,392."""
    text = next(LOGS.glob("14-*.log")).read_text()
    out = client.post("/import.json", data={"text": text}, headers=SAME).json()
    assert out["runs"][0]["implied_kv_bytes_per_token"] == 48128
    plan = client.get(out["plans"][0]["url"].replace("/plan?", "/plan.json?")).json()
    assert plan["kv_bytes_per_token"] == 48128 and plan["page_bytes"] == 48128 * 16
    tokens = {r["rank"]: r["tokens"] for r in plan["ranks"]}
    assert tokens == {"TP0_EP0": 238208, "TP1_EP1": 237392, "TP2_EP2": 237344, "TP3_EP3": 237520,
                      "TP4_EP4": 238256, "TP5_EP5": 237344, "TP6_EP6": 237392, "TP7_EP7": 237520}
    assert (plan["blocks"], plan["tokens"], plan["binding_rank"]) == (14834, 237344, "TP2_EP2")


def test_a_tp_given_with_the_import_that_the_log_contradicts_makes_no_plan(client: TestClient) -> None:
    """Log 18's ranks print as Worker_TP0 … Worker_TP3. Importing it with TP 2 typed on the import page
    made a plan of two ranks with -12.46 GiB of KV each, 'will not start': a verdict about a layout
    the run cannot have. The run's plan entry now says why it has no plan."""
    text = next(LOGS.glob("18-*.log")).read_text()
    form = {"text": text, "model": "qwen3-vl-30b-a3b-instruct"}
    bad = client.post("/import.json", data={**form, "tp": "2"}, headers=SAME).json()
    (entry,) = bad["plans"]
    assert entry["url"] is None and "TP is at least 4" in entry["error"] and "(2)" in entry["error"]
    page = client.post("/import", data={**form, "tp": "2"}, headers=SAME)
    assert page.status_code == 200 and "TP is at least 4" in html.unescape(page.text)
    good = client.post("/import.json", data={**form, "tp": "4"}, headers=SAME).json()
    assert good["plans"][0]["error"] is None
    plan = client.get(good["plans"][0]["url"].replace("/plan?", "/plan.json?")).json()
    assert plan["blocks"] == 6297 and plan["will_start"] is True


def test_comparing_the_plans_of_an_upgrade_pairs_the_renamed_rank(client: TestClient) -> None:
    """Qwen3-30B-A3B-2507 on one H100: public/72 (vLLM 0.10.2, EngineCore_DP0) and public/71 (0.22.1,
    EngineCore after #36822). /compare showed the one GPU as two ranks, each with the other side's
    rows empty and no delta; it is one rank, compared row by row."""
    urls = []
    for n in ("72", "71"):
        text = next((LOGS / "public").glob(f"{n}-*.log")).read_text()
        out = client.post("/import.json", data={"text": text, "model": "qwen3-30b-a3b"}, headers=SAME).json()
        urls.append(out["plans"][0]["url"])
    compared = client.get("/compare.json", params={"a": urls[0], "b": urls[1]}).json()
    (rank,) = compared["ranks"]
    assert rank["rank"] == "TP0"  # both single-GPU runs label their rank TP0 (3cfdb6b)
    assert rank["rows"]["tokens"] == {"a": 94784, "b": 464656, "delta": 369872}
    assert rank["rows"]["weights_bytes"]["delta"] < 0  # fp8 weights: about half
    page = client.get("/compare", params={"a": urls[0], "b": urls[1]})
    assert page.status_code == 200 and "TP0" in html.unescape(page.text)
