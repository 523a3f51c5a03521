"""A catalogue model opens at the smallest layout that starts on the chosen GPU, and says so
(issue 17 item 5); a TP or PP the URL gives is kept, TP1 included."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.services import plan_query, plans
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
    (note,) = [n for n in result["notes"] if n.startswith("opened at")]
    # the settings it tried the layouts with: the catalogue model's own max_model_len (none is given)
    assert note.startswith("opened at TP4: the smallest layout that starts on H100 80GB at max_model_len ")
    assert f"max_model_len {result['engine']['max_model_len']:,}," in note and "(TP1, TP2 do not)" in note
    assert 'id="layout-choice"' in response.text and note.split(" at max_model_len")[0] in response.text
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


# -- the opening layout is chosen on the query's own document -------------------------------------
# A colleague's walk: /plan?gpu=L4+24GB&live=4000&max_model_len=8192 said "opened at TP2 ... (TP1
# does not)": the layouts were tried at the model's default max_model_len (131,072), while TP1 at
# 8,192 starts with 2,037 blocks (`kvledger plan` of the same document).

def _run(query: dict[str, str], tp: int = 1, pp: int = 1) -> dict[str, Any]:
    doc = plan_query.plan_from_query(query)
    return plans.run_plan({**doc, "layout": {**(doc.get("layout") or {}), "tp": tp, "pp": pp}}, with_levers=False)


def _opened(result: dict[str, Any]) -> list[str]:
    return [n for n in result["notes"] if n.startswith("opened at")]


def test_the_url_max_model_len_decides_the_opening_layout(client: TestClient) -> None:
    query = {"gpu": "L4 24GB", "live": "4000", "max_model_len": "8192"}
    shown = client.get("/plan.json", params=query).json()
    tp1 = _run(query)
    assert tp1["will_start"] and tp1["engine"]["max_model_len"] == 8192
    assert (shown["layout"]["tp"], shown["layout"]["pp"]) == (1, 1) and shown["blocks"] == tp1["blocks"]
    assert not _opened(shown) and shown["url"] == "/plan?gpu=L4+24GB&live=4000&max_model_len=8192"
    # the simulator's pool is that plan's (one opening layout for both)
    sim = client.get("/sim.json", params=query).json()
    assert sim["pool"] == {"blocks": tp1["blocks"], "block_size": tp1["block_size"]}


def test_a_max_model_len_that_does_not_fit_at_tp1_opens_at_tp2_saying_why(client: TestClient) -> None:
    query = {"gpu": "L4 24GB", "max_model_len": "32768"}
    tp1, tp2 = _run(query), _run(query, 2)
    assert not tp1["fits_max_model_len"] and not tp1["will_start"] and tp2["will_start"]
    assert tp1["tokens"] < 32768  # TP1's pool holds fewer tokens than one request
    shown = client.get("/plan.json", params=query).json()
    assert (shown["layout"]["tp"], shown["blocks"]) == (2, tp2["blocks"])
    (note,) = _opened(shown)
    engine = tp1["engine"]
    assert note.startswith(f"opened at TP2: the smallest layout that starts on L4 24GB at max_model_len 32,768, "
                           f"gpu_memory_utilization {engine['gpu_memory_utilization']}, bfloat16 weights, "
                           "auto KV cache (TP1 does not)")
    assert shown["url"] == "/plan?gpu=L4+24GB&max_model_len=32768"  # the choice stays implicit


@pytest.mark.parametrize("extra", [{"util": "0.98"}, {"kv_dtype": "fp8"}])
def test_util_and_kv_dtype_in_the_url_change_the_choice(client: TestClient, extra: dict[str, str]) -> None:
    query = {"gpu": "L4 24GB", "max_model_len": "32768"}
    assert client.get("/plan.json", params=query).json()["layout"]["tp"] == 2  # as above
    changed = {**query, **extra}
    tp1 = _run(changed)
    assert tp1["will_start"]  # the URL's own setting makes TP1 start ...
    shown = client.get("/plan.json", params=changed).json()
    assert shown["layout"]["tp"] == 1 and shown["blocks"] == tp1["blocks"] and not _opened(shown)  # so it opens there


def _smallest_starting(query: dict[str, str]) -> tuple[int, int]:
    """The rule, stated independently: the model's TP degrees up to 8, then PP stages of the
    largest; the first at which `plans.run_plan` of the query's document starts (TP1 if none)."""
    first = _run(query)
    if first["will_start"]:
        return 1, 1
    tps = [t for t in first["allowed_tp"] if t <= 8]
    for tp, pp in [*((t, 1) for t in tps), *((max(tps), p) for p in (2, 4, 8, 16))]:
        if _run(query, tp, pp)["will_start"]:
            return tp, pp
    return 1, 1


def test_the_opening_layout_is_the_smallest_that_run_plan_starts(client: TestClient) -> None:
    rng = random.Random(27)
    for _ in range(6):
        query = {
            "model": rng.choice(["llama-3.1-8b", "mistral-7b-v0.3", "llama-3.1-70b"]),
            "gpu": rng.choice(["L4 24GB", "A100 40GB", "H100 80GB"]),
            "max_model_len": str(rng.choice([4096, 16384, 32768, 65536])),
            "util": str(rng.choice([0.8, 0.9, 0.95])),
            "kv_dtype": rng.choice(["auto", "fp8"]),
        }
        if rng.random() < 0.5:
            query["quant"] = "fp8"
        shown = client.get("/plan.json", params=query).json()
        assert (shown["layout"]["tp"], shown["layout"]["pp"]) == _smallest_starting(query), query
