"""A catalogue model opens at the smallest layout that starts on the chosen GPU, and says so
(issue 17 item 5); a TP or PP the URL gives is kept, TP1 included."""

from __future__ import annotations

import random
from typing import Any

import pytest

from app.core.errors import InputError
from app.services import layout_choice, plan_query, plans
from app.services.layout_choice import smallest_starting_layout
from app.web.plan.present import start_lever_rows
from app.web.templating import RenderEvent

from .support import HX, TestClient


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
    # both given (a TP alone opens at the smallest PP that starts at it: test_layout_at_a_given_tp)
    tp1 = client.get("/plan.json?model=llama-3.1-70b&tp=1&pp=1").json()
    assert tp1["url"] == "/plan?model=llama-3.1-70b&pp=1&tp=1" and tp1["layout"]["tp"] == 1 and not tp1["will_start"]
    assert tp1["layout"]["pp"] == 1 and not any("opened at" in n for n in tp1["notes"])
    tp4 = client.get("/plan.json?model=llama-3.1-70b&tp=4&util=0.85").json()
    assert tp4["url"] == "/plan?model=llama-3.1-70b&tp=4&util=0.85"
    pp2 = client.get("/plan.json?model=llama-3.1-70b&pp=2").json()
    # a PP alone opens at the smallest TP that starts at it (test_layout_at_a_given_pp), not at the
    # TP1-based choice's TP4: TP2 x PP2 starts
    assert (pp2["layout"]["tp"], pp2["layout"]["pp"]) == (2, 2) and pp2["will_start"]


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


# -- a TP given without a PP: the smallest PP that starts at that TP --------------------------------
# Stop 27's walk: /plan?model=llama-3.1-70b&gpu=L40S 48GB&tp=2 opened at TP2 × PP1, which does not
# start: the PP was the one the TP1-based choice found (TP8 × PP1), not one tried at TP2.

def _smallest_pp(query: dict[str, str], tp: int) -> int | None:
    """The rule, stated independently: the first of PP 1, 2, 4, 8, 16 at which `plans.run_plan` of
    the query's document at `tp` starts (None: none does)."""
    return next((pp for pp in (1, 2, 4, 8, 16) if _run(query, tp, pp)["will_start"]), None)


def test_layout_at_a_given_tp_is_the_smallest_pp_that_starts_at_it(client: TestClient) -> None:
    query = {"model": "llama-3.1-70b", "gpu": "L40S 48GB"}
    assert _smallest_pp(query, 2) == 4 and _smallest_starting(query) == (8, 1)  # not the TP1-based choice's PP1
    shown = client.get("/plan.json", params={**query, "tp": "2"}).json()
    assert (shown["layout"]["tp"], shown["layout"]["pp"]) == (2, 4) and shown["will_start"]
    assert shown["blocks"] == _run(query, 2, 4)["blocks"]
    (note,) = _opened(shown)
    assert note.startswith("opened at TP2 × PP4: the smallest PP that starts at the URL's TP2 on L40S 48GB at "
                           "max_model_len 131,072, gpu_memory_utilization 0.92, bfloat16 weights")
    assert note.endswith("(TP2, TP2 × PP2 do not); set PP to change it")
    assert shown["url"] == "/plan?gpu=L40S+48GB&model=llama-3.1-70b&tp=2"  # the chosen PP stays implicit
    page = client.get("/plan", params={**query, "tp": "2"})
    assert 'id="layout-choice"' in page.text and "the smallest PP that starts at the URL&#39;s TP2" in page.text


def test_no_pp_starting_at_a_given_tp_is_said(client: TestClient) -> None:
    shown = client.get("/plan.json?model=llama-3.1-405b&gpu=4GiB&tp=2").json()
    assert (shown["layout"]["tp"], shown["layout"]["pp"]) == (2, 1) and not shown["will_start"]
    assert any(n.startswith("no PP up to TP2 × PP16 starts at the URL's TP2 on a GPU of 4GiB") for n in shown["notes"])


def test_the_pp_at_a_given_tp_is_the_smallest_that_run_plan_starts(client: TestClient) -> None:
    rng = random.Random(28)
    for _ in range(8):
        query = {
            "model": rng.choice(["llama-3.1-8b", "llama-3.1-70b", "qwen3-30b-a3b"]),
            "gpu": rng.choice(["L4 24GB", "L40S 48GB", "A100 40GB"]),
            "max_model_len": str(rng.choice([8192, 32768, 131072])),
            "util": str(rng.choice([0.8, 0.9])),
        }
        tp = rng.choice([1, 2, 4])
        shown = client.get("/plan.json", params={**query, "tp": str(tp)}).json()
        assert shown["layout"]["tp"] == tp, query
        assert shown["layout"]["pp"] == (_smallest_pp(query, tp) or 1), (query, tp)


