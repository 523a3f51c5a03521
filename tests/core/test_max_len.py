"""The model's maximum length as vLLM derives it (vllm/config/model.py `_get_and_verify_max_len`,
vllm/transformers_utils/model_arch_config_convertor.py `derive_max_model_len_and_key` @28be48fa9).

Before: the default was the first of max_position_embeddings / n_positions / seq_length the config
stated, RoPE scaling was ignored, and a given max_model_len above the model's length was planned.
The oracle `_vllm_max_len` below is written from vLLM's code (getattr on the text config), not from
ours, and every catalogue model and shared config is held to it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.core.hfconfig import HFConfig
from app.core.max_len import derive_max_len
from app.core.model_config import shape_from_config
from app.core.shape import default_max_model_len
from app.ingest.catalogue import list_models
from app.schemas import validate_plan
from app.services.model_input import kv_bytes_report
from app.services.plan_inputs import build_plan

#: our copies of ../shared/data/configs (byte-identical), and the configs of public logs
SHARED_CONFIGS = Path(__file__).resolve().parents[1] / "data" / "configs"
POSSIBLE_KEYS = ["max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                 "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len"]  # fmt: skip
#: transformers class defaults vLLM sees for configs that omit the key (Gemma3TextConfig)
CLASS_DEFAULTS = {"gemma3_text": {"max_position_embeddings": 131072}}


def _vllm_max_len(config: dict[str, Any]) -> tuple[int, float]:
    """(default, derived) for a config, transcribed from vLLM @28be48fa9 with transformers 5.5.3 (the
    version its tests pin, requirements/test/cuda.txt): rope_scaling or rope_parameters, an absent
    rope_type set by standardize_rope_params, then vLLM's patch_legacy_rope_type renames."""
    text = config.get("text_config") or config
    model_type = text.get("model_type") or ("gemma3_text" if config.get("model_type") == "gemma3" else "")
    hf = {**CLASS_DEFAULTS.get(model_type, {}), **text}
    derived: float = float("inf")
    for key in POSSIBLE_KEYS:
        if hf.get(key) is not None:
            derived = min(derived, hf[key])
    if hf.get("model_max_length"):
        derived = hf["model_max_length"]
    # transformers' convert_rope_params_to_dict / standardize_rope_params, vLLM's patch_legacy_rope_type
    rope = hf.get("rope_scaling") or hf.get("rope_parameters")
    if rope:
        rope = dict(rope)
        rope.setdefault("rope_type", rope.get("type", "default"))
        if rope["rope_type"] in ("llama3", "yarn", "longrope"):
            if hf.get("original_max_position_embeddings") is not None:
                rope["original_max_position_embeddings"] = hf["original_max_position_embeddings"]
            else:
                rope.setdefault("original_max_position_embeddings", hf.get("max_position_embeddings"))
        rope["rope_type"] = {"su": "longrope", "mrope": "default"}.get(rope["rope_type"], rope["rope_type"])
    if derived == float("inf"):
        derived = 2048
    if rope and "gemma3" not in model_type:
        factor = 1.0
        if rope["rope_type"] not in ("su", "longrope", "llama3"):
            factor = rope.get("factor", factor)
            if rope["rope_type"] == "yarn":
                derived = rope["original_max_position_embeddings"]
        derived *= factor if factor is not None else 1.0
    if rope and rope["rope_type"] == "longrope":
        return int(hf.get("original_max_position_embeddings", derived)), derived
    return int(derived), derived


def _derived(config: dict[str, Any]) -> tuple[int, int | None, str | None]:
    got = derive_max_len(HFConfig(config))
    return got.default, got.limit, got.key


LLAMA = {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4,
         "num_key_value_heads": 4, "intermediate_size": 512, "vocab_size": 1000}  # fmt: skip


