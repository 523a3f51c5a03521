"""Deploy formats and vLLM inputs on the web: the home page's command line, the plan page's
downloads and copy blocks, POST /api/v1/export, /metrics on the import page and the API."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from app.ingest.vllm_serve import read_serve

from .support import TestClient

METRICS = Path(__file__).resolve().parents[1] / "data" / "metrics"
COMMAND = "vllm serve meta-llama/Llama-3.1-70B-Instruct -tp 4 --max-model-len 32768 --port 8000"


def _plan_page(client: TestClient) -> str:
    started = client.post("/start/serve", data={"command": COMMAND, "gpu": "80GiB"}, follow_redirects=False)
    assert started.status_code == 303 and started.headers["location"].startswith("/plan?base=")
    page = client.get(started.headers["location"])
    assert page.status_code == 200
    return str(page.text)


def test_home_page_takes_a_pasted_command_line(client: TestClient) -> None:
    home = client.get("/")
    assert 'action="/start/serve"' in home.text and 'name="command"' in home.text
    text = _plan_page(client)
    note = "vLLM flags the plan does not model (not in its flags or exports: add them to the command you deploy)"
    assert f"{note}: --port" in text
    assert "--tensor-parallel-size 4" in text and "--max-model-len 32768" in text


def test_home_page_names_what_was_expected(client: TestClient) -> None:
    for command in ("ls -la", "", "vllm serve /models/mine -tp 2"):
        response = client.post("/start/serve", data={"command": command, "gpu": "80GiB"})
        assert response.status_code == 422
        assert re.search(r"vllm serve MODEL|paste a vllm serve|not in the catalogue", response.text), command


def test_plan_page_links_every_format_and_each_download_parses(client: TestClient) -> None:
    text = _plan_page(client)
    links = [u.replace("&amp;", "&") for u in re.findall(r'href="(/plan/export/[^"]+)"', text)]
    assert [u.split("?")[0].rsplit("/", 1)[1] for u in links] == [
        "serve", "vllm-config", "kserve", "production-stack", "llm-d", "csv"]
    for fmt in ("vllm-config", "kserve", "production-stack", "llm-d"):  # a copy block each, loaded when opened
        assert f'id="{fmt}-text"' in text and f'data-copy="{fmt}-text"' in text, fmt
        assert re.search(rf'<details data-export-url="/plan/export/{fmt}\?[^"]+">', text), fmt
    assert "servingEngineSpec" not in text and "apiVersion" not in text  # no deploy file is written per page
    bodies = {}
    for url in links:
        response = client.get(url)
        assert response.status_code == 200 and "attachment" in response.headers["content-disposition"]
        bodies[url.split("?")[0].rsplit("/", 1)[1]] = response.text
    assert read_serve(bodies["serve"]).document()["layout"] == {"tp": 4}
    for fmt in ("vllm-config", "kserve", "production-stack", "llm-d"):
        assert isinstance(yaml.safe_load(bodies[fmt]), dict), fmt
    assert bodies["csv"].splitlines()[0].startswith("rank,total_bytes") and len(bodies["csv"].splitlines()) == 5


def test_plan_without_a_model_says_why_and_links_the_ledger(client: TestClient) -> None:
    doc = {"model": {"kv_bytes_per_token": 131072}, "ranks": [{"kv_room": "40 GiB"}], "engine": {"max_model_len": 8192}}
    stored = client.post("/api/v1/plan", json=doc)
    assert stored.status_code == 200
    page = client.get(stored.json()["url"])
    links = re.findall(r'href="(/plan/export/[^"]+)"', page.text)
    assert [u.split("?")[0].rsplit("/", 1)[1] for u in links] == ["csv"]
    assert "needs the model to serve" in page.text and "data-export-url" not in page.text


def test_api_export_takes_the_plan_document(client: TestClient) -> None:
    doc = {"serve": COMMAND, "gpu": {"total": "80 GiB"}}
    response = client.post("/api/v1/export", params={"format": "production-stack"}, json=doc)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/yaml")
    spec = yaml.safe_load(response.text)["servingEngineSpec"]["modelSpec"][0]
    assert spec["modelURL"] == "meta-llama/Llama-3.1-70B-Instruct" and spec["vllmConfig"]["tensorParallelSize"] == 4
    bad = client.post("/api/v1/export", params={"format": "helm"}, json=doc)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "format"
    not_vllm = client.post("/api/v1/export", params={"format": "serve"}, json={"serve": "ls", "gpu": {"total": "8GiB"}})
    assert not_vllm.status_code == 422 and "vllm serve MODEL" in not_vllm.json()["error"]["message"]


def test_api_plan_reads_serve_and_vllm_config(client: TestClient) -> None:
    by_command = client.post("/api/v1/plan", json={"serve": COMMAND.split(), "gpu": {"total": "80 GiB"}}).json()
    by_yaml = client.post("/api/v1/plan", json={"vllm_config": "model: meta-llama/Llama-3.1-70B-Instruct\n"
                                                               "tensor-parallel-size: 4\nmax-model-len: 32768\n",
                                                "gpu": {"total": "80 GiB"}}).json()
    assert by_command["flags"] == by_yaml["flags"] and by_command["blocks"] == by_yaml["blocks"]
    broken = client.post("/api/v1/plan", json={"vllm_config": "tensor-parallel-size: [4", "gpu": {"total": "80 GiB"}})
    assert broken.status_code == 422 and "does not parse" in broken.json()["error"]["message"]


def test_api_import_metrics_beside_a_plan(client: TestClient) -> None:
    text = (METRICS / "vllm-0.11-cache-config-engine.prom").read_text()
    plan = {"model": {"catalogue": "qwen3-8b"}, "gpu": {"total": "48 GiB"}, "engine": {"gpu_memory_utilization": 0.65}}
    out = client.post("/api/v1/import/metrics", json={"text": text, "plan": plan}).json()
    (replica,) = out["replicas"]
    assert replica["plan"]["measured_blocks"] == 9271
    assert replica["plan"]["predicted_blocks"] == out["plan"]["blocks"]
    assert replica["document"]["engine"] == {"block_size": 16, "kv_cache_dtype": "auto", "gpu_memory_utilization": 0.65}
    assert replica["plan"]["settings_differ"] == [] and "settings_note" not in replica["plan"]
    none = client.post("/api/v1/import/metrics", json={"text": "# HELP up x\nup 1\n"})
    assert none.status_code == 422 and "vllm:cache_config_info" in none.json()["error"]["message"]


def test_api_import_metrics_names_the_settings_the_engine_ran_with_apart_from_the_plan(client: TestClient) -> None:
    # an engine at 0.65 / auto beside a plan at 0.9 / fp8 gave ratio 0.059 with nothing said
    text = (METRICS / "vllm-0.11-cache-config-engine.prom").read_text()
    plan = {"model": {"catalogue": "qwen3-8b"}, "gpu": {"total": "48 GiB"},
            "engine": {"gpu_memory_utilization": 0.9, "kv_cache_dtype": "fp8"}}
    out = client.post("/api/v1/import/metrics", json={"text": text, "plan": plan}).json()
    compared = out["replicas"][0]["plan"]
    assert compared["settings_differ"] == [
        {"field": "kv_cache_dtype", "engine": "auto", "plan": "fp8"},
        {"field": "gpu_memory_utilization", "engine": 0.65, "plan": 0.9},
    ]
    assert "kv_cache_dtype auto (plan fp8)" in compared["settings_note"]
    assert "gpu_memory_utilization 0.65 (plan 0.9)" in compared["settings_note"]


def test_import_page_counts_a_length_mix_in_words(client: TestClient) -> None:
    """One request is "1 request", and the mixes are joined by "; " with none trailing."""
    one = client.post("/import/metrics", data={"text": (METRICS / "vllm-v0-lora-prompt-tokens.prom").read_text()})
    assert "prompt_tokens: 1 request</td>" in one.text
    several = client.post("/import/metrics",
                          data={"text": (METRICS / "vllm-dp2-qwen3-8b-generation-tokens.prom").read_text()})
    assert "output_tokens: 3 requests</td>" in several.text and "; </td>" not in several.text


def test_import_page_reads_metrics(client: TestClient) -> None:
    page = client.get("/import")
    assert 'action="/import/metrics"' in page.text
    shown = client.post("/import/metrics", data={"text": (METRICS / "dcgm-rtx2000-a30.prom").read_text()})
    assert shown.status_code == 200 and "NVIDIA RTX 2000 Ada Generation" in shown.text and "MIG 3" in shown.text
    engine = client.post("/import/metrics", data={"text": (METRICS / "vllm-0.11-cache-config-engine.prom").read_text()})
    assert "9,271" in engine.text
    bad = client.post("/import/metrics", data={"text": "# just a comment\n"})
    assert bad.status_code == 422 and "no vLLM or DCGM series found" in bad.text


def test_every_deploy_format_carries_the_lmcache_environment(client: TestClient) -> None:
    """LMCache before vLLM 0.11.1 takes its CPU size (and always its disk tier) from the environment:
    the plan page's tier card listed LMCACHE_MAX_LOCAL_CPU_SIZE=50 …, but the copied command and every
    deploy file left it out (LMCache then ran at its own default size, with no disk tier)."""
    import html as html_mod

    query = "model=llama-3.1-8b&offload=50GiB&offload_backend=lmcache&offload_disk=200GiB&vllm=0.11.0"
    env = client.get(f"/plan.json?{query}").json()["kv_offload_env"]
    assert env["LMCACHE_MAX_LOCAL_CPU_SIZE"] == "50" and env["LMCACHE_MAX_LOCAL_DISK_SIZE"] == "200"
    serve = client.get(f"/plan/export/serve?{query}").text
    assert serve.startswith("LMCACHE_LOCAL_CPU=True \\\n") and "\nvllm serve " in serve
    assert all(f"{k}={v} \\\n" in serve for k, v in env.items())
    page = client.get(f"/plan?{query}").text
    shown = re.search(r'<pre id="flags-text">(.*?)</pre>', page, re.S)
    assert shown is not None and html_mod.unescape(shown[1]) == serve.rstrip("\n")  # the page = the export
    config = client.get(f"/plan/export/vllm-config?{query}").text
    assert all(f"# set in the engine's environment: {k}={v}\n" in config for k, v in env.items())
    entries = [{"name": k, "value": v} for k, v in env.items()]
    kserve = yaml.safe_load(client.get(f"/plan/export/kserve?{query}").text)
    assert kserve["spec"]["predictor"]["model"]["env"] == entries
    stack = yaml.safe_load(client.get(f"/plan/export/production-stack?{query}").text)
    assert stack["servingEngineSpec"]["modelSpec"][0]["env"] == entries
    llm_d = yaml.safe_load(client.get(f"/plan/export/llm-d?{query}").text)
    assert llm_d["decode"]["containers"][0]["env"] == entries
    plain = client.get("/plan/export/kserve?model=llama-3.1-8b").text
    assert "env:" not in plain  # no offload tier, no environment


def test_api_and_page_name_metrics_samples_no_engine_can_have(client: TestClient) -> None:
    """NaN, +Inf and overflowing cache_config_info labels were a 500 on both; now 200, named."""
    text = ('vllm:cache_config_info{block_size="16",num_gpu_blocks="1e400"} 1\n'
            'vllm:kv_cache_usage_perc{engine="0"} NaN\nDCGM_FI_DEV_FB_FREE{gpu="\u00b2"} +Inf\n'
            'DCGM_FI_DEV_FB_USED{gpu="\u00b2"} 5\n')
    api = client.post("/api/v1/import/metrics", json={"text": text})
    assert api.status_code == 200, api.text
    assert [r["reason"] for r in api.json()["refused"]] == ["not a finite number"] * 3
    page = client.post("/import/metrics", data={"text": text})
    assert page.status_code == 200
    assert page.text.count('class="alert metrics-refused"') == 3 and "num_gpu_blocks=&#34;1e400&#34;" in page.text