# -- a PP given without a TP: the smallest TP that starts at that PP -------------------------------
# The symmetric case of stop 27's: /plan?model=llama-3.1-70b&pp=2 opened at TP4 x PP2 (8 GPUs), the
# TP of the TP1-based choice (TP4 x PP1), where TP2 x PP2 (4 GPUs) starts.

def _smallest_tp(query: dict[str, str], pp: int) -> int | None:
    """The rule, stated independently: the first TP of 1 ... 8 that `plans.run_plan` of the query's
    document accepts at `pp` (a degree vLLM refuses is an InputError there) and that starts (None:
    none does)."""
    for tp in range(1, 9):
        try:
            if _run(query, tp, pp)["will_start"]:
                return tp
        except InputError:
            continue
    return None


def test_layout_at_a_given_pp_is_the_smallest_tp_that_starts_at_it(client: TestClient) -> None:
    query = {"model": "llama-3.1-70b"}
    assert _smallest_tp(query, 2) == 2 and _smallest_starting(query) == (4, 1)  # not the TP1-based choice's TP4
    shown = client.get("/plan.json", params={**query, "pp": "2"}).json()
    assert (shown["layout"]["tp"], shown["layout"]["pp"]) == (2, 2) and shown["will_start"]
    assert shown["blocks"] == _run(query, 2, 2)["blocks"]
    (note,) = _opened(shown)
    assert note == ("opened at TP2 × PP2: the smallest TP that starts at the URL's PP2 on H100 80GB at "
                    "max_model_len 131,072, gpu_memory_utilization 0.92, bfloat16 weights, auto KV cache "
                    "(TP1 × PP2 does not); set TP to change it")
    assert shown["url"] == "/plan?model=llama-3.1-70b&pp=2"  # the chosen TP stays implicit
    page = client.get("/plan", params={**query, "pp": "2"})
    assert 'id="layout-choice"' in page.text and "the smallest TP that starts at the URL&#39;s PP2" in page.text


def test_no_tp_starting_at_a_given_pp_is_said(client: TestClient) -> None:
    shown = client.get("/plan.json?model=llama-3.1-405b&gpu=4GiB&pp=2").json()
    assert (shown["layout"]["tp"], shown["layout"]["pp"]) == (1, 2) and not shown["will_start"]
    (note,) = [n for n in shown["notes"] if n.startswith("no TP up to")]
    assert note.startswith("no TP up to TP8 × PP2 starts at the URL's PP2 on a GPU of 4GiB at max_model_len ")
    assert note.endswith(": opened at TP1 × PP2; a larger PP or card, fp8 weights or fp8 KV, or a shorter "
                         "max_model_len is needed")


def test_the_tp_at_a_given_pp_is_the_smallest_that_run_plan_starts(client: TestClient) -> None:
    """Seeded queries over models whose TP degrees differ (phi-4: 1, 2, 5; qwen2.5-7b: 1, 2, 4) and
    cards, against `_smallest_tp`; where none starts the page stays at TP1."""
    rng = random.Random(2029)
    for _ in range(10):
        query = {
            "model": rng.choice(["llama-3.1-70b", "phi-4", "qwen2.5-7b-instruct", "qwen3-30b-a3b"]),
            "gpu": rng.choice(["12GiB", "L4 24GB", "L40S 48GB", "A100 40GB"]),
            "max_model_len": str(rng.choice([8192, 16384, 32768])),
            "util": str(rng.choice([0.8, 0.9])),
            "kv_dtype": rng.choice(["auto", "fp8"]),
        }
        pp = rng.choice([1, 2, 4])
        shown = client.get("/plan.json", params={**query, "pp": str(pp)}).json()
        assert shown["layout"]["pp"] == pp, query
        assert shown["layout"]["tp"] == (_smallest_tp(query, pp) or 1), (query, pp)
    # the non-power-of-two degree is reached: phi-4 on 12 GiB at PP1 opens at TP5 (TP4 is refused)
    phi = client.get("/plan.json?model=phi-4&gpu=12GiB&pp=1").json()
    assert (phi["layout"]["tp"], _smallest_tp({"model": "phi-4", "gpu": "12GiB"}, 1)) == (5, 5)
    assert "(TP1, TP2 do not)" in _opened(phi)[0]


# -- the canonical URL: a given TP/PP is dropped only where the URL without it opens there too -----

