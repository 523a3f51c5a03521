"""Issue 17 item 4: a plan that will not start leads with why, shows no capacity as if it were
real, offers no flag that would fail, and says what would make it start, with each result."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from app.services import plans

from .support import TestClient

TIB_MANUAL = "/plan?model=llama-3.1-70b&gpu_total=80GiB&tp=4&kv_bytes=1TiB"
TP1_70B = "/plan?model=llama-3.1-70b&gpu_total=80GiB&tp=1&pp=1"  # a TP alone opens at a PP that starts
_LEVER = re.compile(r'<tr data-knob="([^"]+)" data-starts="(yes|no)">\s*<td>(?:<a href="([^"]+)">)?([^<]*)'
                    r'(?:</a>)?</td>\s*<td>(.*?)</td>', re.S)


def _page(client: TestClient, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, response.text[:300]
    return str(response.text)


def _kpi(page: str, key: str) -> str:
    match = re.search(rf'data-kpi="{key}">\s*<div class="label">[^<]*</div>\s*<div class="value">([^<]*)</div>', page)
    assert match, key
    return html.unescape(match[1]).strip()


@pytest.mark.parametrize("url", [TIB_MANUAL, TP1_70B])
def test_a_plan_that_will_not_start_leads_with_why_and_shows_no_capacity(client: TestClient, url: str) -> None:
    page = _page(client, url)
    results = page[page.index('<section id="results"'):]
    assert results.index('id="not-starting"') < results.index('class="kpis"')  # why comes first
    card = results[results.index('id="not-starting"'):results.index('class="kpis"')]
    assert card.count('<li class="error">') >= 1 and "will not" in card
    for key in ("tokens", "kv", "concurrency"):
        assert _kpi(page, key) == "—", key
    assert _kpi(page, "starts") == "no"
    # no flag that would fail: no command, no uniform budget (0 B on a rank with no room), no copy for them
    assert 'id="flags-text"' not in page and 'id="uniform-flag"' not in page and 'id="flags-refused"' in page
    offered = re.findall(r"<pre[^>]*>(.*?)</pre>", page, re.S)
    assert not any("--kv-cache-memory-bytes" in text or "vllm serve" in text for text in offered), offered


def test_the_levers_say_what_would_make_it_start_and_each_link_keeps_its_promise(client: TestClient) -> None:
    rows = _LEVER.findall(_page(client, TP1_70B))
    knobs = {knob: (starts, href, change, result) for knob, starts, href, change, result in rows}
    assert {"tensor_parallel_size", "pipeline_parallel_size", "kv_cache_dtype", "quantization", "gpu"} <= set(knobs)
    assert "TP 1 → 4" in knobs["tensor_parallel_size"][2]
    for knob, (starts, href, change, result) in knobs.items():
        assert href, knob
        lever_page = _page(client, html.unescape(href))
        started = 'id="not-starting"' not in lever_page
        assert started == (starts == "yes"), (knob, change, href)
        if started:  # the tokens the lever promised are the tokens its page shows
            promised = re.search(r"([\d,]+) tokens", result)
            assert promised and promised[1] == _kpi(lever_page, "tokens"), (knob, result)


def test_a_manual_budget_too_large_offers_dropping_it() -> None:
    doc = {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"total": "80GiB"}, "layout": {"tp": 4},
           "engine": {"kv_cache_memory_bytes": "1TiB"}}
    out = plans.run_plan(doc, with_levers=False)
    assert out["will_start"] is False
    drop = next(lv for lv in out["start_levers"] if lv["knob"] == "kv_cache_memory_bytes")
    assert drop["will_start"] and drop["sets"] == {"engine.kv_cache_memory_bytes": None}
    plain = plans.run_plan({**doc, "engine": {}}, with_levers=False)
    assert drop["tokens_after"] == plain["tokens"]


def test_a_plan_that_starts_has_no_start_levers() -> None:
    out = plans.run_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"total": "80GiB"}}, with_levers=False)
    assert out["will_start"] and out["start_levers"] == []


def test_every_start_levers_link_opens_the_tokens_it_promised(client: TestClient) -> None:
    """Llama-3.1-70B at TP2 on A100s does not start; its "a larger card: DGX Spark GB10" lever said
    266,304 tokens but its link opened 278,416: the lever kept the A100's interconnect (NCCL's
    non-torch memory on NVLink), the page takes the new card's own."""
    query = "model=llama-3.1-70b&tp=2&pp=1&gpu=A100+80GB&live=4000"  # TP2 alone opens at TP2 × PP2
    result = client.get(f"/plan.json?{query}").json()
    page = client.get(f"/plan?{query}").text
    assert not result["will_start"] and any(lv["knob"] == "gpu" for lv in result["start_levers"])
    for lever in result["start_levers"]:
        change = html.escape(lever["change"], quote=False)
        link = re.search(r'<a href="(/plan\?[^"]+)"[^>]*>' + re.escape(change) + "</a>", page)
        assert link is not None, lever["change"]
        opened = client.get(html.unescape(link[1]).replace("/plan?", "/plan.json?")).json()
        assert opened["tokens"] == lever["tokens_after"], (lever["change"], link[1])


