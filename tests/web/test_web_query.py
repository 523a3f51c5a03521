"""Canonical what-if query strings: query → plan → query is stable, and the URL renders the same plan."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.services.base_documents import MemoryBaseStore
from app.web import querystring
from app.web.app import create_app
from app.web.plan import views
from app.web.plan.examples import base_documents
from app.web.templating import json_for_html

from .support import HX, TestClient, make_settings

BASES = MemoryBaseStore(fixed=base_documents())

what_ifs = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["llama-3.1-8b", "llama-3.1-70b", "qwen3-8b", "mistral-7b-v0.3"]),
        "gpu": st.sampled_from(["24GiB", "40GiB", "80GiB", "81559MiB", "141 GiB"]),
        "tp": st.sampled_from(["1", "2", "4", "8"]),
        "util": st.integers(50, 99).map(lambda n: f"{n / 100:.2f}"),
        "mnbt": st.sampled_from(["2048", "4096", "8192", "16384"]),
        "kv_dtype": st.sampled_from(["auto", "fp8", "bfloat16"]),
        "block_size": st.sampled_from(["16", "32"]),
        "growth": st.sampled_from(["0", "0.05", "0.10", "0.2"]),
        "live": st.sampled_from(["", "2000", "12000"]),
        "max_num_seqs": st.sampled_from(["", "64", "256"]),
        "reserve": st.sampled_from(["", "0", "0.9GiB", "512MiB"]),
        "base": st.sampled_from(["seed000", "seed001"]),
        "mla_off": st.sampled_from(["true", "false", "1"]),
        "fi_sampler": st.sampled_from(["true", "false", "0"]),
        "cg_estimate": st.sampled_from(["true", "false", "1"]),
    },
)


def _view(params: dict[str, str]) -> views.PlanView | None:
    try:
        return views.plan_view(params, BASES, levers=False)
    except InputError:
        return None


@settings(max_examples=60)
@given(what_ifs)
def test_query_plan_query_is_a_fixed_point(params: dict[str, str]) -> None:
    first = _view(params)
    if first is None:
        return
    again = views.plan_view(first.query, BASES, levers=False)
    assert again.query == first.query
    assert again.url == first.url
    assert again.result == first.result
    keys = [k for k, _ in parse_qsl(urlsplit(first.url).query)]
    assert keys == sorted(keys)


def test_defaults_are_dropped() -> None:
    view = views.plan_view({"tp": "1", "pp": "1", "growth": "0", "util": "0.92", "mnbt": "8192", "kv_dtype": "auto"},
                           BASES)
    assert view.query == {} and view.url == "/plan"


def test_non_default_slider_values_stay_and_are_canonical() -> None:
    view = views.plan_view({"util": "0.850", "mnbt": "4096"}, BASES)
    assert view.query == {"util": "0.85", "mnbt": "4096"}


def test_clean_keeps_known_keys_and_drops_blanks() -> None:
    assert querystring.clean([("util", " 0.8 "), ("junk", "1"), ("mnbt", ""), ("tp", "2"), ("tp", "4")]) == {
        "util": "0.8",
        "tp": "4",
    }
    # A blanked text field that can hold a base's value (live tokens, LoRA slots, ...) says "clear it"
    assert querystring.clean([("live", ""), ("loras", " ")]) == {"live": "default", "loras": "default"}
    assert {"live", "loras", "kv_bytes", "max_model_len", "max_num_seqs", "reserve"} <= querystring.BLANK_CLEARS


def test_from_text_accepts_urls_and_query_strings() -> None:
    assert querystring.from_text("http://host/plan?tp=2&util=0.8") == {"tp": "2", "util": "0.8"}
    assert querystring.from_text("/plan?tp=2") == {"tp": "2"}
    assert querystring.from_text("tp=2") == {"tp": "2"}


def test_field_key_maps_document_paths_to_form_keys() -> None:
    assert querystring.field_key("engine.gpu_memory_utilization") == "util"
    assert querystring.field_key("policy.operating_reserve") == "reserve"
    assert querystring.field_key("layout.tp") == "tp"
    assert querystring.field_key("whatif.tp") == "tp"
    assert querystring.field_key("ranks[2].total") == "ranks"
    assert querystring.field_key("gpu.total") == "gpu"
    assert querystring.field_key("mnbt") == "mnbt"
    assert querystring.field_key("something.else") is None


def test_json_for_html_escapes_markup() -> None:
    text = str(json_for_html({"name": "</script><img src=x onerror=alert(1)>&\u2028\u2029<!--"}))
    assert not any(c in text for c in "<>&\u2028\u2029")
    assert "\\u003c/script\\u003e" in text and "\\u2028\\u2029" in text
    assert json_for_html({"y": [float("nan"), 1.5, None]}) == '{"y":[null,1.5,null]}'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_json_for_html_round_trips_and_never_closes_the_script(value: object) -> None:
    text = str(json_for_html(value))
    assert json.loads(text) == value
    assert "</" not in text and "<!--" not in text


messy_values = st.one_of(
    st.sampled_from(["", "0", "-1", "1e9", "nan", "inf", "abc", "80GiB", "0.5", "99999999999", "1,024", "<b>"]),
    st.text(max_size=12),
)
messy_what_ifs = st.dictionaries(st.sampled_from(querystring.KEYS), messy_values, max_size=6)


@settings(max_examples=80)
@given(what_ifs | messy_what_ifs, st.booleans())
def test_any_query_renders_a_page_or_an_inline_error(params: dict[str, str], htmx: bool) -> None:
    response = _CLIENT.get("/plan", params=params, headers=HX if htmx else {}, follow_redirects=True)
    assert response.status_code in (200, 422), response.text[:500]
    assert "Traceback" not in response.text


_CLIENT = TestClient(create_app(make_settings()), raise_server_exceptions=True)


def test_plan_cache_returns_the_same_view_and_is_bounded() -> None:
    cache = views.PlanCache(capacity=2)
    first = views.plan_view({"tp": "2"}, BASES, False, cache)
    assert views.plan_view({"tp": "2"}, BASES, False, cache) is first
    assert views.plan_view({"tp": "2"}, BASES, True, cache) is not first
    views.plan_view({"tp": "4"}, BASES, False, cache)
    assert views.plan_view({"tp": "2"}, BASES, False, cache) is not first  # evicted


def test_vllm_flag_names_read_as_the_knob_they_name() -> None:
    """A link built from `vllm serve` flags (`gpu_memory_utilization`, `--tensor-parallel-size`'s
    name, dashed or not) plans what it says: before, such keys were dropped like unknown ones and
    `/plan.json?gpu_memory_utilization=0.5` showed the default 0.92 plan with no word."""
    ours = _CLIENT.get("/plan.json", params={"util": "0.5", "tp": "2", "mnbt": "4096"}).json()
    for flags in ({"gpu_memory_utilization": "0.5", "tensor_parallel_size": "2", "max_num_batched_tokens": "4096"},
                  {"gpu-memory-utilization": "0.5", "tensor-parallel-size": "2", "max-num-batched-tokens": "4096"}):
        theirs = _CLIENT.get("/plan.json", params=flags).json()
        assert theirs == ours
    default = _CLIENT.get("/plan.json").json()
    assert ours != default  # the flags moved the plan (0.5 is not the default utilization)
    assert querystring.clean({"gpu_memory_utilization": "0.5", "kv-cache-dtype": "fp8", "max_loras": "2"}) == {
        "util": "0.5", "kv_dtype": "fp8", "loras": "2"}
    for flag, key in querystring.LEGACY_KEYS.items():  # every alias names a real knob key
        assert key in querystring.FIELD_KEYS_SET, flag