@pytest.mark.parametrize(
    ("stated", "expected"),
    [
        # the smallest key wins, whichever comes first in vLLM's list (hand: min(131072, 4096) = 4096)
        ({"max_position_embeddings": 131072, "max_seq_len": 4096}, (4096, 4096, "max_seq_len")),
        ({"n_positions": 1024, "seq_len": 512}, (512, 512, "seq_len")),
        ({"max_position_embeddings": 8192, "seq_length": 8192}, (8192, 8192, "max_position_embeddings")),
        ({"max_position_embeddings": 2048, "max_target_positions": 448}, (448, 448, "max_target_positions")),
        # Command-R: a truthy model_max_length replaces the smallest, even when larger
        ({"max_position_embeddings": 8192, "model_max_length": 131072}, (131072, 131072, "model_max_length")),
        # yarn: original_max_position_embeddings × factor (hand: 32768 × 4 = 131072), not mpe 40960
        (
            {
                "max_position_embeddings": 40960,
                "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
            },
            (131072, 131072, "max_position_embeddings"),
        ),
        # a top-level original_max_position_embeddings is copied over the rope_scaling one (4096 × 4)
        (
            {
                "max_position_embeddings": 40960,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
            },
            (16384, 16384, "max_position_embeddings"),
        ),
        # linear and dynamic multiply the smallest key by the factor (hand: 4096 × 2 = 8192)
        (
            {"max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 2.0}},
            (8192, 8192, "max_position_embeddings"),
        ),
        (
            {"max_position_embeddings": 4096, "rope_scaling": {"rope_type": "dynamic", "factor": 1.5}},
            (6144, 6144, "max_position_embeddings"),
        ),
        # llama3 is not multiplied (Llama-3.1: 131072 stays)
        (
            {
                "max_position_embeddings": 131072,
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192},
            },
            (131072, 131072, "max_position_embeddings"),
        ),
        # longrope (and legacy su): limit is the unscaled key, the default the original length
        (
            {
                "max_position_embeddings": 131072,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
            },
            (4096, 131072, "max_position_embeddings"),
        ),
        (
            {
                "max_position_embeddings": 131072,
                "original_max_position_embeddings": 4096,
                "rope_scaling": {"type": "su", "long_factor": [1.0], "short_factor": [1.0]},
            },
            (4096, 131072, "max_position_embeddings"),
        ),
        # mrope is default; a null factor counts 1.0
        (
            {"max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}},
            (32768, 32768, "max_position_embeddings"),
        ),
        (
            {"max_position_embeddings": 32768, "rope_scaling": {"rope_type": "linear", "factor": None}},
            (32768, 32768, "max_position_embeddings"),
        ),
        # no key: 2048, still scaled, and no limit on a given length
        ({}, (2048, None, None)),
        ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}}, (4096, None, None)),
        # rope_parameters per layer type (transformers v5): the factor of the scaled entries
        (
            {
                "max_position_embeddings": 8192,
                "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 4.0},
                    "sliding_attention": {"rope_type": "default"},
                },
            },
            (32768, 32768, "max_position_embeddings"),
        ),
    ],
)
def test_length_as_vllm_derives_it(stated: dict[str, Any], expected: tuple[int, int | None, str | None]) -> None:
    config = {**LLAMA, **stated}
    if not any(k in stated for k in POSSIBLE_KEYS):
        config["model_type"] = "falcon_mamba"  # no class default length
    assert _derived(config) == expected
    if "rope_parameters" not in stated:  # the oracle reads transformers v4's rope_scaling only
        default, derived = _vllm_max_len(config)
        assert default == expected[0]
        assert expected[1] is None or int(derived) == expected[1]


def test_gemma3_is_not_scaled_again() -> None:
    """Gemma-3's 131072 already includes its linear factor 8 (NOTE(woosuk) in vLLM)."""
    entry = next(e for e in list_models() if e.slug == "gemma-3-27b-it")
    assert _derived(entry.config_dict()) == (131072, 131072, "max_position_embeddings")


