"""A slider tick's fragment leaves out the formula bodies of the admission rows the page has closed
(the request's KV-Explain-Open names the open ones, app.js); the whole page, and a request that does
not name them, carry every body. The body sent is the one the whole page renders."""

from __future__ import annotations

import re

from .support import TestClient

PLAN = "/plan?model=llama-3.1-70b&tp=4&util=0.87"
TICK = {"HX-Request": "true", "HX-Target": "results"}
ROW = re.compile(r'<details data-item="([a-z_]+)">.*?(<div class="explain-body"[^>]*>.*?</div>)\s*</details>', re.S)


def _bodies(text: str) -> dict[str, str]:
    return dict(ROW.findall(text))


def test_a_tick_sends_the_open_rows_formulas_only(client: TestClient) -> None:
    page = _bodies(client.get(PLAN).text)
    assert "blocks" in page and not any("data-deferred" in body for body in page.values())
    tick = client.get(PLAN, headers={**TICK, "KV-Explain-Open": "blocks,no_such_row"})
    assert tick.status_code == 200 and "KV-Explain-Open" in tick.headers["vary"]
    sent = _bodies(tick.text)
    assert sent.keys() == page.keys()
    assert sent["blocks"] == page["blocks"]  # the same workings as the whole page
    assert all("data-deferred" in body for key, body in sent.items() if key != "blocks")
    assert len(tick.text) < len(client.get(PLAN, headers=TICK).text)


def test_a_tick_without_the_header_sends_every_formula(client: TestClient) -> None:
    page = _bodies(client.get(PLAN).text)
    assert _bodies(client.get(PLAN, headers=TICK).text) == page
    none_open = _bodies(client.get(PLAN, headers={**TICK, "KV-Explain-Open": ""}).text)
    assert none_open.keys() == page.keys() and all("data-deferred" in body for body in none_open.values())
