"""Issue 17 in a real browser, trustA's items (2, 4, 15): the paths a new user walks.

Item 2: an imported Ray excerpt (vllm-project/vllm#13074, tests/data/vllm-logs/public/30: the
driver prints its rows, worker pid=3151 only its budget line) never fills the worker with a
single-GPU estimate; the plan says what it did, asks for the layout, and never says "import a log".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ..server import running_server

pytestmark = pytest.mark.e2e
PUBLIC = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public"
RAY_R1 = PUBLIC / "30-v072-deepseek-r1-h20-141gb-ray-tp8-pp2-driver-rows-worker-budget.log"  # vllm#13074


@pytest.fixture(scope="module")
def trust_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("kvledger-trust-a-e2e")
    with running_server({"KVLEDGER_DATA_DIR": str(data), "KVLEDGER_DEMO_DATA": "1"}, data / "server.log",
                        ready="/d.json") as url:
        yield url


def _page(browser: Any, base_url: str, width: int) -> tuple[Any, Any, list[str]]:
    context = browser.new_context(viewport={"width": width, "height": 900}, base_url=base_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" and "(Unprocessable" not in msg.text
            else None)
    page.set_default_timeout(30_000)
    return context, page, errors


@pytest.fixture
def tpage(browser: Any, trust_server: str) -> Iterator[Any]:
    context, page, errors = _page(browser, trust_server, 1400)
    yield page
    context.close()
    assert errors == [], errors


def _import(page: Any, text: str, model: str, tp: str = "", pp: str = "") -> None:
    page.goto("/import")
    page.fill("#log-text", text)
    page.select_option("#log-model", model)
    page.fill("#log-tp", tp)
    page.fill("#log-pp", pp)
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".import-run")


def _open_plan(page: Any) -> None:
    page.click("text=Make a plan from this run")
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")


def _rank_labels(page: Any) -> list[str]:
    labels: list[str] = page.evaluate(
        "() => [...document.querySelectorAll('#ranks tbody tr')].map(tr => tr.cells[0].textContent.trim())"
    )
    return labels


def test_imported_ray_run_never_fills_a_rowless_rank_with_a_single_gpu_estimate(tpage: Any) -> None:
    """Item 2: TP8 × PP2 DeepSeek-R1 on Ray, the driver with rows, a worker with its budget only."""
    text = RAY_R1.read_text(encoding="utf-8")
    _import(tpage, text, "deepseek-r1")
    _open_plan(tpage)
    body = tpage.inner_text("main")
    assert "import a" not in body.lower()
    assert "628.8" not in body and "626.9" not in body and "−490" not in body and "-490" not in body
    assert "pid=3151" not in " ".join(_rank_labels(tpage))
    notes = tpage.inner_text("#warnings")
    assert "pid=3151" in notes and "left out" in notes and "TP and PP" in notes
    # the layout given on the import page (the run's TP8 × PP2): kept in the fields, the plan at it
    _import(tpage, text, "deepseek-r1", tp="8", pp="2")
    assert tpage.input_value("#log-tp") == "8" and tpage.input_value("#log-pp") == "2"
    _open_plan(tpage)
    notes = tpage.inner_text("#warnings")
    assert "which of the 2 pipeline stages" in notes and "states no layout" not in notes
    labels = _rank_labels(tpage)
    assert len(labels) == 1 and labels[0].startswith("driver") and "import a" not in tpage.inner_text("main").lower()


def test_import_refuses_a_layout_that_is_not_a_whole_number_naming_the_field(tpage: Any) -> None:
    tpage.goto("/import")
    tpage.fill("#log-text", RAY_R1.read_text(encoding="utf-8"))
    tpage.fill("#log-tp", "eight")
    tpage.click("form[action='/import'] button[type=submit]")
    alert = tpage.wait_for_selector("[role=alert]")
    assert "TP must be a whole number" in alert.inner_text()


def test_a_plan_that_will_not_start_leads_with_why_and_its_levers_start(tpage: Any) -> None:
    """Item 4: Llama-3.1-70B on one 80 GiB GPU, then a 1 TiB manual budget at TP4."""
    tpage.goto("/plan?model=llama-3.1-70b&gpu_total=80GiB&tp=1&pp=1")  # a TP alone opens at a PP that starts
    tpage.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    first = tpage.evaluate("() => document.querySelector('#results .card').id")
    assert first == "not-starting"
    assert tpage.inner_text('[data-kpi="tokens"] .value').strip() == "—"
    assert tpage.locator("#flags-text").count() == 0 and tpage.locator("#uniform-flag").count() == 0
    lever = tpage.locator('#start-levers tr[data-knob="tensor_parallel_size"] a')
    assert "TP 1 → 4" in lever.inner_text()
    promised = tpage.inner_text('#start-levers tr[data-knob="tensor_parallel_size"] td:nth-child(2)')
    lever.click()
    tpage.wait_for_url("**tp=4**")
    tpage.wait_for_selector("#flags-text")
    assert tpage.locator("#not-starting").count() == 0
    tokens = tpage.inner_text('[data-kpi="tokens"] .value').strip()
    assert f"{tokens} tokens" in promised
    assert "--tensor-parallel-size 4" in tpage.inner_text("#flags-text")

    tpage.goto("/plan?model=llama-3.1-70b&gpu_total=80GiB&tp=4&kv_bytes=1TiB")
    tpage.wait_for_selector("#not-starting")
    why = tpage.inner_text("#not-starting ul.warnings")
    assert "ranks TP0–TP3: will not fit --kv-cache-memory-bytes" in why  # item 14: said once
    assert "13,4" not in tpage.inner_text(".kpis")
    tpage.click('#start-levers tr[data-knob="kv_cache_memory_bytes"] a')
    tpage.wait_for_selector("#flags-text")
    assert "--kv-cache-memory-bytes" not in tpage.inner_text("#flags-text")


PAGES_390 = ("/", "/plan?model=llama-3.1-70b&gpu_total=80GiB&tp=4", "/plan?model=llama-3.1-70b&gpu_total=80GiB",
             "/import", "/compare", "/sim", "/p", "/d", "/docs")


@pytest.mark.parametrize("path", PAGES_390)
def test_390_px_wide_no_horizontal_overflow_and_a_skip_link(browser: Any, trust_server: str, path: str) -> None:
    """Item 15: a phone-width viewport never scrolls sideways; the first Tab reaches the skip link."""
    context, page, errors = _page(browser, trust_server, 390)
    try:
        page.goto(path)
        page.wait_for_load_state("load")
        if path.startswith("/plan"):
            page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        # a wide table, code block or chart scrolls inside its own box (the SVG pool chart keeps a readable
        # minimum width); that box itself must fit
        boxes = page.evaluate("() => [...document.querySelectorAll('.chart-svg')]"
                              ".map(e => e.getBoundingClientRect().right)")
        assert all(right <= 391 for right in boxes), boxes
        wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
            .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1
                         && getComputedStyle(e).position !== 'absolute'
                         && !(e.parentElement && e.parentElement.closest('table, pre, .js-plotly-plot, .chart-svg')))
            .slice(0, 5).map(e => e.tagName + '.' + e.className + '#' + e.id)""")
        assert width <= 390 and wide == [], (path, width, wide)
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.className") == "skip-link"
        page.keyboard.press("Enter")
        page.wait_for_function("() => document.activeElement && document.activeElement.id === 'main'")
    finally:
        context.close()
    assert errors == [], errors


def test_copy_buttons_confirm(tpage: Any) -> None:
    tpage.goto("/plan?model=llama-3.1-8b&gpu_total=80GiB")
    tpage.wait_for_selector("#flags-text")
    button = tpage.locator('button[data-copy="flags-text"]')
    button.click()
    tpage.wait_for_function("() => document.querySelector('button[data-copy=\"flags-text\"]').textContent === 'Copied'")
