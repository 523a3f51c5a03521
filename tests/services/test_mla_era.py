"""An imported MLA run whose log format dates it across v0.7.1 is read at 0.7.1 (app.services.evidence).

vLLM began caching the MLA latent in v0.7.1 (cabaf4eff, PR #12528; baeded256, PR #12601; app.core.mla_rules);
before it, full K/V. Real text: tests/data/vllm-logs/public/30 (DeepSeek-R1, vLLM 0.7.2 on 2 × 8 H20-3e,
vllm-project/vllm#13074): its format alone dates it ≥ 0.6.5 < 0.8.0, whose lowest version would size
R1 with full K/V, ~10.7 × the bytes per token of the latent the run cached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.core.mla_rules import MLA_SINCE
from app.ingest.catalogue import get_model
from app.services import imports, plans
from app.services.evidence import mla_era_version, parse_log_text, residuals

LOG = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "public" / (
    "30-v072-deepseek-r1-h20-141gb-ray-tp8-pp2-driver-rows-worker-budget.log"
)
SINCE = ".".join(map(str, MLA_SINCE))


def _run() -> dict[str, Any]:
    run: dict[str, Any] = parse_log_text(LOG.read_text(encoding="utf-8"))["runs"][0]
    return run


def _doc() -> dict[str, Any]:
    config = get_model("deepseek-r1").config_dict()
    _, docs = imports.read_log(LOG.read_text(encoding="utf-8"), config, {"tp": 8, "pp": 2})
    doc, error = docs[0]
    assert doc is not None, error
    return doc


def test_the_logs_range_straddles_071() -> None:
    version = _run()["version"]
    assert version["stated"] is None
    low, high = version["inferred_min"], version["inferred_max_exclusive"]
    assert tuple(map(int, low.split("."))) < MLA_SINCE < tuple(map(int, high.split(".")))


def test_public_30_is_read_at_071_with_a_note_and_sized_with_the_latent() -> None:
    doc = _doc()
    assert doc["vllm_version"] == SINCE
    out = plans.run_plan(doc, with_levers=False)
    assert out["vllm_version"] == SINCE
    note = next(n for n in out["notes"] if f"across v{SINCE}" in n)
    assert f"read at {SINCE}" in note and "0.6.5" in note
    config: dict[str, Any] = dict(get_model("deepseek-r1").config_dict())
    # 31 of R1's 61 layers on the tight PP stage (vLLM get_pp_indices), one latent of 576 bf16 values each
    latent = (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * 2
    assert out["kv_bytes_per_token"] == latent * 31 and out["kv_heads_per_rank"] == 1


def test_a_stated_version_is_taken_as_it_is() -> None:
    doc = {**_doc(), "vllm_version": "0.7.0"}
    doc["notes"] = [n for n in doc.get("notes", []) if f"across v{SINCE}" not in n]
    out = plans.run_plan(doc, with_levers=False)
    config: dict[str, Any] = dict(get_model("deepseek-r1").config_dict())
    head = config["qk_nope_head_dim"] + config["qk_rope_head_dim"]
    assert out["kv_bytes_per_token"] == 2 * (config["num_key_value_heads"] // 8) * head * 2 * 31
    assert not any(f"across v{SINCE}" in n for n in out["notes"])
    stated = {**_run(), "vllm_version": "0.7.0"}
    assert mla_era_version(stated, {"catalogue": "deepseek-r1"}) == (None, "")


def test_only_mla_models_and_only_ranges_across_071() -> None:
    run = _run()
    assert mla_era_version(run, {"catalogue": "deepseek-r1"})[0] == SINCE
    assert mla_era_version(run, {"catalogue": "llama-3.1-8b"}) == (None, "")
    assert mla_era_version(run, {"kv_bytes_per_token": 70272}) == (None, "")
    later = {**run, "version": {**run["version"], "inferred_min": SINCE}}
    assert mla_era_version(later, {"catalogue": "deepseek-r1"}) == (None, "")
    earlier = {**run, "version": {**run["version"], "inferred_max_exclusive": SINCE}}
    assert mla_era_version(earlier, {"catalogue": "deepseek-r1"}) == (None, "")


def test_residuals_recompute_the_run_at_the_version_the_plan_reads_it_at() -> None:
    config: dict[str, Any] = dict(get_model("deepseek-r1").config_dict())
    layers, heads = config["num_hidden_layers"], config["num_key_value_heads"]  # the log states no TP/PP
    latent = (config["kv_lora_rank"] + config["qk_rope_head_dim"]) * 2 * layers
    full = 2 * heads * (config["qk_nope_head_dim"] + config["qk_rope_head_dim"]) * 2 * layers
    assert residuals(_run(), config)["kv_bytes_per_token"] == latent  # read at 0.7.1
    assert residuals({**_run(), "vllm_version": "0.7.0"}, config)["kv_bytes_per_token"] == full
    assert residuals({**_run(), "vllm_version": "0.7.2"}, config)["kv_bytes_per_token"] == latent
