"""Issue 17's acceptance walk in a real browser: a new user goes home → plan → save → compare with
the saved link → import a multi-rank log → what-if → deployment diff, and on every page no printed
number contradicts another printed beside it:

- plan pages: tokens = blocks × block size, vLLM's "GPU KV cache size" = tokens (full attention),
  the tokens KPI = the admission row, vLLM's maximum concurrency = blocks ÷ ⌈max_model_len ÷ block
  size⌉ (to its printed precision), the flags' --max-model-len and --block-size = the form's;
- the saved plan shows the numbers of the plan it saved; compare shows A and B as their own pages
  do, with delta = B − A;
- the diff: each rank's token delta = after − before, and the binding-rank tokens = the smallest
  rank's tokens on each side.

The multi-rank log is tests/data/vllm-logs/18 (four RTX 3090 ranks, TP4, a public log).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..server import running_server

pytestmark = pytest.mark.e2e
LOG18 = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log"


@pytest.fixture(scope="module")
def walk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("kvledger-walk-e2e")
    with running_server({"KVLEDGER_DATA_DIR": str(data), "KVLEDGER_DEMO_DATA": "1"}, data / "server.log",
                        ready="/d.json") as url:
        yield url


def _int(text: str) -> int:
    digits = re.sub(r"[^\d\-]", "", text.replace("\u2212", "-").split("(")[0])
    return int(digits)


def _float(text: str) -> float:
    match = re.search(r"-?\d[\d,]*(?:\.\d+)?", text)
    assert match is not None, text
    return float(match[0].replace(",", ""))


def plan_numbers(page: Any) -> dict[str, Any]:
    """The plan's printed numbers, checked against each other."""
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    blocks = _int(page.inner_text("#adm-blocks"))
    tokens = _int(page.inner_text("#adm-tokens"))
    vllm_size = _int(page.inner_text("#adm-vllm_kv_cache_size_tokens"))
    concurrency_text = page.inner_text("#adm-max_concurrency_at_max_model_len")
    flags = page.inner_text("#flags-text")
    mml = int(re.search(r"--max-model-len (\d+)", flags)[1])  # type: ignore[index]
    block_match = re.search(r"--block-size (\d+)", flags)
    block_size = int(block_match[1]) if block_match else 16  # vLLM's default when the flag is left out
    if page.locator("#f-block_size").count():
        chosen = page.input_value("#f-block_size")
        if chosen == "default":  # "vLLM's choice (N)": the size the plan runs with when none is stated
            label = page.eval_on_selector("#f-block_size", "s => s.selectedOptions[0].text")
            chosen = re.search(r"\((\d+)\)", label)[1]  # type: ignore[index]
        assert int(chosen) == block_size
    assert tokens == blocks * block_size, (tokens, blocks, block_size)
    assert vllm_size == tokens
    assert _int(page.inner_text("[data-kpi=tokens] .value")) == tokens
    printed = _float(concurrency_text)
    decimals = len(concurrency_text.split(".")[1].rstrip("×x ")) if "." in concurrency_text else 0
    expected = blocks / math.ceil(mml / block_size)
    assert abs(printed - expected) <= 0.5 * 10**-decimals + 1e-9, (printed, expected)
    return {"blocks": blocks, "tokens": tokens, "max_model_len": mml, "concurrency": printed}


def test_a_new_users_walk_shows_no_contradicting_numbers(browser: Any, walk_server: str) -> None:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=walk_server)
    page = context.new_page()
    page.set_default_timeout(45_000)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # home → a catalogue model's plan
    page.goto("/")
    page.fill("#q", "llama 3.1 8b")
    page.wait_for_selector("#model-results a:has-text('Llama-3.1-8B')")
    page.click("#model-results a:has-text('Llama-3.1-8B')")
    plan = plan_numbers(page)

    # save → the saved plan shows the same numbers
    with page.expect_navigation():
        page.click("#save-plan button")
    page.wait_for_url("**/p/*")
    saved_link = "/p/" + page.url.split("/p/", 1)[1]
    assert plan_numbers(page) == plan

    # compare the saved link (A) with a what-if of the same model (B)
    page.goto("/compare")
    page.fill("#cmp-a", saved_link)
    page.fill("#cmp-b", "/plan?model=llama-3.1-8b&util=0.8")
    with page.expect_navigation():
        page.click("form[action='/compare'] button[type=submit]")
    row = page.locator("#compare-results tr[data-key=tokens] td")
    a, b, delta = (_int(row.nth(i).inner_text()) for i in (1, 2, 3))
    assert a == plan["tokens"] and b - a == delta and delta < 0
    page.goto("/plan?model=llama-3.1-8b&util=0.8")
    assert plan_numbers(page)["tokens"] == b

    # import a multi-rank log → its measured plan
    page.goto("/import")
    page.fill("#log-text", LOG18.read_text(encoding="utf-8"))
    page.click("form[action='/import'] button[type=submit]")
    page.click("text=Make a plan from this run")
    imported = plan_numbers(page)
    assert page.locator("#ranks tbody tr").count() >= 4

    # a what-if on it (this log states no GPU total, so utilization cannot move its measured KV
    # rooms): a shorter max_model_len; the numbers move together
    page.fill("#f-max_model_len", "32768")
    page.wait_for_url("**max_model_len=32768*")
    page.wait_for_function("c => !document.querySelector('#adm-max_concurrency_at_max_model_len')"
                           ".textContent.includes(c)", arg=f"{imported['concurrency']}")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    moved = plan_numbers(page)
    assert moved["max_model_len"] == 32768 != imported["max_model_len"]
    assert moved["tokens"] == imported["tokens"] and moved["concurrency"] > imported["concurrency"]

    # a deployment's diff: every rank's delta is after − before; the binding rank is the smallest
    page.goto("/d/demo-3090-box")
    page.click("#changes a:has-text('diff with')")
    page.wait_for_selector("#diff-rows")
    before_tokens, after_tokens = [], []
    for tr in page.locator("#diff-rows tr[data-row=tokens]").all():
        cells = [c.inner_text() for c in tr.locator("td").all()]
        if "—" in cells[2:4] or not cells[2].strip() or not cells[3].strip():
            continue
        before, after = _int(cells[2]), _int(cells[3])
        before_tokens.append(before)
        after_tokens.append(after)
        assert _int(cells[4]) == after - before
    summary = page.locator("#diff-tokens td")
    if before_tokens:
        assert _int(summary.nth(1).inner_text()) == min(before_tokens)
        assert _int(summary.nth(2).inner_text()) == min(after_tokens)
    context.close()
    assert errors == []
