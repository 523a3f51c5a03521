"""Steps the plan-page browser tests share: wait for a drawn, idle page; read the page's .json twin;
open a plan from a pasted `vllm serve` command; open a saved plan by "Edit as a what-if"."""

from __future__ import annotations

import json
from typing import Any

from .plan_js import PLAN_IDLE

SAME = {"Sec-Fetch-Site": "same-origin"}


def ready(page: Any) -> None:
    """The pool chart drawn and no plan-form request in flight."""
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.wait_for_function(PLAN_IDLE)


def twin(page: Any) -> dict[str, Any]:
    """The plan the page's address plans, from its .json twin."""
    plan: dict[str, Any] = page.request.get(page.url.replace("/plan?", "/plan.json?", 1)).json()
    return plan


def paste_serve(page: Any, command: str, gpu: str = "H100 80GB") -> dict[str, Any]:
    """Paste `command` into the home page's serve box on `gpu`, open its plan, and return the plan."""
    page.goto("/")
    page.fill("#home-serve", command)
    page.fill("#home-serve-gpu", gpu)
    page.click("form[action='/start/serve'] button[type=submit]")
    page.wait_for_url("**/plan?base=**")
    ready(page)
    return twin(page)


def edit_saved(page: Any, doc: dict[str, Any]) -> None:
    """Save `doc` and open it by "Edit as a what-if" (a document with no knob stays a base)."""
    saved = page.request.post("/api/v1/plans", data=json.dumps(doc),
                              headers={**SAME, "Content-Type": "application/json"})
    assert saved.status == 201, saved.text()
    page.goto(saved.json()["url"])
    page.click("#edit-whatif")
    ready(page)
    assert "base=" in page.url