def test_rope_scaling_without_a_type_is_a_default_rope_as_vllm_reads_it() -> None:
    """transformers 5.5.3 (vLLM @28be48fa9's pinned test version) sets an absent rope_type to "default"
    (standardize_rope_params) before vLLM's patch_legacy_rope_type sees it, and
    _get_and_verify_max_len multiplies by the factor of any type but su / longrope / llama3.
    Before: an untyped entry with a factor was refused, as only transformers 4.x makes vLLM refuse it."""
    base = {**LLAMA, "max_position_embeddings": 4096}
    assert _derived({**base, "rope_scaling": {"mrope_section": [16, 24, 24]}}) == (
        4096,
        4096,
        "max_position_embeddings",
    )
    assert _derived({**base, "rope_scaling": {"factor": 2.0}}) == (8192, 8192, "max_position_embeddings")
    # yarn without its own original length takes max_position_embeddings (hand: 4096 × 2)
    assert _derived({**base, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}})[0] == 8192


@pytest.mark.parametrize(
    ("rope", "words"),
    [
        ({"type": "mrope"}, "legacy rope_type 'mrope' without mrope_section"),
        ({"type": "linear", "rope_type": "dynamic", "factor": 2.0}, "rope_type 'dynamic' and type 'linear'"),
    ],
)
def test_rope_scaling_vllm_refuses_is_refused_under_the_field(rope: dict[str, Any], words: str) -> None:
    """vllm/transformers_utils/config.py patch_legacy_rope_type @28be48fa9 raises on both."""
    with pytest.raises(InputError) as err:
        derive_max_len(HFConfig({**LLAMA, "max_position_embeddings": 4096, "rope_scaling": rope}))
    assert err.value.field == "model.config.rope_scaling" and words in err.value.message
    # Qwen2-VL's text class turns a legacy mrope into default itself (transformers 5.5.3)
    qwen2_vl = {**LLAMA, "model_type": "qwen2_vl", "max_position_embeddings": 4096, "rope_scaling": {"type": "mrope"}}
    assert _derived(qwen2_vl) == (4096, 4096, "max_position_embeddings")


def _all_configs() -> list[tuple[str, dict[str, Any]]]:
    found = [(e.slug, e.config_dict()) for e in list_models()]
    found += [(p.name, json.loads(p.read_text())) for p in sorted(SHARED_CONFIGS.glob("**/*.json"))]
    return found


def test_every_catalogue_model_and_shared_config_matches_the_vllm_oracle() -> None:
    configs = _all_configs()
    assert len(configs) >= 60
    for name, config in configs:
        shape = shape_from_config(config)
        default, derived = _vllm_max_len(config)
        assert default_max_model_len(shape)[0] == default, name
        assert shape.max_len is not None
        assert shape.max_len.limit == (None if "falcon-mamba" in name else math.floor(derived)), name


@pytest.mark.parametrize(("name", "tokens"), [
    ("deepseek-r1.json", 163840), ("gpt-oss-120b.json", 131072), ("llama31-8b.json", 131072),
    ("qwen3-14b.json", 40960), ("qwen3-next-80b.json", 262144), ("qwen3-vl-30b-a3b.json", 262144),
])  # fmt: skip
def test_shared_configs_hand_values(name: str, tokens: int) -> None:
    """Hand: DeepSeek-R1 yarn 4096 × 40; gpt-oss yarn 4096 × 32; Llama-3.1 llama3 unscaled 131072."""
    config = json.loads((SHARED_CONFIGS / name).read_text())
    assert default_max_model_len(shape_from_config(config))[0] == tokens


def _plan(model: str, max_model_len: int) -> object:
    return build_plan(validate_plan({"model": {"catalogue": model}, "gpu": {"name": "H100 80GB"},
                                     "engine": {"max_model_len": max_model_len}}))  # fmt: skip


