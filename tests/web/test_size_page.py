"""The /size page, its .json twin, POST /api/v1/size, and the plan page's link into sizing."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlsplit

from app.services.sizing import run_size
from app.web.size import forms

from .support import HX, TestClient

EXAMPLE_QUERY = "&".join(f"{k}={v}" for k, v in forms.EXAMPLE.items())


def test_page_opens_with_the_example_and_ranks_it(client: TestClient) -> None:
    page = client.get("/size")
    assert page.status_code == 200
    html = page.text
    assert 'id="size-options"' in html and 'id="chart-size-data"' in html and 'id="size-busy"' in html
    first = re.search(r'<tbody>\s*<tr>(.*?)</tr>', html, re.S)
    assert first is not None
    cells = re.findall(r"<td>(.*?)</td>", first.group(1), re.S)
    assert cells[1] == "2" and "H200 141GB" in cells[2]  # two H200s serve 40 × 12k at 32k
    links = re.findall(r'href="(/plan\?[^"]+)" class="plan-link"', html)
    assert links and "gpu=H200+141GB" in links[0].replace("&amp;", "&")


def test_fragment_for_htmx_and_url_state(client: TestClient) -> None:
    query = "model=llama-3.1-8b&max_model_len=8192&concurrency=64&live=2000&gpus=L4%2024GB&max_gpus=4"
    fragment = client.get(f"/size?{query}", headers=HX)
    assert fragment.status_code == 200
    assert fragment.text.lstrip().startswith('<div class="plan-layout" id="sizing">') and "<html" not in fragment.text
    twin = client.get(f"/size.json?{query}").json()
    assert twin["target"] == {"max_model_len": 8192, "concurrency": 64, "avg_live_tokens": 2000, "tokens": None}
    assert twin["options"][0]["gpu"] == "L4 24GB"
    page = client.get(f"/size?{query}").text
    assert 'value="64"' in page and 'value="L4 24GB"' in page  # the form shows the URL's state


def test_api_answers_the_cli_contract(client: TestClient) -> None:
    doc = {"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": 8192, "concurrency": 32},
           "gpus": ["A100 80GB"], "max_gpus": 2}  # fmt: skip
    body = client.post("/api/v1/size", json=doc)
    assert body.status_code == 200
    out = body.json()
    assert out == run_size(doc)
    keys = {"gpu", "gpus", "tp", "pp", "dp", "engines_per_gpu", "kv_cache_dtype", "quantization",
            "gpu_memory_utilization", "tokens", "max_concurrency_at_max_model_len", "concurrency_ceiling",
            "meets_target", "missing", "flags", "plan", "url"}  # fmt: skip
    assert keys <= set(out["options"][0]) and {"searched", "near_misses", "options"} <= set(out)
    plan = client.get(out["options"][0]["url"].replace("/plan?", "/plan.json?")).json()
    assert plan["tokens"] == out["options"][0]["tokens"]


def test_bad_input_is_a_422_beside_the_field(client: TestClient) -> None:
    api = client.post("/api/v1/size", json={"model": {"catalogue": "llama-3.1-8b"},
                                            "target": {"max_model_len": 8192}, "gpus": ["B300"]})  # fmt: skip
    assert api.status_code == 422 and api.json()["error"]["field"] == "gpus[0]"
    assert "nearest" in api.json()["error"]["message"]
    page = client.get(f"/size?{EXAMPLE_QUERY}&gpus=H100%2090GB", headers=HX)
    assert page.status_code == 422
    assert re.search(r'id="err-gpus"[^>]*>[^<]*nearest: &#39;H100 80GB&#39;', page.text)
    twin = client.get("/size.json?concurrency=many")
    assert twin.status_code == 422 and twin.json()["error"]["field"] == "concurrency"
    api = client.post("/api/v1/size", json=[1, 2])
    assert api.status_code == 422


def test_no_option_says_which_limit_fails(client: TestClient) -> None:
    html = client.get(f"/size?{EXAMPLE_QUERY}&max_gpus=1&gpus=L4%2024GB").text
    assert "no deployment within max_gpus=1" in html and 'id="size-near-misses"' in html
    assert "does not start" in html and 'id="size-options"' not in html


def test_plan_page_links_to_sizing_when_it_misses(client: TestClient) -> None:
    # TP2 on H100: the bf16 weights leave no KV room; the page links to /size with the model and length
    # (PP stated: TP2 alone opens at TP2 × PP2, which starts).
    html = client.get("/plan?model=llama-3.1-70b&gpu=H100+80GB&tp=2&pp=1&max_model_len=32768").text
    link = re.search(r'id="size-link">[^<]*<a href="([^"]+)"', html)
    assert link is not None and "does not start" in html
    query = dict(parse_qsl(urlsplit(link.group(1).replace("&amp;", "&")).query))
    assert query["model"] == "llama-3.1-70b" and query["max_model_len"] == "32768" and "concurrency" not in query
    assert client.get(link.group(1).replace("&amp;", "&")).status_code == 200
    # TP4 at 12,000 live tokens holds 32 requests, fewer than max_num_seqs admits: the target is filled in.
    html = client.get("/plan?model=llama-3.1-70b&gpu=H100+80GB&tp=4&max_model_len=32768&live=12000&growth=0.08").text
    link = re.search(r'id="size-link">[^<]*<a href="([^"]+)"', html)
    assert link is not None
    query = dict(parse_qsl(urlsplit(link.group(1).replace("&amp;", "&")).query))
    assert (query["live"], query["concurrency"]) == ("12000", "1024")
    # A plan that serves max_num_seqs at its live tokens has no such link.
    html = client.get("/plan?model=llama-3.1-8b&gpu=H100+80GB&max_model_len=8192&live=100&max_num_seqs=64").text
    assert 'id="size-link"' not in html


def test_gpu_preset_knob_round_trips(client: TestClient) -> None:
    """The plan page takes a preset name (and free memory at start): a sizing option's URL
    reproduces its plan document, gpu name and all."""
    out = run_size({"model": {"catalogue": "llama-3.2-1b"}, "target": {"max_model_len": 8192, "concurrency": 8},
                    "gpus": ["H200 141GB"], "max_gpus": 1, "options": {"engines_per_gpu": [2],
                    "kv_cache_dtype": ["auto"], "quantization": [None]}})  # fmt: skip
    option = out["options"][0]
    assert "gpu_free=" in option["url"] and "gpu=H200+141GB" in option["url"]
    via_url = client.get(option["url"].replace("/plan?", "/plan.json?")).json()
    via_doc = client.post("/api/v1/plan", json=option["plan"]).json()
    assert via_url["tokens"] == via_doc["tokens"] == option["tokens"]
    assert via_url["ranks"][0]["free_at_start_bytes"] == option["plan"]["gpu"]["free_at_start"]


def test_every_rows_link_opens_its_own_layout(client: TestClient) -> None:
    """A TP1 row's link states tp=1: a plan URL without TP opens at the smallest layout that
    starts, so the TP1 PP2 row of a 70B model at fp8 opened a TP2 × PP2 plan with other tokens."""
    out = run_size({"model": {"catalogue": "llama-3.1-70b"}, "target": {"max_model_len": 8192, "concurrency": 8},
                    "gpus": ["H100 80GB"], "max_gpus": 2, "options": {"engines_per_gpu": [1], "pp": [1, 2],
                    "kv_cache_dtype": ["fp8"], "quantization": ["fp8"]}})  # fmt: skip
    rows = out["options"] + out["near_misses"]
    assert any(row["tp"] == 1 and row["pp"] == 2 for row in out["options"])
    for row in rows:
        plan = client.get(row["url"].replace("/plan?", "/plan.json?")).json()
        assert (plan["layout"]["tp"], plan["layout"]["pp"]) == (row["tp"], row["pp"]), row["url"]
        assert plan["tokens"] == row["tokens"], row["url"]


def test_engines_sharing_a_card_link_to_one_process_and_its_export(client: TestClient) -> None:
    """Qwen3-30B-A3B, 64 × 8k on one H200: "TP1 2 engines/GPU × 2" was planned as vLLM DP 2 — its
    experts split over two ranks (335,440 tokens per engine) and `--data-parallel-size 2`, which
    vLLM places on two GPUs (get_device_indices, vllm/v1/engine/utils.py @4dd49b06f), while the row
    said 1 GPU and KServe asked for 2. Two engines on one card are two processes, each holding
    every expert: each row's link and export are one such process, on the row's own GPU count."""
    query = ("model=qwen3-30b-a3b&max_model_len=32768&concurrency=64&live=8000&gpus=H200%20141GB"
             "&max_gpus=1&engines=1,2,4&kv_dtype=auto&quant=none,fp8&util=0.92&pp=1")  # fmt: skip
    out = client.get(f"/size.json?{query}").json()
    shared = [row for row in out["options"] + out["near_misses"] if row["engines_per_gpu"] > 1]
    assert shared
    for row in shared:
        plan = client.get(row["url"].replace("/plan?", "/plan.json?")).json()
        assert plan["layout"]["tp"] * plan["layout"]["pp"] * plan["layout"]["dp"] == row["gpus"] == 1, row["url"]
        assert plan["dp_layout"]["moe_tp_size"] == 1  # every expert on the card, in each process
        assert plan["tokens"] == row["tokens"] and plan["flags"] == row["flags"], row["url"]
        assert "--data-parallel-size" not in " ".join(row["flags"]) and row["processes"] == row["engines_per_gpu"]
        kserve = client.post("/api/v1/export?format=kserve", json=row["plan"])
        assert kserve.status_code == 200 and "nvidia.com/gpu: 1\n" in kserve.text
    # two bf16 processes hold about a ninth of what vLLM DP 2 claimed: no longer a 1-GPU answer
    assert not any(r["engines_per_gpu"] == 2 and r["quantization"] is None for r in out["options"])
    page = client.get(f"/size?{query}").text
    assert "2 vllm serve processes on the same GPUs" in page
