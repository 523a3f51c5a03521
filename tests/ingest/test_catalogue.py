"""Tests for the shipped model catalogue (app/data/catalogue) and its loader."""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import pytest

from app.ingest.catalogue import (
    CatalogueEntry,
    canonical_config_sha256,
    config_sha256,
    get_model,
    list_models,
    raw_config_bytes,
    search_models,
)

# (num_hidden_layers, num_key_value_heads, head_dim) per Hugging Face id, copied from
# ../shared/data/model-shapes.json (36 models). head_dim None = MLA or no attention;
# num_key_value_heads None = no attention (pure SSM).
MODEL_SHAPES: dict[str, tuple[int, int | None, int | None]] = {
    "meta-llama/Meta-Llama-3.1-8B": (32, 8, 128),
    "meta-llama/Meta-Llama-3.1-70B": (80, 8, 128),
    "meta-llama/Meta-Llama-3.1-405B": (126, 8, 128),
    "meta-llama/Llama-3.2-1B-Instruct": (16, 8, 64),
    "meta-llama/Llama-3.2-3B-Instruct": (28, 8, 128),
    "meta-llama/Llama-4-Scout-17B-16E-Instruct": (48, 8, 128),
    "Qwen/Qwen2.5-7B-Instruct": (28, 4, 128),
    "Qwen/Qwen2.5-14B-Instruct": (48, 8, 128),
    "Qwen/Qwen2.5-32B": (64, 8, 128),
    "Qwen/Qwen2.5-72B": (80, 8, 128),
    "Qwen/Qwen3-8B": (36, 8, 128),
    "Qwen/Qwen3-32B": (64, 8, 128),
    "Qwen/Qwen3-30B-A3B": (48, 4, 128),
    "Qwen/Qwen3-235B-A22B": (94, 4, 128),
    "Qwen/Qwen3-Next-80B-A3B-Thinking": (48, 2, 256),
    "mistralai/Mistral-7B-v0.3": (32, 8, 128),
    "mistralai/Mixtral-8x7B-v0.1": (32, 8, 128),
    "mistralai/Mistral-Large-Instruct-2407": (88, 8, 128),
    "deepseek-ai/DeepSeek-V2-Lite": (27, 16, None),
    "deepseek-ai/DeepSeek-V3": (61, 128, None),
    "deepseek-ai/DeepSeek-R1": (61, 128, None),
    "moonshotai/Kimi-K2-Instruct": (61, 64, None),
    "google/gemma-2-9b-it": (42, 8, 256),
    "google/gemma-2-27b-it": (46, 16, 128),
    "google/gemma-3-12b-it": (48, 8, 256),
    "google/gemma-3-27b-it": (62, 16, 128),
    "openai/gpt-oss-20b": (24, 8, 64),
    "openai/gpt-oss-120b": (36, 8, 64),
    "microsoft/Phi-3-mini-4k-instruct": (32, 32, 96),
    "microsoft/phi-4": (40, 10, 128),
    "tiiuae/falcon-mamba-7b": (64, None, None),
    "ai21labs/AI21-Jamba-1.5-Mini": (32, 8, 128),
    "nvidia/Nemotron-H-56B-Base-8K": (118, 8, 128),
    "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16": (52, 2, 128),
    "zai-org/GLM-4.5": (92, 8, 128),
    "CohereForAI/c4ai-command-r-v01": (40, 64, 128),
}

# Models from ../shared/data/configs/ that are not in model-shapes.json.
EXTRA_SHAPES: dict[str, tuple[int, int | None, int | None]] = {
    "Qwen/Qwen3-14B": (40, 8, 128),
    "Qwen/Qwen3-30B-A3B-FP8": (48, 4, 128),
    "Qwen/Qwen3-235B-A22B-FP8": (94, 4, 128),
    "Qwen/Qwen3-VL-30B-A3B-Instruct": (48, 4, 128),
    "Qwen/Qwen3-VL-30B-A3B-Instruct-FP8": (48, 4, 128),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": (48, 8, 128),
    # Checkpoints of the llm-d-planner v0.19.0 sweep (tests/data/vllm-logs/43, 44, 49, 50, 54)
    "codellama/CodeLlama-7b-hf": (32, 32, 128),
    "codellama/CodeLlama-34b-Instruct-hf": (48, 8, 128),
    "google/gemma-2-2b-it": (26, 4, 256),
    "microsoft/phi-2": (32, 32, 80),
    "Qwen/Qwen1.5-MoE-A2.7B-Chat": (24, 16, 128),
    "Qwen/Qwen3-0.6B": (28, 8, 128),  # tests/data/vllm-logs/public/47
}

