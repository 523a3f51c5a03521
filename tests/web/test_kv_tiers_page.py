"""The plan page's what-ifs of issue 15 (items 4–6): offload size and backend, host memory, prefix
caching and expert parallel go through the knob table, round-trip through the URL, and the tier card
shows the JSON's numbers."""

from __future__ import annotations

import re

import pytest
from markupsafe import escape

from app.web.app import create_app
from app.web.formatting import intcomma

from .support import TestClient, make_settings


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(make_settings()))


def test_offload_what_if_round_trips_and_the_card_shows_the_tokens(client: TestClient) -> None:
    query = "model=qwen3-8b&tp=2&offload=200GiB&offload_backend=lmcache&offload_disk=1TiB&live=3000"
    page = client.get(f"/plan.json?{query}").json()
    assert page["url"] == ("/plan?live=3000&model=qwen3-8b&offload=200GiB&offload_backend=lmcache"
                           "&offload_disk=1024GiB&tp=2")
    result = page.get("result", page)
    tiers = result["kv_tiers"]
    assert [t["name"] for t in tiers] == ["gpu", "cpu", "disk"]
    html = client.get(f"/plan?{query}").text
    for tier in tiers:
        cell = re.search(rf'id="tier-{tier["name"]}-tokens"[^>]*>([^<]*)<', html)
        assert cell is not None and cell.group(1) == intcomma(tier["tokens"])
    assert "--kv-offloading-size 200" in html


def test_prefix_off_shows_zero_retention(client: TestClient) -> None:
    # few live tokens a request: max_num_seqs caps the running requests, the rest of the pool retains
    on = client.get("/plan?model=llama-3.1-8b&live=100").text
    off = client.get("/plan?model=llama-3.1-8b&live=100&prefix=off").text
    share_on = re.search(r'id="retention-share">([^<]*)<', on)
    share_off = re.search(r'id="retention-share">([^<]*)<', off)
    assert share_on is not None and share_off is not None
    assert share_off.group(1) == "0.0%" and share_on.group(1) != "0.0%"
    assert "--no-enable-prefix-caching" in off
    page = client.get("/plan.json?model=llama-3.1-8b&prefix=false").json()
    assert page["url"] == "/plan?prefix=false"  # llama-3.1-8b is the default model


def test_bad_what_if_values_show_on_their_field(client: TestClient) -> None:
    reply = client.get("/plan?offload=-3GiB")
    assert reply.status_code == 422 and 'id="err-offload"' in reply.text
    reply = client.get("/plan?prefix=maybe")
    assert reply.status_code == 422 and "expected true or false" in reply.text
    reply = client.get("/plan?offload_backend=lmcache")  # a backend without a size
    assert reply.status_code == 422 and "cpu_bytes" in reply.text


def test_host_memory_warning_through_the_form(client: TestClient) -> None:
    page = client.get("/plan.json?model=llama-3.1-8b&tp=8&offload=4TiB&host_mem=1TiB&gpus_per_node=8").json()
    result = page.get("result", page)
    assert "kv_offload_exceeds_host_memory" in {w["code"] for w in result["warnings"]}


def test_the_tier_cards_explain_lines_show_the_values_not_a_method(client: TestClient) -> None:
    """The explain entries are dicts: `explain.values` in a template is the dict's `values` method
    (its repr "<built-in method values of dict object at 0x…>" was on the page); the card shows
    the entry's own substituted values, as the JSON has them."""
    query = "model=qwen3-8b&tp=2&offload=200GiB&offload_backend=lmcache&live=3000"
    explain = client.get(f"/plan.json?{query}").json()["explain"]
    html = client.get(f"/plan?{query}").text
    assert "built-in method" not in html
    pool = explain["prefix_pool.retained_blocks"]
    assert f"<code>= {escape(pool['values'])}</code>" in html
    tiers = [explain[key] for key in (f"kv_tiers.{name}.tokens" for name in ("gpu", "cpu", "disk")) if key in explain]
    assert tiers  # the CPU tier's tokens at least
    for entry in tiers:
        assert f'title="{escape(entry["formula"])} = {escape(entry["values"])}"' in html


def test_prefix_sentence_without_a_planned_load_says_what_it_needs(client: TestClient) -> None:
    """No average live tokens: no running or retained block counts, so the sentence names the field
    instead of reading "— run the planned load and — can retain"."""
    html = client.get("/plan?model=llama-3.1-8b").text
    assert "— run the planned load" not in html
    assert 'needs "Avg live tokens per request" set' in html
    assert re.search(r'id="retention-share">—<', html)
    with_load = client.get("/plan?model=llama-3.1-8b&live=100").text
    assert "run the planned load and" in with_load and 'needs "Avg live' not in with_load
