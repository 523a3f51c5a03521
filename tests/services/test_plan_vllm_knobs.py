"""vLLM knobs its own KV-cache tests use, in the plan document (issue 17, item 24):
``engine.num_gpu_blocks_override`` and ``engine.disable_hybrid_kv_cache_manager``.

The numbers are those of vLLM's test_get_kv_cache_config_one_worker (tests/v1/core/
test_kv_cache_utils.py @bcb9c133): 2 layers of 2 KV heads × 64 at float32, block 16, 32 blocks' worth
of memory per layer.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import InputError
from app.services.plans import run_plan

PAGE = 16 * 2 * 64 * 4 * 2
CONFIG = {
    "model_type": "llama", "num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
    "num_key_value_heads": 2, "head_dim": 64, "torch_dtype": "float32", "vocab_size": 1000,
    "max_position_embeddings": 4096, "layer_types": ["full_attention", "sliding_attention"], "sliding_window": 1,
}  # fmt: skip


def doc(**engine: Any) -> dict[str, Any]:
    return {
        "model": {"config": CONFIG},
        "engine": {"max_model_len": 16, "block_size": 16, "kv_cache_dtype": "float32", **engine},
        "ranks": [{"kv_room": PAGE * 2 * 32}],
    }


def test_hybrid_manager_on_and_off() -> None:
    on = run_plan(doc(), with_levers=False)
    off = run_plan(doc(disable_hybrid_kv_cache_manager=True), with_levers=False)
    assert on["blocks"] == 64 and off["blocks"] == 32  # vLLM: 64 blocks of two groups, 32 of one
    assert "--disable-hybrid-kv-cache-manager" in off["flags"]
    assert "--disable-hybrid-kv-cache-manager" not in on["flags"]
    assert off["engine"]["disable_hybrid_kv_cache_manager"] is True


def test_num_gpu_blocks_override() -> None:
    result = run_plan(doc(disable_hybrid_kv_cache_manager=True, num_gpu_blocks_override=16), with_levers=False)
    assert result["blocks"] == 16
    assert "--num-gpu-blocks-override 16" in result["flags"]
    refused = run_plan(doc(num_gpu_blocks_override=1, max_model_len=64), with_levers=False)
    assert not refused["fits_max_model_len"]


@pytest.mark.parametrize("bad", [0, -1, "x"])
def test_override_is_a_positive_integer(bad: object) -> None:
    with pytest.raises(InputError) as err:
        run_plan(doc(num_gpu_blocks_override=bad), with_levers=False)
    assert err.value.field == "engine.num_gpu_blocks_override"
