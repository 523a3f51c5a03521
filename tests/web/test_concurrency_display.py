"""The plan page prints vLLM's max concurrency as vLLM does ("%.2fx" of blocks / per-request
blocks), not the JSON's 4-decimal value rounded a second time (2.82495 → 2.825 → "2.83")."""

from __future__ import annotations

import math
import re

from app.web.app import create_app

from .support import TestClient, make_settings


def test_concurrency_is_rounded_once() -> None:
    client = TestClient(create_app(make_settings()))
    url = "/plan?model=llama-3.1-8b&util=0.8"  # 23,142 blocks / 8,192 = 2.82495…
    result = client.get(url.replace("/plan?", "/plan.json?")).json()
    result = result.get("result", result)
    exact = result["blocks"] / math.ceil(result["engine"]["max_model_len"] / result["block_size"])
    cell = re.search(r'id="adm-max_concurrency_at_max_model_len"[^>]*>([^<]*)<', client.get(url).text)
    assert cell is not None and cell.group(1) == f"{exact:.2f}×", (cell and cell.group(1), exact)


def test_the_unrounded_value_wins_over_the_json_rounding() -> None:
    from app.web.plan.admission_panel import _concurrency_text

    explained = {"max_concurrency_at_max_model_len": 2.825,
                 "explain": {"max_concurrency_at_max_model_len": {"result": f"{2.824951171875:.2f}x"}}}  # fmt: skip
    assert _concurrency_text(explained) == "2.82×"
    assert _concurrency_text({"max_concurrency_at_max_model_len": 1.5}) == "1.50×"  # no explanation: the JSON's


def _limit_cell(client: TestClient, url: str) -> str:
    cell = re.search(r'id="adm-binding_limit"[^>]*>([^<]*)<', client.get(url).text)
    assert cell is not None
    return cell.group(1)


def test_the_limit_that_binds_first_is_unknown_without_live_tokens() -> None:
    # TP4 Llama-3.1-70B at 131,072 tokens holds 3.45 max-length requests; "Limit that binds first:
    # max_num_seqs" (1,024) was a claim the page had nothing to base on
    client = TestClient(create_app(make_settings()))
    assert _limit_cell(client, "/plan?model=llama-3.1-70b&tp=4") == "unknown (set avg live tokens)"
    assert _limit_cell(client, "/plan?model=llama-3.1-70b&tp=4&live=12000") == "KV blocks (memory)"
    assert _limit_cell(client, "/plan?model=llama-3.1-70b&tp=4&live=100&max_num_seqs=64") == "max_num_seqs"