def test_a_given_length_above_the_derived_one_is_refused_as_vllm_refuses_it() -> None:
    """vLLM: 'User-specified max_model_len (...) is greater than the derived max_model_len' unless
    VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. Qwen3-14B states 40960."""
    _plan("qwen3-14b", 40960)
    with pytest.raises(InputError) as err:
        _plan("qwen3-14b", 40961)
    assert err.value.field == "engine.max_model_len"
    assert "40,961 is more than the model's derived maximum length 40,960" in err.value.message
    assert "max_position_embeddings" in err.value.message and "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in err.value.message
    config = next(e for e in list_models() if e.slug == "qwen3-14b").config_dict()
    with pytest.raises(InputError) as err:
        kv_bytes_report(config, max_model_len=65536)
    assert err.value.field == "--max-model-len"  # kvledger kv-bytes: named by the option as written
    assert err.value.message.startswith(
        "--max-model-len: 65,536 is more than the model's derived maximum length 40,960"
    )
    # no length key: vLLM takes a given length unchecked
    _plan("falcon-mamba-7b", 1_000_000)


def test_a_config_stating_several_keys_plans_at_the_smallest() -> None:
    """Hand: max_position_embeddings 131072 and max_seq_len 4096 → 4096 (the old reader took 131072)."""
    config = {**LLAMA, "max_position_embeddings": 131072, "max_seq_len": 4096}
    assert kv_bytes_report(config)["max_model_len"] == 4096
    with pytest.raises(InputError, match=r"derived maximum length 4,096 \(max_seq_len in its config.json"):
        kv_bytes_report(config, max_model_len=8192)


def test_sizing_refuses_a_target_above_the_derived_length_under_the_target_field() -> None:
    from app.services.sizing import resolve

    doc = {"model": {"catalogue": "gemma-2-9b-it"}, "target": {"max_model_len": 16384, "concurrency": 1},
           "gpus": ["H100 80GB"]}  # fmt: skip
    with pytest.raises(InputError) as err:
        resolve(doc)
    assert err.value.field == "target.max_model_len" and "derived maximum length 8,192" in err.value.message


def test_measured_ranks_keep_a_length_above_the_limit_with_a_note() -> None:
    """A run's measured rows (a log, an import) at a max_model_len above the model's derived length
    are kept — vLLM started it (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 or a config override) — and the plan
    says so; the same length on estimated rows is refused."""
    from app.services.plans import run_plan

    doc = {"model": {"catalogue": "qwen3-8b"}, "engine": {"max_model_len": 131072}}
    measured = run_plan({**doc, "ranks": [{"total": "80GiB", "kv_room": "40GiB"}]}, with_levers=False)
    (note,) = [n for n in measured["notes"] if "derived maximum length 40,960" in n]
    assert "measured rows are kept" in note and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in note
    with pytest.raises(InputError) as err:
        run_plan({**doc, "gpu": {"name": "H100 80GB"}}, with_levers=False)
    assert err.value.field == "engine.max_model_len" and "40,960" in err.value.message


