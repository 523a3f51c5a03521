"""In Chromium: the plan form's Ranks (gpu.count) must make whole engines of TP × PP workers. Typed 8
on a TP8 × PP2 plan of Llama-3.1-70B it kept the first 8 estimated ranks (stage 0, relabelled 0–7),
dropped stage 1 — the binding stage, with the LM head — and showed 3,204,864 tokens for a plan that
has 3,136,592 (at stop 28's estimate); now the field says why under it, and 16 GPUs plan every stage."""

from __future__ import annotations

from typing import Any

from .plan_js import PLAN_IDLE


def test_ranks_that_do_not_make_whole_engines_are_refused_under_the_field(page: Any) -> None:
    page.goto("/plan?model=llama-3.1-70b&pp=2&tp=8")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    tokens = page.inner_text("#adm-tokens")
    planned = page.request.get("/plan.json?model=llama-3.1-70b&pp=2&tp=8").json()["tokens"]
    assert tokens.replace(",", "").startswith(str(planned))  # the whole TP8 x PP2 plan, both stages
    page.fill("#f-ranks", "8")
    page.dispatch_event("#f-ranks", "change")
    page.wait_for_function("() => document.querySelector('#err-ranks').textContent.trim() !== ''")
    page.wait_for_function(PLAN_IDLE)
    said = page.inner_text("#err-ranks")
    assert "8 GPUs do not make whole engines of tp=8 × pp=2 = 16 workers" in said
    assert page.locator("#adm-tokens").count() == 0  # no tokens of stage 0's ranks (or any) for a refused count
    page.fill("#f-ranks", "16")
    page.dispatch_event("#f-ranks", "change")
    page.wait_for_url("**ranks=16**")
    page.wait_for_function("() => document.querySelector('#err-ranks').textContent.trim() === ''")
    page.wait_for_function(PLAN_IDLE)
    page.wait_for_selector("#adm-tokens")
    assert page.inner_text("#adm-tokens") == tokens