@pytest.mark.parametrize(("query", "url"), [
    # 70B on H100 opens at TP4 (× PP1), saying so: a given TP4 is kept (its page has no note) ...
    ("model=llama-3.1-70b&tp=4", "/plan?model=llama-3.1-70b&tp=4"),
    # ... and a PP1 beside it dropped: /plan?model=llama-3.1-70b&tp=4 opens at PP1 too
    ("model=llama-3.1-70b&pp=1&tp=4", "/plan?model=llama-3.1-70b&tp=4"),
    # TP2 × PP1 does not start, and TP2 alone opens at TP2 × PP2: the PP1 is kept
    ("model=llama-3.1-70b&pp=1&tp=2", "/plan?model=llama-3.1-70b&pp=1&tp=2"),
    # TP1 does not start: a given TP1 is kept; so is a PP1 alone: it opens at TP4 too, but saying
    # "the smallest TP that starts at the URL's PP1", where /plan?model=llama-3.1-70b says "the
    # smallest layout that starts" (it was dropped before a PP alone chose its own TP)
    ("model=llama-3.1-70b&pp=1&tp=1", "/plan?model=llama-3.1-70b&pp=1&tp=1"),
    ("model=llama-3.1-70b&pp=1", "/plan?model=llama-3.1-70b&pp=1"),
    # a PP alone keeps it (the TP chosen at it is implicit); a TP1 beside it is dropped only where
    # TP1 starts at that PP (TP1 × PP4 does, TP1 × PP2 does not: pp=2 alone opens at TP2 × PP2)
    ("model=llama-3.1-70b&pp=2", "/plan?model=llama-3.1-70b&pp=2"),
    ("model=llama-3.1-70b&pp=4&tp=1", "/plan?model=llama-3.1-70b&pp=4"),
    ("model=llama-3.1-70b&pp=2&tp=1", "/plan?model=llama-3.1-70b&pp=2&tp=1"),
    # 405B opens at TP8 × PP2: PP1 is not the opening layout's, kept
    ("model=llama-3.1-405b&pp=1", "/plan?model=llama-3.1-405b&pp=1"),
    ("model=llama-3.1-405b&pp=2&tp=8", "/plan?model=llama-3.1-405b&pp=2&tp=8"),
    # 8B starts at TP1: TP1 and PP1 are the opening layout, both dropped
    ("model=llama-3.1-8b&pp=1&tp=1", "/plan"),
    ("model=llama-3.1-8b&pp=1&tp=8", "/plan?tp=8"),
])  # fmt: skip
def test_the_canonical_url_keeps_a_given_layout_unless_it_is_the_opening_one(
    client: TestClient, query: str, url: str
) -> None:
    shown = client.get(f"/plan.json?{query}").json()
    assert shown["url"] == url
    again = client.get(url.replace("/plan", "/plan.json", 1)).json()  # the canonical URL opens the same plan
    assert (again["layout"], again["blocks"], again["url"]) == (shown["layout"], shown["blocks"], url)
    assert again["notes"] == shown["notes"]  # and says the same of it


def test_the_canonical_url_opens_the_page_it_came_from(client: TestClient) -> None:
    """Random queries with and without TP/PP: the canonical URL opens the same layout, the same
    pool and the same notes (a TP/PP of 1 is dropped from it only where the URL without it opens
    the same page; before, a PP1 given alone was dropped where the opening layout's PP is 1, and the
    URL without it said "opened at" where the page it came from did not)."""
    rng = random.Random(2028)
    for _ in range(14):
        query = {"model": rng.choice(["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"]),
                 "gpu": rng.choice(["L40S 48GB", "H100 80GB", "H200 141GB"]),
                 "util": str(rng.choice([0.8, 0.9, 0.95]))}
        for name in ("tp", "pp"):
            if rng.random() < 0.6:
                query[name] = str(rng.choice([1, 1, 2, 4, 8]))
        shown = client.get("/plan.json", params=query).json()
        again = client.get(shown["url"].replace("/plan", "/plan.json", 1)).json()
        assert (again["layout"], again["blocks"]) == (shown["layout"], shown["blocks"]), (query, shown["url"])
        assert again["notes"] == shown["notes"], (query, shown["url"])
        for name in ("tp", "pp"):  # only a 1 is ever dropped
            assert (name in query and query[name] != "1") <= (f"{name}=" in shown["url"]), (query, shown["url"])


def test_a_given_one_is_kept_where_dropping_it_changes_the_note(client: TestClient) -> None:
    """A PP1 given alone opens at the smallest TP that starts at PP1 and says so; the URL without it
    opens at the same layout (70B on H100: TP4) with another note, so the canonical URL keeps the
    pp=1. Where TP1 starts (8B), neither says anything and the pp=1 is dropped."""
    with_pp1 = client.get("/plan.json?model=llama-3.1-70b&pp=1").json()
    without = client.get("/plan.json?model=llama-3.1-70b").json()
    assert (with_pp1["layout"], with_pp1["blocks"]) == (without["layout"], without["blocks"])
    assert _opened(with_pp1) != _opened(without)
    assert "the smallest TP that starts at the URL's PP1" in _opened(with_pp1)[0]
    assert "the smallest layout that starts" in _opened(without)[0]
    assert with_pp1["url"] == "/plan?model=llama-3.1-70b&pp=1"
    small = client.get("/plan.json?model=llama-3.1-8b&pp=1").json()
    assert small["url"] == "/plan" and not _opened(small) and not _opened(client.get("/plan.json").json())


