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