SHARED_SHAPES_JSON = Path(__file__).resolve().parents[3] / "shared" / "data" / "model-shapes.json"

ENTRIES = list_models()


def _int_or_none(value: object) -> int | None:
    if value is None:
        return None
    assert isinstance(value, int) and not isinstance(value, bool), value
    return value


def _shape(entry: CatalogueEntry) -> tuple[int, int | None, int | None]:
    """(layers, kv heads, head_dim) read the way a planner must: text_config first, explicit
    head_dim first, kv heads falling back to attention heads, MLA has no plain head_dim."""
    cfg = entry.text_config
    layers = _int_or_none(cfg.get("num_hidden_layers"))
    assert layers is not None
    heads = _int_or_none(cfg.get("num_attention_heads"))
    kv = _int_or_none(cfg.get("num_key_value_heads"))
    if kv is None:
        kv = heads
    if "kv_lora_rank" in cfg:
        return layers, kv, None
    head_dim = _int_or_none(cfg.get("head_dim"))
    if head_dim is None and heads:
        hidden = _int_or_none(cfg.get("hidden_size"))
        assert hidden is not None
        head_dim = hidden // heads
    return layers, kv, head_dim


def test_catalogue_has_all_models() -> None:
    assert len(ENTRIES) >= 36
    hf_ids = {e.hf_id for e in ENTRIES}
    assert set(MODEL_SHAPES) <= hf_ids
    assert set(EXTRA_SHAPES) <= hf_ids
    assert len({e.slug for e in ENTRIES}) == len(ENTRIES)
    assert len({e.name.casefold() for e in ENTRIES}) == len(ENTRIES)
    assert len({e.hf_id.casefold() for e in ENTRIES}) == len(ENTRIES)


@pytest.mark.skipif(not SHARED_SHAPES_JSON.exists(), reason="shared research data not present")
def test_embedded_shapes_match_shared_model_shapes_json() -> None:
    models = json.loads(SHARED_SHAPES_JSON.read_text())["models"]
    shared = {m["hf_id"]: (m["num_hidden_layers"], m["num_key_value_heads"], m["head_dim"]) for m in models}
    assert shared == MODEL_SHAPES


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.slug)
def test_entry_is_well_formed(entry: CatalogueEntry) -> None:
    assert entry.slug == entry.slug.lower()
    assert " " not in entry.slug and "/" not in entry.slug
    assert entry.name and entry.hf_id.count("/") == 1 and entry.family
    assert entry.evidence in {"verbatim", "verbatim-in-code", "constructed"}
    assert len(entry.sha256) == 64 and int(entry.sha256, 16) >= 0
    assert isinstance(entry.config, Mapping) and entry.config
    assert entry.notes
    if entry.evidence == "verbatim":
        assert entry.sha256_of == "verbatim bytes"
        assert entry.source_repo and entry.source_path and entry.source_commit
        assert len(entry.source_commit) == 40
    else:
        assert entry.sha256_of == "canonical json"
    if entry.evidence == "verbatim-in-code":
        assert entry.source_repo and entry.source_path
    if entry.evidence == "constructed":
        assert entry.notes.startswith("CONSTRUCTED:")


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.slug)
def test_sha256_recomputes(entry: CatalogueEntry) -> None:
    if entry.evidence == "verbatim":
        raw = raw_config_bytes(entry)
        assert raw is not None
        assert config_sha256(raw.decode("utf-8")) == entry.sha256
        # The stored object is the parse of exactly those bytes.
        assert json.loads(raw) == entry.config_dict()
    else:
        assert raw_config_bytes(entry) is None
        assert canonical_config_sha256(entry.config_dict()) == entry.sha256
        assert canonical_config_sha256(entry.config) == entry.sha256


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.slug)
def test_shape_agrees_with_model_shapes(entry: CatalogueEntry) -> None:
    expected = MODEL_SHAPES.get(entry.hf_id) or EXTRA_SHAPES.get(entry.hf_id)
    assert expected is not None, f"{entry.hf_id} has no expected shape"
    assert _shape(entry) == expected


def test_raw_dir_holds_exactly_the_verbatim_entries() -> None:
    raw_dir = resources.files("app").joinpath("data", "catalogue", "raw")
    names = {p.name for p in raw_dir.iterdir() if p.name.endswith(".config.json")}
    assert names == {f"{e.slug}.config.json" for e in ENTRIES if e.evidence == "verbatim"}