# -- a slider tick computes one plan ---------------------------------------------------------------

class _PlanSpy:
    """Counts the plans computed: `plans.run_plan` (the page's) and the layout choice's own."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pages = self.choices = 0
        run_plan, choice_result = plans.run_plan, layout_choice._result

        def page(*args: Any, **kwargs: Any) -> dict[str, Any]:
            self.pages += 1
            return run_plan(*args, **kwargs)

        def choice(*args: Any, **kwargs: Any) -> dict[str, Any]:
            self.choices += 1
            return choice_result(*args, **kwargs)

        monkeypatch.setattr(plans, "run_plan", page)
        monkeypatch.setattr(layout_choice, "_result", choice)

    def reset(self) -> None:
        self.pages = self.choices = 0


@pytest.mark.parametrize("structure", [
    "model=llama-3.1-8b&tp=8",  # the benchmark's tick (TP1 starts: the old choice tried it on every position)
    "model=llama-3.1-70b&tp=4&pp=1&dp=1",  # the browser's form at 70B's opening layout (TP1, TP2, TP4 tried)
    "model=llama-3.1-70b&tp=1&pp=1&dp=1",  # at a TP1 that does not start
    "model=llama-3.1-405b&tp=8&pp=2",
    "model=llama-3.1-8b&pp=2",  # a PP alone where TP1 starts at it: the page's own plan is the choice's first try
    "model=llama-3.1-70b&pp=8",  # ... TP1 × PP8 starts for 70B on H100 (down to util 0.51)
    "model=llama-3.1-70b&tp=2&pp=2&dp=1",  # the browser's form at the opening layout of /plan?model=llama-3.1-70b&pp=2
])  # fmt: skip
def test_a_new_slider_position_with_its_tp_given_computes_one_plan(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, structure: str
) -> None:
    spy = _PlanSpy(monkeypatch)
    assert client.get(f"/plan?{structure}&util=0.90", headers=HX).status_code == 200  # the drag's first position
    for util in ("0.51", "0.52", "0.87"):
        spy.reset()
        response = client.get(f"/plan?{structure}&util={util}", headers=HX)
        assert response.status_code == 200 and (spy.pages, spy.choices) == (1, 0), (util, spy.pages, spy.choices)
    assert client.get(f"/plan?{structure}&util=0.87", headers=HX).status_code == 200 and spy.pages == 1  # a revisit


# -- a start lever's link opens at the layout the lever was computed at ------------------------------

@pytest.mark.parametrize("query", [
    "gpu=L4+24GB&model=llama-3.1-70b&pp=1",  # no TP up to 8 starts at PP1: the page stays at TP1
    "gpu=L4+24GB&model=llama-3.1-70b&pp=1&tp=1",
    "gpu=4GiB&model=llama-3.1-405b&tp=2",  # no PP up to 16 starts at TP2: the page stays at PP1
    "gpu=4GiB&model=llama-3.1-405b",  # no layout starts: TP1
])  # fmt: skip
def test_a_start_levers_link_opens_the_plan_the_lever_describes(client: TestClient, query: str) -> None:
    """The not-starting card's levers are computed at the page's layout; a link that leaves out a TP
    or PP the page chose opens at the smallest layout that starts with the lever applied, so the
    fp8-weights lever of 70B on L4 at TP1 said "does not start" and its link opened TP8 x PP1, which
    does. Each link opens the lever's layout, and starts exactly where the lever says it does."""
    shown = client.get(f"/plan.json?{query}").json()
    assert not shown["will_start"]
    rows = [row for row in start_lever_rows(shown, shown["url"]) if row["url"]]
    assert rows
    for row in rows:
        layout = {**shown["layout"], **{k.split(".")[1]: v for k, v in (row.get("sets") or {}).items()
                                        if k in ("layout.tp", "layout.pp")}}
        opened = client.get(row["url"].replace("/plan?", "/plan.json?")).json()
        at = (opened["layout"]["tp"], opened["layout"]["pp"])
        assert at == (layout["tp"], layout["pp"]), (row["change"], row["url"])
        assert opened["will_start"] == row["will_start"], (row["change"], row["url"])
        assert opened["url"] == row["url"], row["change"]  # the link is the canonical URL of the page it opens
