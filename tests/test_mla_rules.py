"""MLA sizing by vLLM version (app.core.mla_rules), each rule against a computation made here from the
config.json alone and at the vLLM boundary it cites:

- full K/V before v0.7.1 (cabaf4eff, PR #12528; baeded256, PR #12601): ``2 × kv_heads/tp × (nope + rope) × 2 B``
  per layer (V padded to the K head size, deepseek_v2.py @cabaf4eff^); the latent from v0.7.1;
- v0.7.1–v0.7.2 disable MLA for non-fp8 quantized checkpoints (use_mla @baeded256), fixed in v0.7.3 (PR #13181);
- VLLM_MLA_DISABLE=1 (engine.mla_disable, --mla-disable) forces full K/V;
- the MLA block size by version × GPU family (b0d541947, PR #14451; 77a73458e, PR #35122).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.cli import main
from app.core.exports import export
from app.core.mla_rules import (
    BACKEND_BLOCK_SINCE,
    FLASHMLA_FORCED_SINCE,
    MLA_QUANT_FIX_SINCE,
    MLA_SINCE,
    family_block_sizes,
    gpu_family,
    mla_block_size,
    mla_decision,
)
from app.ingest.catalogue import get_model
from app.services.plans import run_plan


def _config(name: str) -> dict[str, Any]:
    return dict(get_model(name).config_dict())


def _full_kv(config: dict[str, Any], tp: int) -> int:
    """Pre-MLA vLLM: K and V of qk_nope + qk_rope per KV head on the rank, bf16, every layer."""
    head = int(config["qk_nope_head_dim"]) + int(config["qk_rope_head_dim"])
    return 2 * (int(config["num_key_value_heads"]) // tp) * head * 2 * int(config["num_hidden_layers"])


def _latent(config: dict[str, Any]) -> int:
    return (int(config["kv_lora_rank"]) + int(config["qk_rope_head_dim"])) * 2 * int(config["num_hidden_layers"])


def _plan(model: dict[str, Any], version: str, tp: int = 1, gpu: str | None = "H100", **engine: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"model": model, "layout": {"tp": tp}, "vllm_version": version,
                           "engine": {"max_model_len": 4096, **engine}}  # fmt: skip
    if gpu is not None:
        doc["gpu"] = {"name": gpu, "count": tp}
    else:
        doc["ranks"] = [{"kv_room": "40 GiB"}] * tp  # measured KV room: no card named
    return run_plan(doc, with_levers=False)


def _label(version: tuple[int, int, int]) -> str:
    return ".".join(map(str, version))


@pytest.mark.parametrize(("name", "tp", "full", "latent"), [
    ("deepseek-v2-lite", 1, 331_776, 31_104),
    ("deepseek-v3", 8, 749_568, 70_272),
    ("deepseek-r1", 8, 749_568, 70_272),
])  # fmt: skip
def test_full_kv_before_071_and_the_latent_from_it(name: str, tp: int, full: int, latent: int) -> None:
    config = _config(name)
    assert (_full_kv(config, tp), _latent(config)) == (full, latent)  # the brief's figures, recomputed here
    before = _plan({"catalogue": name}, "0.7.0", tp, gpu="H200")
    assert before["kv_bytes_per_token"] == full and before["kv_heads_per_rank"] == config["num_key_value_heads"] // tp
    assert any("predates MLA caching" in n for n in before["notes"])
    at = _plan({"catalogue": name}, _label(MLA_SINCE), tp, gpu="H200")
    assert at["kv_bytes_per_token"] == latent and at["kv_heads_per_rank"] == 1
    assert not any("predates MLA" in n for n in at["notes"])
    # more tokens fit with the latent, in the ratio of the per-token bytes (same budget, same card)
    assert before["raw_tokens"] > 0 and at["raw_tokens"] > before["raw_tokens"] * (full // latent - 1)


def _awq(config: dict[str, Any]) -> dict[str, Any]:
    return {**config, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128,
                                              "zero_point": True, "version": "gemm"}}  # fmt: skip


def test_quantized_checkpoints_cache_full_kv_until_073() -> None:
    config = _config("deepseek-v2-lite")
    awq = {"config": _awq(config)}
    for version in ("0.7.1", "0.7.2"):
        out = _plan(awq, version, gpu="A100")
        assert out["kv_bytes_per_token"] == _full_kv(config, 1), version
        assert any("disables MLA for awq" in n for n in out["notes"])
    assert _plan(awq, _label(MLA_QUANT_FIX_SINCE), gpu="A100")["kv_bytes_per_token"] == _latent(config)
    # fp8 (V3's own block-fp8 checkpoint) kept MLA in 0.7.1–0.7.2 (use_mla @baeded256)
    v3 = _config("deepseek-v3")
    assert v3["quantization_config"]["quant_method"] == "fp8"
    assert _plan({"catalogue": "deepseek-v3"}, "0.7.2", 8)["kv_bytes_per_token"] == _latent(v3)
    assert mla_decision("0.7.2", "compressed-tensors").latent and not mla_decision("0.7.2", "gptq").latent
    assert mla_decision("0.7.3", "gptq").latent


def test_mla_disable_forces_full_kv_in_every_version() -> None:
    config = _config("deepseek-v2-lite")
    for version in ("0.7.1", "0.10.2", "0.27.1"):
        out = _plan({"catalogue": "deepseek-v2-lite"}, version, mla_disable=True)
        assert out["kv_bytes_per_token"] == _full_kv(config, 1), version
        assert out["engine"]["mla_disable"] is True
        assert any("VLLM_MLA_DISABLE=1" in n for n in out["notes"])
    assert _plan({"catalogue": "deepseek-v2-lite"}, "0.27.1")["engine"]["mla_disable"] is False


def test_a_non_mla_model_ignores_the_rules() -> None:
    base = _plan({"catalogue": "llama-3.1-8b"}, "0.27.1")
    for version, disable in (("0.7.0", False), ("0.27.1", True)):
        out = _plan({"catalogue": "llama-3.1-8b"}, version, mla_disable=disable)
        assert (out["kv_bytes_per_token"], out["block_size"]) == (base["kv_bytes_per_token"], base["block_size"])


# Block sizes: each backend's supported kernel block sizes as the cited files state them @4dd49b06f,
# then vLLM's AttentionBackend.get_preferred_block_size (vllm/v1/attention/backend.py) applied here.
_SUPPORTED: dict[str, tuple[int, bool]] = {  # (size, "MultipleOf")
    "FLASH_ATTN_MLA": (16, True),  # flashattn_mla.py; kv dtypes auto/float16/bfloat16 only
    "FLASHMLA": (64, False),  # flashmla.py
    "FLASHINFER_MLA": (32, False),  # flashinfer_mla.py: [32, 64], smallest 32
    "TRITON_MLA": (16, True),  # triton_mla.py
}


def _preferred(backend: str, default: int = 16) -> int:
    size, multiple = _SUPPORTED[backend]
    return default if (default % size == 0 if multiple else default == size) else size


@pytest.mark.parametrize(("gpu", "kv_dtype", "backend"), [
    ("H100", "auto", "FLASH_ATTN_MLA"), ("H200", "bfloat16", "FLASH_ATTN_MLA"), ("H100", "fp8", "FLASHMLA"),
    ("B200", "auto", "FLASHINFER_MLA"), ("A100", "auto", "TRITON_MLA"), ("L40S", "fp8", "TRITON_MLA"),
])  # fmt: skip
def test_from_018_the_backends_preferred_size(gpu: str, kv_dtype: str, backend: str) -> None:
    family = gpu_family(gpu)
    assert family is not None
    since = _label(BACKEND_BLOCK_SINCE)
    assert mla_block_size(since, family, kv_dtype, 16) == _preferred(backend)
    assert _plan({"catalogue": "deepseek-v2-lite"}, since, gpu=gpu, kv_cache_dtype=kv_dtype)["block_size"] == (
        _preferred(backend)
    )
    # a --block-size the user sets is kept from 0.18 on
    assert _plan({"catalogue": "deepseek-v2-lite"}, since, gpu=gpu, kv_cache_dtype=kv_dtype,
                 block_size=128)["block_size"] == 128  # fmt: skip


def test_v08_to_v017_hopper_forces_64() -> None:
    model = {"catalogue": "deepseek-v2-lite"}
    assert _plan(model, _label(FLASHMLA_FORCED_SINCE))["block_size"] == 64
    assert _plan(model, "0.17.1")["block_size"] == 64
    assert _plan(model, "0.17.1", block_size=16)["block_size"] == 64  # forced whatever was set (cuda.py)
    assert _plan(model, "0.17.1", block_size=128)["block_size"] == 128  # already a multiple of 64
    assert _plan(model, "0.7.3")["block_size"] == 16  # before b0d541947: Triton MLA, the configured size
    assert _plan(model, "0.17.1", gpu="A100")["block_size"] == 16  # FlashMLA is Hopper-only
    assert any("MLA block size 64" in n for n in _plan(model, "0.10.2")["notes"])


def test_no_card_keeps_the_configured_size_and_lists_the_picks() -> None:
    out = _plan({"catalogue": "deepseek-v2-lite"}, "0.27.1", gpu=None, kv_cache_dtype="fp8")
    assert out["block_size"] == 16
    picks = family_block_sizes("0.27.1", "fp8", 16)
    assert picks == {"hopper": 64, "blackwell": 32, "ampere/ada": 16}
    assert any("no GPU named" in n and "hopper 64, blackwell 32, ampere/ada 16" in n for n in out["notes"])


def _config_file(tmp_path: Path, config: dict[str, Any]) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def _kv_bytes(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["kv-bytes", *args, "--max-model-len", "4096", "--json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def test_kv_bytes_cli_by_version_gpu_and_mla_disable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config("deepseek-v2-lite")
    path = _config_file(tmp_path, config)
    before = _kv_bytes(capsys, path, "--vllm-version", "0.7.0")
    head = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    assert (before["head_dim"], before["layer_kinds"]) == (head, {"full": config["num_hidden_layers"]})
    assert before["kv_bytes_per_token"] == _full_kv(config, 1)
    assert before["kv_heads_per_rank"] == config["num_key_value_heads"]
    assert not any("latent" in n for n in before["notes"])
    now = _kv_bytes(capsys, path)
    assert now["kv_bytes_per_token"] == _latent(config) and now["layer_kinds"] == {"mla": config["num_hidden_layers"]}
    assert any("latent" in n for n in now["notes"])
    assert _kv_bytes(capsys, path, "--mla-disable")["kv_bytes_per_token"] == _full_kv(config, 1)
    assert _kv_bytes(capsys, path, "--vllm-version", "0.10.2", "--gpu", "H100")["block_size"] == 64
    assert _kv_bytes(capsys, path, "--gpu", "B200")["block_size"] == 32
    assert _kv_bytes(capsys, path, "--gpu", "B200", "--block-size", "64")["block_size"] == 64


def test_deploy_files_carry_the_environment_the_plan_was_sized_with() -> None:
    model = {"catalogue": "deepseek-v2-lite"}
    plain = _plan(model, "0.27.1")
    sized = _plan(model, "0.27.1", mla_disable=True, estimate_cudagraphs=False)
    on = _plan(model, "0.19.0", estimate_cudagraphs=True)
    for fmt in ("serve", "vllm-config", "kserve", "production-stack", "llm-d"):
        assert "VLLM_MLA_DISABLE" not in export(plain, fmt).text
        assert "ESTIMATE_CUDAGRAPHS" not in export(plain, fmt).text
        text = export(sized, fmt).text
        assert "VLLM_MLA_DISABLE" in text and "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS" in text, fmt
    assert "VLLM_MLA_DISABLE=1 \\" in export(sized, "serve").text
    assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0 \\" in export(sized, "serve").text
    assert "VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 \\" in export(on, "serve").text
    assert "# set in the engine's environment: VLLM_MLA_DISABLE=1" in export(sized, "vllm-config").text
    assert "name: VLLM_MLA_DISABLE\n" in export(sized, "kserve").text