def test_allow_long_max_model_len_plans_the_longer_length_with_vllms_warning() -> None:
    """engine.allow_long_max_model_len (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1): vLLM warns instead of raising
    (vllm/config/model.py _get_and_verify_max_len @28be48fa9: `logger.warning_once("%s %s", msg,
    warning)`), so the plan runs at the given length and its notes carry the warning; without it the
    refusal says how to set it on the plan page and in a document."""
    from app.services.plans import run_plan

    doc: dict[str, Any] = {"model": {"catalogue": "qwen3-14b"}, "gpu": {"name": "H100 80GB"},
                           "engine": {"max_model_len": 65536}}  # fmt: skip
    with pytest.raises(InputError) as err:
        run_plan(doc, with_levers=False)
    assert err.value.field == "engine.max_model_len"
    assert "tick 'Allow long max model len' on the plan page" in err.value.message
    assert "engine.allow_long_max_model_len: true" in err.value.message
    allowed = run_plan({**doc, "engine": {"max_model_len": 65536, "allow_long_max_model_len": True}},
                       with_levers=False)  # fmt: skip
    assert allowed["engine"]["max_model_len"] == 65536
    (note,) = [n for n in allowed["notes"] if "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in n]
    assert note.startswith(
        "max_model_len 65,536 is more than the model's derived maximum length 40,960 "
        "(max_position_embeddings in its config.json): planned as vLLM starts it"
    )
    assert "extreme caution" in note and "nan" in note and "out-of-bounds" in note
    # on measured ranks with the variable stated, the same warning (not the 'config override' guess)
    measured = run_plan({**doc, "engine": {"max_model_len": 65536, "allow_long_max_model_len": True},
                         "ranks": [{"total": "80GiB", "kv_room": "40GiB"}]}, with_levers=False)  # fmt: skip
    assert [n for n in measured["notes"] if "derived maximum length" in n] == [note]


def test_kv_bytes_sizes_a_long_length_with_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kvledger kv-bytes --allow-long-max-model-len` (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1): the per-request
    worst case at the longer length, with vLLM's warning in the notes; without it the refusal names the flag."""
    from app.cli import main

    config = next(e for e in list_models() if e.slug == "qwen3-14b").config_dict()
    with pytest.raises(InputError) as err:
        kv_bytes_report(config, max_model_len=65536)
    assert err.value.field == "--max-model-len" and "--allow-long-max-model-len" in err.value.message
    own = kv_bytes_report(config, max_model_len=40960)
    long = kv_bytes_report(config, max_model_len=65536, allow_long_max_model_len=True)
    assert long["max_model_len"] == 65536 and long["kv_bytes_per_token"] == own["kv_bytes_per_token"]
    assert [n for n in long["notes"] if "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1, which warns" in n]
    assert not [n for n in own["notes"] if "VLLM_ALLOW_LONG" in n]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["kv-bytes", str(path), "--max-model-len", "65536", "--allow-long-max-model-len", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_model_len"] == 65536
    assert main(["kv-bytes", str(path), "--max-model-len", "65536", "--json"]) == 2


def test_a_multimodal_config_is_read_from_its_text_config_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vLLM reads the length keys and the RoPE of ``hf_text_config`` (get_hf_text_config; _get_and_verify_max_len
    is called with hf_config=self.hf_text_config, vllm/config/model.py @28be48fa9): a composite config's
    top-level keys are not looked at, and a key the text_config omits takes its class's default
    (Qwen3VLMoeTextConfig: max_position_embeddings 128000, transformers 5.5.3). Before: the top level was
    the fallback, so `kvledger kv-bytes` planned at 8,192 and at 4 × 262,144."""
    from app.cli import main

    real = json.loads((SHARED_CONFIGS / "qwen3-vl-30b-a3b.json").read_text())
    text = {k: v for k, v in real["text_config"].items() if k != "max_position_embeddings"}
    variants = [
        ({**real, "max_position_embeddings": 8192, "text_config": text}, 128000),
        ({**real, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}, 262144),
    ]
    for n, (config, tokens) in enumerate(variants):
        path = tmp_path / f"config{n}.json"
        path.write_text(json.dumps(config))
        assert main(["kv-bytes", str(path), "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["max_model_len"] == tokens


def test_kv_bytes_reads_rope_as_vllm_with_transformers_v5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kvledger kv-bytes`: an untyped rope_scaling plans as a default rope (its factor counted), a legacy
    mrope without mrope_section is refused naming the field. Before: the first was refused, the second planned."""
    from app.cli import main

    base = {**LLAMA, "max_position_embeddings": 4096}
    for rope, expected in [({"factor": 2.0}, 8192), ({"mrope_section": [16, 24, 24]}, 4096), ({"type": "mrope"}, None)]:
        path = tmp_path / "config.json"
        path.write_text(json.dumps({**base, "rope_scaling": rope}))
        code = main(["kv-bytes", str(path), "--json"])
        out = capsys.readouterr()
        if expected is None:
            assert code == 2 and "config.rope_scaling: states the legacy rope_type" in out.err
        else:
            assert code == 0 and json.loads(out.out)["max_model_len"] == expected
