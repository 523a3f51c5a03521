"""Issue 17 item 6 in a real browser: a ledger keeps every engine figure its log states, and the
deployment history and the ledger diff show them.

The v0.8.4 log is tests/data/vllm-logs/public/03 (vllm-project/vllm#17062: Llama-3.1-8B on an
L40S, 'GPU KV cache size: 158,656 tokens' and 'Maximum concurrency for 32,768 tokens per request:
4.84x', no KV bytes); the earlier ledger is tests/data/vllm-logs/01 (v0.6.4, '# GPU blocks').
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..server import running_server

pytestmark = pytest.mark.e2e
LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
V064 = LOGS / "01-v064-llama31-8b-rtx3090-tp1.log"
V084 = LOGS / "public" / "03-v084-llama31-8b-l40s-tp1.log"
V024_CG = LOGS / "23-v0240-tp1-cg-pool-actual-vs-estimated.log"


@pytest.fixture(scope="module")
def ledger_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("kvledger-ledger-figures-e2e")
    with running_server({"KVLEDGER_DATA_DIR": str(data), "KVLEDGER_DEMO_DATA": "1"}, data / "server.log",
                        ready="/d.json") as url:
        yield url


def _import(page: Any, path: Path, captured: str) -> None:
    page.fill("#f-log", path.read_text(encoding="utf-8"))
    page.fill("#import-log [name=captured_at]", captured)
    with page.expect_navigation():
        page.click("#import-log button[type=submit]")


def test_history_and_diff_show_tokens_concurrency_and_graph_estimate(browser: Any, ledger_server: str) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=ledger_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.set_default_timeout(45_000)

    page.goto("/d")
    page.fill("#create-deployment [name=slug]", "llama8b-upgrades")
    page.fill("#create-deployment [name=name]", "Llama 3.1 8B upgrades")
    with page.expect_navigation():
        page.click("#create-deployment button[type=submit]")
    page.wait_for_selector("#import-log")
    _import(page, V064, "2024-12-01")
    page.goto("/d/llama8b-upgrades")
    _import(page, V084, "2025-04-24")
    page.goto("/d/llama8b-upgrades")
    rows = page.locator("#ledger-list tbody tr")
    assert rows.count() == 2
    newest = rows.nth(0).inner_text()
    assert "158,656" in newest and "4.84×" in newest and "32,768" in newest

    page.fill("#diff-form [name=a]", rows.nth(1).locator("a").first.get_attribute("href") or "")
    page.fill("#diff-form [name=b]", rows.nth(0).locator("a").first.get_attribute("href") or "")
    with page.expect_navigation():
        page.click("#diff-form button[type=submit]")
    cells = page.locator("#diff-tokens td")
    # A: '# GPU blocks: 1478' × block size 16 = 23,648 (as vLLM 0.6.4 sizes it); B: vLLM's own line
    assert [cells.nth(i).inner_text() for i in (1, 2, 3)] == ["23,648", "158,656", "+135,008"]
    concurrency = page.locator("#diff-vllm-concurrency td")
    assert "0.82×" in concurrency.nth(1).inner_text() and "29,000" in concurrency.nth(1).inner_text()
    assert "4.84×" in concurrency.nth(2).inner_text() and "32,768" in concurrency.nth(2).inner_text()
    assert concurrency.nth(3).inner_text() == ""  # stated for different lengths: no delta

    # the CUDA graph estimate and actual of a v0.24 log, each a row of the ledger page
    page.goto("/d/llama8b-upgrades")
    _import(page, V024_CG, "2025-07-09")
    page.goto("/d/llama8b-upgrades")
    page.locator("#ledger-list tbody tr").nth(0).locator("a").first.click()
    page.wait_for_selector("#ledger-ranks")
    head = page.inner_text("#ledger-ranks thead")
    assert "CUDA GRAPHS (VLLM'S ESTIMATE)" in head.upper()
    cells = page.inner_text("#ledger-ranks tbody")
    assert "0.63 GiB" in cells and "0.65 GiB" in cells
    context.close()
    assert errors == []


def test_the_demo_deployment_says_it_is_illustrative(browser: Any, ledger_server: str) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=ledger_server)
    page = context.new_page()
    page.goto(f"{ledger_server}/d/demo-3090-box")
    head = page.inner_text(".page-head")
    assert "illustrative" in head and "not one deployment's history" in head
    context.close()