def test_index_json_matches_entries() -> None:
    text = resources.files("app").joinpath("data", "catalogue", "index.json").read_text()
    index = json.loads(text)
    assert [row["slug"] for row in index] == [e.slug for e in ENTRIES]
    by_slug = {e.slug: e for e in ENTRIES}
    for row in index:
        entry = by_slug[row["slug"]]
        assert row == {
            "slug": entry.slug,
            "name": entry.name,
            "hf_id": entry.hf_id,
            "evidence": entry.evidence,
            "sha256": entry.sha256,
        }


def test_list_models_is_cached_and_sorted() -> None:
    assert list_models() is list_models()
    names = [e.name.casefold() for e in ENTRIES]
    assert names == sorted(names)


def test_config_is_read_only() -> None:
    entry = get_model("llama-3.1-8b")
    with pytest.raises(TypeError):
        entry.config["num_hidden_layers"] = 1  # type: ignore[index]
    copy = entry.config_dict()
    copy["num_hidden_layers"] = 1
    assert entry.config["num_hidden_layers"] == 32
    assert isinstance(copy["architectures"], list)


@pytest.mark.parametrize(
    "key",
    [
        "llama-3.1-8b",
        "Llama-3.1-8B",
        "LLAMA-3.1-8b",
        "meta-llama/Meta-Llama-3.1-8B",
        " meta-llama/meta-llama-3.1-8b ",
    ],
)
def test_get_model_by_slug_name_or_hf_id(key: str) -> None:
    entry = get_model(key)
    assert entry.slug == "llama-3.1-8b"
    assert entry.evidence == "verbatim"
    assert entry.config["num_key_value_heads"] == 8


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.slug)
def test_every_entry_found_by_each_key(entry: CatalogueEntry) -> None:
    assert get_model(entry.slug) is entry
    assert get_model(entry.name.upper()) is entry
    assert get_model(entry.hf_id.lower()) is entry


def test_unknown_model_lists_suggestions() -> None:
    with pytest.raises(KeyError) as info:
        get_model("Llama-3.1-7B")
    message = str(info.value)
    assert "Llama-3.1-7B" in message
    assert "did you mean" in message
    assert "Llama-3.1-8B" in message and "Llama-3.1-70B" in message


def test_unknown_model_without_any_match() -> None:
    with pytest.raises(KeyError) as info:
        get_model("zzzz-nothing")
    assert "did you mean" not in str(info.value)


def test_search_models() -> None:
    fp8 = search_models("fp8")
    assert {e.name for e in fp8} == {
        "Qwen3-30B-A3B-FP8",
        "Qwen3-235B-A22B-FP8",
        "Qwen3-VL-30B-A3B-Instruct-FP8",
    }
    assert search_models("Qwen3-8B")[0].name == "Qwen3-8B"  # exact match first
    assert [e.name for e in search_models("gemma3")] == ["Gemma-3-12B-it", "Gemma-3-27B-it"]
    assert {e.name for e in search_models("deepseek r1")} == {"DeepSeek-R1", "DeepSeek-R1-Distill-Qwen-14B"}
    assert "Gemma-2-9B-it" in {e.name for e in search_models("gema")}  # fuzzy fallback
    assert len(search_models("qwen", limit=3)) == 3
    assert search_models("qwen", limit=0) == ()
    assert search_models("") == ENTRIES[:20]
    assert search_models("zzzz-nothing") == ()


def test_config_sha256_is_over_exact_text() -> None:
    assert config_sha256("{}") == "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert config_sha256("{}\n") != config_sha256("{}")
    assert canonical_config_sha256({"b": 1, "a": [1.0, None]}) == config_sha256('{"a":[1.0,null],"b":1}')


def test_a_renamed_repo_and_its_instruct_twin_name_the_entry() -> None:
    # log 29 prints meta-llama/Llama-3.1-8B-Instruct; the entry is meta-llama/Meta-Llama-3.1-8B (renamed repo)
    from app.ingest.catalogue import find_model, list_models

    names = ("meta-llama/Llama-3.1-8B-Instruct", "META-LLAMA/llama-3.1-8b", "meta-llama/Meta-Llama-3.1-8B-Instruct")
    for name in names:
        entry = find_model(name)
        assert entry is not None and entry.slug == "llama-3.1-8b"
    assert find_model("meta-llama/Llama-3.1-70B-Instruct").slug == "llama-3.1-70b"  # type: ignore[union-attr]
    own = {key.casefold() for e in list_models() for key in (e.slug, e.name, e.hf_id)}
    for entry in list_models():  # a twin's id never shadows another entry's own name
        assert not {i.casefold() for i in entry.same_shape_ids} & own
