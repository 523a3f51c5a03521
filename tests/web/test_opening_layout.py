"""A catalogue model opens at the smallest layout that starts on the chosen GPU, and says so
(issue 17 item 5); a TP or PP the URL gives is kept, TP1 included."""

from __future__ import annotations

import pytest

from app.services import plans
from app.services.layout_choice import smallest_starting_layout
from app.web.templating import RenderEvent

from .support import TestClient


def _starts(model: str, gpu: str, tp: int, pp: int = 1) -> bool:
    doc = {"model": {"catalogue": model}, "gpu": {"name": gpu}, "layout": {"tp": tp, "pp": pp}}
    return bool(plans.run_plan(doc, with_levers=False)["will_start"])


def test_llama_70b_on_h100_opens_at_tp4_and_says_why(client: TestClient, renders: list[RenderEvent]) -> None:
    response = client.get("/plan?model=llama-3.1-70b", follow_redirects=False)
    assert response.status_code == 200  # the URL stays the catalogue link: the layout is its default
    result = renders[-1].context["result"]
    assert (result["layout"]["tp"], result["layout"]["pp"]) == (4, 1) and result["will_start"]
    note = "opened at TP4: the smallest layout that starts on H100 80GB (TP1, TP2 do not)"
    assert any(n.startswith(note) for n in result["notes"])
    assert 'id="layout-choice"' in response.text and note in response.text
    assert renders[-1].context["form"]["tp"] == "4"
    # the rule, checked independently: TP1 and TP2 do not start, TP4 does
    assert not _starts("llama-3.1-70b", "H100 80GB", 1) and not _starts("llama-3.1-70b", "H100 80GB", 2)
    assert _starts("llama-3.1-70b", "H100 80GB", 4)


@pytest.mark.parametrize(("model", "gpu", "layout"), [
    ("llama-3.1-405b", "H100 80GB", (8, 2)), ("llama-3.1-70b", "H200 141GB", (2, 1)),
    ("llama-3.1-8b", "H100 80GB", (1, 1)),
])  # fmt: skip
def test_each_model_opens_at_the_fewest_gpus_that_start(
    client: TestClient, model: str, gpu: str, layout: tuple[int, int]
) -> None:
    result = client.get("/plan.json", params={"model": model, "gpu": gpu}).json()
    assert (result["layout"]["tp"], result["layout"]["pp"]) == layout and result["will_start"]
    assert ("opened at" in " ".join(result["notes"])) == (layout != (1, 1))


def test_a_given_layout_is_kept_even_when_it_does_not_start(client: TestClient) -> None:
    tp1 = client.get("/plan.json?model=llama-3.1-70b&tp=1").json()
    assert tp1["url"] == "/plan?model=llama-3.1-70b&tp=1" and tp1["layout"]["tp"] == 1 and not tp1["will_start"]
    assert not any("opened at" in n for n in tp1["notes"])
    tp4 = client.get("/plan.json?model=llama-3.1-70b&tp=4&util=0.85").json()
    assert tp4["url"] == "/plan?model=llama-3.1-70b&tp=4&util=0.85"
    pp2 = client.get("/plan.json?model=llama-3.1-70b&pp=2").json()
    assert (pp2["layout"]["tp"], pp2["layout"]["pp"]) == (4, 2)  # TP from the opening layout


def test_nothing_starts_is_said_not_hidden() -> None:
    choice = smallest_starting_layout({"model": {"catalogue": "llama-3.1-405b"}, "gpu": {"total": "4GiB"}})
    assert choice is not None and not choice.starts and "no layout up to TP8 × PP16 starts" in choice.note


def test_a_model_that_starts_nowhere_opens_at_tp1_saying_so(client: TestClient) -> None:
    result = client.get("/plan.json?model=llama-3.1-405b&gpu=4GiB").json()
    assert (
        result["layout"]["tp"] == 1
        and not result["will_start"]
        and result["url"] == "/plan?gpu=4GiB&model=llama-3.1-405b"
    )
    assert any(n.startswith("no layout up to TP8 × PP16 starts on a GPU of 4GiB") for n in result["notes"])
