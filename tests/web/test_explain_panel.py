"""From a number on the plan page to the function that computes it, in two hops: the admission
panel's `adm-<key>` (template block `results`) → the presenter key → `admission_panel.COMPUTED_BY[key]`,
a function of `app.core`. The test traces a fresh page computation and checks each named function
runs; for the pure ones it recomputes the number shown from the function itself."""

from __future__ import annotations

import re
import sys
from collections.abc import Generator
from types import CodeType, FrameType
from typing import Any

import pytest

from app.core import admission, ledger
from app.core import plan as core_plan
from app.services.base_documents import MemoryBaseStore
from app.web.formatting import gib, intcomma
from app.web.plan import admission_panel, views

from .support import TestClient

# An unusual what-if, so no memoised sub-result of another test stands in for the computation.
QUERY = {"model": "llama-3.1-8b", "tp": "2", "util": "0.83", "block_size": "32", "growth": "0.07", "live": "3000"}


def _clear_caches() -> None:
    core_plan._rank_kv.cache_clear()  # the services' sub-results are memoised per app only (app.services.memo)


def _traced_codes() -> Generator[set[CodeType], None, None]:
    called: set[CodeType] = set()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            called.add(frame.f_code)

    _clear_caches()
    sys.setprofile(profile)
    try:
        yield called
    finally:
        sys.setprofile(None)


@pytest.fixture
def traced_view() -> tuple[views.PlanView, set[CodeType]]:
    gen = _traced_codes()
    called = next(gen)
    try:
        view = views.plan_view(QUERY, MemoryBaseStore(), levers=False)
    finally:
        gen.close()
    return view, called


def test_every_admission_number_names_a_core_function(client: TestClient) -> None:
    html = client.get("/plan?" + "&".join(f"{k}={v}" for k, v in QUERY.items())).text
    keys = re.findall(r'<details data-item="([a-z_]+)">', html)
    assert len(keys) >= 12
    for key in keys:
        function = admission_panel.COMPUTED_BY[key]
        assert function.__module__.startswith("app.core."), (key, function.__module__)
        assert f'id="adm-{key}"' in html


def test_the_named_functions_run_when_the_page_is_computed(traced_view: tuple[views.PlanView, set[CodeType]]) -> None:
    _, called = traced_view
    rows = admission_panel.admission(traced_view[0].result)
    assert {row.key for row in rows} <= set(admission_panel.COMPUTED_BY)
    for key in {row.key for row in rows}:
        function = admission_panel.COMPUTED_BY[key]
        assert function.__code__ in called, f"{key}: {function.__qualname__} did not run"


def test_the_pure_functions_give_the_numbers_shown(traced_view: tuple[views.PlanView, set[CodeType]]) -> None:
    view = traced_view[0]
    result = view.result
    shown = {row.key: row.value for row in admission_panel.admission(result)}
    binding = admission_panel.binding_row(result)
    # requested: ceil(total × utilization), recomputed by the core's own helper on the same inputs
    requested = ledger.requested_bytes(binding["total_bytes"], result["engine"]["gpu_memory_utilization"])
    assert shown["requested_bytes"] == gib(requested)
    assert shown["schedulable_tokens"] == intcomma(admission.schedulable(result["tokens"], 0.07))
    assert shown["tokens"] == intcomma(result["blocks"] * result["block_size"])
    assert shown["concurrency_ceiling"] == intcomma(result["schedulable_tokens"] // 3000)
