"""The what-if URL: query → plan document → query is stable, and defaults are dropped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.core.errors import InputError
from app.services.plan_query import field_for_path, plan_from_query, query_from_plan
from app.services.plans import run_plan

params = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["llama-3.1-70b", "qwen3-32b", "Llama-3.1-8B"]),
        "gpu": st.sampled_from(["80GiB", "40 GiB", "141 GB", "24GiB"]),
        "ranks": st.integers(1, 64).map(str),
        "tp": st.sampled_from(["1", "2", "4", "8"]),
        "util": st.floats(0.5, 0.98).map(lambda f: repr(round(f, 3))),
        "kv_dtype": st.sampled_from(["auto", "fp8", "bfloat16"]),
        "block_size": st.sampled_from(["16", "32", "64"]),
        "max_model_len": st.integers(1024, 131072).map(str),
        "mnbt": st.integers(512, 32768).map(str),
        "max_num_seqs": st.integers(1, 1024).map(str),
        "growth": st.sampled_from(["0", "0.05", "0.08"]),
        "reserve": st.sampled_from(["0", "0.9GiB", "512 MiB"]),
        "live": st.integers(100, 50000).map(str),
        "vllm": st.sampled_from(["0.10.2", "0.21.0", "0.27.1"]),
        # the engine's environment knobs, in every spelling a boolean takes (VLLM_*=1/0 included)
        "mla_off": st.sampled_from(["true", "false", "on", "0", "1", "yes"]),
        "fi_sampler": st.sampled_from(["true", "false", "off", "1", "0"]),
        "cg_estimate": st.sampled_from(["true", "false", "on", "no"]),
    },
)


@given(params)
def test_round_trip_is_stable(query: dict[str, str]) -> None:
    doc = plan_from_query(query)
    canonical = query_from_plan(doc)
    assert query_from_plan(plan_from_query(canonical)) == canonical
    assert plan_from_query(canonical) == plan_from_query(query_from_plan(plan_from_query(canonical)))


def test_defaults_dropped_and_values_canonical() -> None:
    q = {
        "model": "llama-3.1-8b",
        "gpu": "h100-80gb",
        "tp": "1",
        "kv_dtype": "auto",
        "util": "0.90",
        "reserve": "1024 MiB",
    }
    assert query_from_plan(plan_from_query(q)) == {"util": "0.9", "reserve": "1GiB"}
    # A size is free text: it stays in the URL (the default GPU is the H100 80GB preset, not 80 GiB).
    sized = query_from_plan(plan_from_query({**q, "gpu": "80 GiB"}))
    assert sized == {"gpu": "80GiB", "util": "0.9", "reserve": "1GiB"}


def test_engine_env_knobs_are_canonical_booleans() -> None:
    """mla_off is off unless set (false leaves the URL); the tri-states keep a stated false, which
    the deploy exports write as =0, apart from unset (the version's default, nothing written)."""
    doc = plan_from_query({"mla_off": "1", "fi_sampler": "0", "cg_estimate": "on"})
    assert doc["engine"] == {"mla_disable": True, "flashinfer_sampler": False, "estimate_cudagraphs": True}
    assert query_from_plan(doc) == {"mla_off": "true", "fi_sampler": "false", "cg_estimate": "true"}
    assert query_from_plan(plan_from_query({"mla_off": "no"})) == {}
    base = {"model": {"catalogue": "deepseek-v2-lite"}, "engine": {"mla_disable": True}}
    assert query_from_plan(plan_from_query({"mla_off": "false"}, base), base) == {"mla_off": "false"}
    assert query_from_plan(plan_from_query({"mla_off": "true"}, base), base) == {}


def test_gpu_field_takes_a_preset_or_a_size() -> None:
    assert plan_from_query({})["gpu"] == {"name": "H100 80GB"}
    assert plan_from_query({"gpu": "NVIDIA A100-SXM4-80GB"})["gpu"] == {"name": "A100 80GB"}
    assert plan_from_query({"gpu": "75 GiB", "ranks": "4"})["gpu"] == {"total": "75GiB", "count": 4}
    assert query_from_plan(plan_from_query({"gpu": "l40s"})) == {"gpu": "L40S 48GB"}
    with pytest.raises(InputError) as err:
        plan_from_query({"gpu": "H900 banana"})
    assert err.value.field == "gpu" and "nearest" in err.value.message


def test_measured_base_routes_profiled_knobs_to_whatif() -> None:
    base = {
        "model": {"kv_bytes_per_token": 131072},
        "engine": {"max_model_len": 8192},
        "ranks": [{"total": "80 GiB", "weights": "18 GiB"}],
    }
    doc = plan_from_query({"tp": "2", "mnbt": "4096", "util": "0.8", "gpu": "40GiB"}, base_doc=base)
    # The rows (and a measured KV room) belong to the run's own utilization: 0.8 is a what-if on top.
    assert doc["whatif"] == {"tp": 2, "max_num_batched_tokens": 4096, "gpu_memory_utilization": 0.8}
    assert "gpu" not in doc and "gpu_memory_utilization" not in doc["engine"]
    assert query_from_plan(doc, base) == {"mnbt": "4096", "tp": "2", "util": "0.8"}


@pytest.mark.parametrize(
    ("key", "value"), [("tp", "two"), ("util", "nan"), ("gpu", "80 parsecs"), ("model", "no-such-model"),
                       ("mla_off", "maybe"), ("fi_sampler", "2"), ("cg_estimate", "auto")]
)
def test_bad_values_name_the_key(key: str, value: str) -> None:
    with pytest.raises(InputError) as err:
        canonical = plan_from_query({key: value})
        run_plan(canonical)
    assert err.value.field in (key, "model.catalogue")


def test_field_for_path() -> None:
    assert field_for_path("engine.gpu_memory_utilization") == "util"
    assert field_for_path("whatif.max_num_batched_tokens") == "mnbt"
    assert field_for_path("ranks[3].total") == "ranks"  # the rank rows belong to the ranks field
    assert field_for_path("layout.dcp") == "tp" and field_for_path("nothing.here") is None


def test_not_set_clears_a_bases_value_and_the_url_keeps_it() -> None:
    """`key=default` nulls a clearable knob over the base (and its `vllm serve` flag); the canonical
    query keeps it, and an `auto` KV dtype over a command's fp8 is not dropped as the default."""
    from app.services.plan_query import UNSET, plan_from_query, query_from_plan

    base = {"serve": "vllm serve meta-llama/Llama-3.1-8B --kv-cache-dtype fp8 --quantization fp8 "
                     "--no-enable-prefix-caching", "gpu": {"name": "H100 80GB"}}
    query = {"kv_dtype": "auto", "quant": UNSET, "prefix": UNSET}
    doc = plan_from_query(query, base)
    assert doc["engine"] == {"kv_cache_dtype": "auto", "quantization": None, "enable_prefix_caching": None}
    assert query_from_plan(doc, base) == query
    assert query_from_plan(plan_from_query({}, base), base) == {}  # nothing changed, nothing in the URL
    # without a base that sets them, "not set" is the plan's own state: not in the URL
    plain = plan_from_query({"quant": UNSET, "prefix": UNSET})
    assert query_from_plan(plain) == {}


def test_not_set_removes_a_bases_lora_rank_offload_backend_and_speculative() -> None:
    """`key=default` on LoRA rank, offload backend, speculative method and draft model removes the
    base's value or section (`Knob.removes`) rather than writing a null that makes a section: the
    base keeps its LoRA slots and offload size at vLLM's rank 16 and native backend, and loses its
    speculative decoding, also where the form echoes its draft tokens; the canonical query reopens
    the same document; without a base that sets them, nothing is made and nothing is in the URL."""
    from app.schemas import PlanDocument
    from app.services.plan_query import UNSET, plan_from_query, query_from_plan

    base = {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"},
            "engine": {"enforce_eager": True, "lora": {"max_loras": 4, "max_lora_rank": 64},
                       "kv_offload": {"cpu_bytes": "100GiB", "backend": "lmcache"},
                       "speculative": {"method": "draft_model", "num_speculative_tokens": 3,
                                       "model": {"catalogue": "llama-3.2-1b"}}}}
    query = {"lora_rank": UNSET, "offload_backend": UNSET, "spec": UNSET, "spec_tokens": "3", "loras": "4"}
    doc = plan_from_query(query, base)
    assert doc["engine"] == {"enforce_eager": True, "lora": {"max_loras": 4},
                             "kv_offload": {"cpu_bytes": "100GiB"}, "speculative": None}
    engine = PlanDocument.model_validate(doc).engine
    assert engine.lora is not None and engine.lora.max_lora_rank == 16
    assert engine.kv_offload is not None and engine.kv_offload.backend == "native"
    canonical = query_from_plan(doc, base)
    assert canonical == {"lora_rank": UNSET, "offload_backend": UNSET, "spec": UNSET, "spec_model": UNSET}
    assert plan_from_query(canonical, base) == doc
    assert base["engine"] == {"enforce_eager": True, "lora": {"max_loras": 4, "max_lora_rank": 64},
                              "kv_offload": {"cpu_bytes": "100GiB", "backend": "lmcache"},
                              "speculative": {"method": "draft_model", "num_speculative_tokens": 3,
                                              "model": {"catalogue": "llama-3.2-1b"}}}  # never changed
    # the draft model alone: the rest of the speculative section stays
    draft = plan_from_query({"spec": "ngram", "spec_model": UNSET}, base)["engine"]
    assert draft["speculative"] == {"method": "ngram", "num_speculative_tokens": 3}
    # a `vllm serve` base: its --kv-offloading-backend is removed, its size kept
    serve = {"serve": "vllm serve meta-llama/Llama-3.1-8B --kv-offloading-size 100 --kv-offloading-backend lmcache",
             "gpu": {"name": "H100 80GB"}}
    from_serve = plan_from_query({"offload_backend": UNSET}, serve)
    assert from_serve["engine"]["kv_offload"] == {"cpu_bytes": 100 * 2**30}
    assert query_from_plan(from_serve, serve) == {"offload_backend": UNSET}
    native = {**base, "engine": {"kv_offload": {"cpu_bytes": "100GiB", "backend": "native"}}}
    assert query_from_plan(plan_from_query({"offload_backend": UNSET}, native), native) == {}  # the same plan
    plain = plan_from_query(dict.fromkeys(("lora_rank", "offload_backend", "spec", "spec_model"), UNSET))
    assert "engine" not in plain and query_from_plan(plain) == {}
    # draft tokens given with the method "not set" and no base section: kept, for the method's error
    assert plan_from_query({"spec": UNSET, "spec_tokens": "3"})["engine"] == {
        "speculative": {"num_speculative_tokens": 3}}


def test_expert_parallel_off_over_a_commands_flag_stays_in_the_url() -> None:
    """The form's EP "off" is `ep=false` (it was an empty value, which the URL drops)."""
    from app.services.plan_query import plan_from_query, query_from_plan

    base = {"serve": "vllm serve Qwen/Qwen3-30B-A3B -tp 2 --enable-expert-parallel", "gpu": {"name": "H100 80GB"}}
    doc = plan_from_query({"ep": "false"}, base)
    assert query_from_plan(doc, base) == {"ep": "false"}
    assert query_from_plan(plan_from_query({"ep": "false"})) == {}