SMI = (Path(__file__).resolve().parents[1] / "data" / "nvidia-smi" / "table-r550-4gpu.txt").read_text()


def _links_keep_their_promise(client: TestClient, url: str) -> list[dict[str, object]]:
    result = client.get(url.replace("/plan?", "/plan.json?")).json()
    page = html.unescape(client.get(url).text)
    for lever in result["start_levers"]:
        link = re.search(r'<a href="(/plan\?[^"]+)"[^>]*>' + re.escape(lever["change"]) + "</a>", page)
        assert link is not None, lever["change"]
        opened = client.get(link[1].replace("/plan?", "/plan.json?")).json()
        assert (opened["tokens"], opened["will_start"]) == (lever["tokens_after"], lever["will_start"]), link[1]
    levers: list[dict[str, object]] = result["start_levers"]
    return levers


def test_gpus_with_another_process_are_offered_the_utilization_their_free_memory_holds(client: TestClient) -> None:
    # nvidia-smi's four H100s, GPU0 with 12,545 MiB in use: at vLLM's 0.92 GPU0 will not start. The
    # levers offered fp8 KV, fp8 weights (neither lowers the request) and "a larger card: H100 NVL
    # 94GB ... starts", whose link opened the same failing plan (a base listing its GPUs takes no gpu=)
    # and whose result had forgotten GPU0's other process. Now: utilization 0.84, which starts.
    response = client.post("/start/nvidia-smi", data={"text": SMI, "model": "llama-3.1-70b"}, follow_redirects=False)
    assert response.status_code == 303
    url = response.headers["location"]
    levers = _links_keep_their_promise(client, url)
    util = [lv for lv in levers if lv["knob"] == "gpu_memory_utilization"]
    assert [(lv["sets"], lv["will_start"]) for lv in util] == [({"engine.gpu_memory_utilization": 0.84}, True)]
    assert not any(lv["knob"] == "gpu" for lv in levers)
    gpu0 = client.get(url.replace("/plan?", "/plan.json?")).json()["ranks"][0]
    assert gpu0["free_at_start_bytes"] // (gpu0["total_bytes"] // 100) == 84  # 66.94 of 79.19 GiB


def test_a_larger_card_keeps_the_memory_in_use_at_start(client: TestClient) -> None:
    # 70 GiB free of 79.19: 9.19 GiB in use stays in use on the larger card (the lever sets gpu_free)
    levers = _links_keep_their_promise(client, "/plan?model=llama-3.1-70b&tp=4&gpu_free=70GiB")
    card = next(lv for lv in levers if lv["knob"] == "gpu")
    sets = card["sets"]
    assert isinstance(sets, dict)
    # in use on the new card: the same 9.19 GiB, its free rounded down to whole MiB (the form's size text)
    used = round(79.19 * 2**30) - 70 * 2**30
    assert 0 <= sets["gpu.total"] - sets["gpu.free_at_start"] - used < 2**20
    assert sets["gpu.free_at_start"] % 2**20 == 0
    assert "gpu_free=115138MiB" in client.get("/plan?model=llama-3.1-70b&tp=4&gpu_free=70GiB").text  # the link
    assert any(lv["knob"] == "gpu_memory_utilization" and lv["will_start"] for lv in levers)
