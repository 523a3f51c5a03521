"""Issue 17 in a real browser: every number right, or refused, on the paths a new user walks.

Item 1: /compare with a saved-plan link (absolute, relative, its .json twin, a bare slug) compares
the saved plan as saved; anything unreadable is an inline error naming the field.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from ..server import running_server

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def trust_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data = tmp_path_factory.mktemp("kvledger-trust-e2e")
    with running_server({"KVLEDGER_DATA_DIR": str(data), "KVLEDGER_DEMO_DATA": "1"}, data / "server.log",
                        ready="/d.json") as url:
        yield url


@pytest.fixture
def tpage(browser: Any, trust_server: str) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900}, base_url=trust_server)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # a refused input is a 422 page, which Chromium reports as a failed resource load
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" and "(Unprocessable" not in msg.text
            else None)
    page.set_default_timeout(20_000)
    yield page
    context.close()
    assert errors == [], errors


def _json(url: str) -> Any:
    with urllib.request.urlopen(url) as response:
        return json.loads(response.read())


def _save(page: Any, plan_url: str) -> str:
    page.goto(plan_url)
    page.wait_for_selector("#chart-pool[data-drawn]", state="attached")
    page.click("#save-plan button")
    page.wait_for_url("**/p/*")
    return str(page.url)


def _compare(page: Any, a: str, b: str) -> None:
    page.goto("/compare")
    page.fill("#cmp-a", a)
    page.fill("#cmp-b", b)
    page.click("form.card button[type=submit]")
    page.wait_for_load_state("load")


def test_compare_takes_a_saved_plan_as_saved(tpage: Any, trust_server: str) -> None:
    link = _save(tpage, "/plan?model=llama-3.1-70b&tp=4&util=0.88")
    saved = _json(link + ".json")
    slug = link.rsplit("/", 1)[1]
    relative = f"/p/{slug}"
    for b in (link, relative, relative + ".json", trust_server + relative + ".json", slug):
        _compare(tpage, "/plan?model=llama-3.1-70b&tp=8&util=0.88", b)
        tpage.wait_for_selector("#compare-results")
        assert tpage.locator("[role=alert]").count() == 0, b
        tokens_b = tpage.inner_text("#compare-results tr[data-key='tokens'] td:nth-child(3)")
        assert tokens_b == f"{saved['tokens']:,}", b
        assert f"B: {saved['model']['name']}" in tpage.inner_text(".card p.small"), b
        flags_b = tpage.inner_text(".grid2 .card:nth-child(2) pre")
        assert "--tensor-parallel-size 4" in flags_b and "--gpu-memory-utilization 0.88" in flags_b, b
        twin = _json(f"{trust_server}/compare.json?a={quote('tp=8')}&b={quote(b)}")
        assert twin["b_url"] == relative and twin["results"]["tokens"]["b"] == saved["tokens"], b
    # the saved plan on side A, a what-if on side B
    _compare(tpage, slug, "/plan?model=llama-3.1-70b&tp=4&util=0.9")
    assert tpage.inner_text("#compare-results tr[data-key='tokens'] td:nth-child(2)") == f"{saved['tokens']:,}"


@pytest.mark.parametrize("junk", ["banana", "/p/nosuchplan", "foo=bar", "https://example.com/elsewhere"])
@pytest.mark.parametrize("side", ["a", "b"])
def test_compare_refuses_what_it_cannot_read_naming_the_field(tpage: Any, junk: str, side: str) -> None:
    good = "/plan?model=llama-3.1-8b"
    _compare(tpage, junk if side == "a" else good, good if side == "a" else junk)
    alert = tpage.locator("[role=alert]")
    alert.wait_for()
    text = alert.inner_text()
    assert f"Plan {side.upper()}" in text, text
    assert tpage.locator("#compare-results").count() == 0
