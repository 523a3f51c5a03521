"""LoRA and speculative-decoding flags of `vllm serve` read into `engine.lora` / `engine.speculative`.

They were kept as "flags the plan does not model", so the plan left out the LoRA slots and the
draft's weights and KV. vLLM's defaults (28be48fa9): LoRAConfig max_loras 1, max_lora_rank 16
(vllm/config/lora.py); LoRAConfig only with enable_lora (vllm/engine/arg_utils.py); the method
inferred in SpeculativeConfig.__post_init__ (vllm/config/speculative.py)."""

from __future__ import annotations

import pytest

from app.core.errors import InputError
from app.ingest.vllm_serve import read_serve, read_vllm_config, serve_notes

LLAMA = "vllm serve meta-llama/Llama-3.1-8B-Instruct"


def test_lora_flags_fill_engine_lora() -> None:
    r = read_serve(f"{LLAMA} --enable-lora --max-lora-rank 64 --max-loras 4")
    assert r.document()["engine"] == {"lora": {"max_loras": 4, "max_lora_rank": 64}}
    assert r.other_flags == [] and r.notes == []
    assert r.written["engine.lora.max_lora_rank"] == "--max-lora-rank"


def test_enable_lora_alone_takes_vllms_defaults() -> None:
    r = read_serve(f"{LLAMA} --enable-lora --max-cpu-loras 8")
    assert r.engine["lora"] == {"max_loras": 1, "max_lora_rank": 16, "max_cpu_loras": 8}
    assert read_serve(f"{LLAMA} --enable-lora --max-cpu-loras 0").engine["lora"] == {"max_loras": 1,
                                                                                     "max_lora_rank": 16}


def test_lora_sizes_without_enable_lora_make_no_slots_and_say_so() -> None:
    for cmd in (f"{LLAMA} --max-loras 4", f"{LLAMA} --enable-lora --no-enable-lora --max-loras 4"):
        r = read_serve(cmd)
        assert "lora" not in r.engine
        assert any("--max-loras 4 without --enable-lora" in n for n in r.notes)


def test_other_lora_flags_stay_named() -> None:
    r = read_serve(f"{LLAMA} --enable-lora --fully-sharded-loras --lora-dtype bfloat16")
    assert r.engine["lora"] == {"max_loras": 1, "max_lora_rank": 16}
    notes = serve_notes({"serve": f"{LLAMA} --enable-lora --fully-sharded-loras"})
    assert any("does not model" in n and "--fully-sharded-loras" in n for n in notes)
    assert not any("--enable-lora" in n for n in notes)


def test_bad_lora_number_names_the_flag() -> None:
    with pytest.raises(InputError) as err:
        read_serve(f"{LLAMA} --enable-lora --max-loras four")
    assert err.value.field == "serve --max-loras"


def test_ngram_speculative_config() -> None:
    r = read_serve(LLAMA + """ --speculative-config '{"method": "ngram", "num_speculative_tokens": 4, """
                           """"prompt_lookup_max": 4}'""")
    assert r.engine["speculative"] == {"method": "ngram", "num_speculative_tokens": 4}
    assert r.other_flags == []
    assert any("keys the plan does not model" in n and "prompt_lookup_max" in n for n in r.notes)


def test_draft_model_method_inferred_and_matched() -> None:
    r = read_serve(LLAMA + """ -sc '{"model": "meta-llama/Llama-3.2-1B-Instruct", "num_speculative_tokens": 5}'""")
    assert r.engine["speculative"] == {"method": "draft_model", "num_speculative_tokens": 5,
                                       "model": {"catalogue": "llama-3.2-1b",
                                                 "name": "meta-llama/Llama-3.2-1B-Instruct"}}


def test_spec_flags_fill_the_config_and_clash_with_it() -> None:
    r = read_serve(f"{LLAMA} --spec-method ngram --spec-tokens 3")
    assert r.engine["speculative"] == {"method": "ngram", "num_speculative_tokens": 3}
    with pytest.raises(InputError) as err:
        read_serve(LLAMA + """ --speculative-config '{"method": "ngram"}' --spec-method ngram""")
    assert err.value.field == "serve --spec-method" and "mutually exclusive" in err.value.message


def test_mtp_alias_and_config_yaml() -> None:
    r = read_vllm_config("model: deepseek-ai/DeepSeek-V3\nspeculative-config:\n  method: deepseek_mtp\n"
                         "  num_speculative_tokens: 1\n")
    assert r.engine["speculative"] == {"method": "mtp", "num_speculative_tokens": 1}


def test_unknown_draft_and_bad_json_are_errors_naming_the_flag() -> None:
    with pytest.raises(InputError) as err:
        read_serve(LLAMA + """ --speculative-config '{"model": "someone/tiny-draft", "num_speculative_tokens": 4}'""")
    assert err.value.field == "serve --speculative-config" and "not in the catalogue" in err.value.message
    with pytest.raises(InputError) as err:
        read_serve(LLAMA + " --speculative-config '[4]'")
    assert err.value.field == "serve --speculative-config" and "JSON object" in err.value.message


def test_a_method_the_plan_does_not_size_is_named() -> None:
    r = read_serve(LLAMA + """ --speculative-config '{"method": "suffix"}'""")
    assert "speculative" not in r.engine
    assert any("'suffix'" in n for n in r.notes)
    assert [f["flag"] for f in r.other_flags] == ["--speculative-config"]
