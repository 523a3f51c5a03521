"""A real vLLM log that states only its block count (V0 "# GPU blocks: N", V1 "GPU KV cache size: N
tokens") and no KV memory imports with the rank's KV room = blocks × page_bytes × layers, marked
measured-derived: its tokens equal the log's exactly. A log that states its KV memory keeps it.

public 03 (vLLM 0.8.4, Llama-3.1-8B on one L40S: "GPU KV cache size: 158,656 tokens", no
"Available KV cache memory" at INFO) imported as "run 0 states no per-rank memory".
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.core.errors import InputError
from app.services import plans
from app.services.evidence import parse_log_text
from app.services.imports import read_log

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests" / "data" / "vllm-logs"
CONFIGS = ROOT / "tests" / "data" / "configs"
_BLOCKS = re.compile(r"# GPU blocks|GPU KV cache size|num_gpu_blocks")
_MEMORY = re.compile(r"Available KV cache memory|[Mm]emory profiling|Free memory on|vLLM instance can use"
                     r"|reserved for KV Cache")
#: The real logs with a blocks line and no KV memory or profiling rows, and the catalogue model and
#: TP of the run (index.json; None: not in the catalogue, or the model is not named).
BLOCKS_ONLY = {
    "public/03-v084-llama31-8b-l40s-tp1.log": ("llama-3.1-8b", 1),
    "public/20-v073dev-unknown-tp1-blocks-then-tokens.log": (None, 1),
    "public/27-v0260-deepseek-v4-flash-nvfp4-2x-sm120-96gb-tp2-ep-cpu-offload.log": (None, 2),
    "public/34-v027dev-qwen35-xpu-mtp-combined-kv-line-graph-capture.log": (None, 1),
    "public/35-v042-opt-125m-tp1-mml-only-in-engine-config.log": (None, 1),
    "public/44-v026dev-patched-qwen35-rtx5090-nvfp4kv-1m-ctx.log": (None, 1),
    "public/46-v085-qwen3-moe-tp4-compose-kv-then-cg-capture-fail.log": ("qwen3-30b-a3b", 4),
    "public/53-v033dev-opt-125m-tp1-weights-mb-blocks.log": (None, 1),
}
WITH_MODEL = [name for name, (slug, _) in BLOCKS_ONLY.items() if slug]


def _logged_tokens(run: dict) -> int:  # type: ignore[type-arg]
    engine = run["engine"]
    tokens = engine["kv_tokens"] if engine.get("kv_tokens") is not None else engine["num_gpu_blocks"] * 16
    assert isinstance(tokens, int)
    return tokens


def test_the_blocks_only_logs_are_these() -> None:
    found = {str(p.relative_to(LOGS)) for p in LOGS.rglob("*.log")
             if _BLOCKS.search(t := p.read_text(errors="replace")) and not _MEMORY.search(t)}  # fmt: skip
    assert found == set(BLOCKS_ONLY)


@pytest.mark.parametrize("name", WITH_MODEL)
def test_the_plan_holds_the_logged_tokens(name: str) -> None:
    slug, tp = BLOCKS_ONLY[name]
    parsed, docs = read_log((LOGS / name).read_text(), None, {"tp": tp}, {"catalogue": slug})
    run = parsed["runs"][0]
    assert not any(r.get("kv_bytes") for r in run["ranks"])  # the log states no KV memory
    doc, error = docs[0]
    assert error is None and doc is not None
    result = plans.run_plan(doc, with_levers=False)
    assert result["tokens"] == result["vllm_kv_cache_size_tokens"] == _logged_tokens(run)
    assert round(result["max_concurrency_at_max_model_len"], 2) == run["engine"]["max_concurrency"]
    assert len(result["ranks"]) == tp and result["will_start"]
    page = result["explain"]["kv_bytes"]["values"]  # "9,916 × 65,536 × 32": blocks × page per layer × layers
    blocks, per_layer, layers = (int(v.replace(",", "")) for v in page.split(" × "))
    assert blocks * 16 == result["tokens"] and result["explain"]["kv_bytes"]["inputs"] == "measured"
    for rank in result["ranks"]:
        assert rank["kv_bytes"] == blocks * per_layer * layers and rank["sources"]["kv_bytes"] == "measured"
        assert rank["total_bytes"] is rank["requested_bytes"] is rank["headroom_bytes"] is None  # unknown
    assert any(n.startswith("measured-derived: ") and "within one block" in n for n in result["notes"])
    assert any("cannot be checked" in n and "total memory is not known" in n for n in result["notes"])


def test_the_cli_states_the_room_and_the_tokens() -> None:
    name = "public/03-v084-llama31-8b-l40s-tp1.log"
    out = subprocess.run([sys.executable, "-m", "app.cli", "import-log", "--json", "--config",
                          str(CONFIGS / "llama31-8b.json"), str(LOGS / name)],
                         capture_output=True, text=True, check=True, cwd=ROOT)  # fmt: skip
    run = json.loads(out.stdout)["runs"][0]
    room = run["residuals"]["kv_room_from_blocks"]
    assert room["tokens"] == room["blocks"] * room["block_size"] == _logged_tokens(run) == 158_656
    assert room["kv_room_bytes"] == room["blocks"] * room["page_bytes_per_layer"] * room["layers"]
    assert room["basis"].startswith("measured-derived: 158,656 tokens")


def test_a_log_without_a_model_says_what_it_needs() -> None:
    _, docs = read_log((LOGS / "public/35-v042-opt-125m-tp1-mml-only-in-engine-config.log").read_text())
    error = docs[0][1] or ""
    assert "states no per-rank memory" in error and "its logged block count gives the KV room" in error
    _, docs = read_log((LOGS / WITH_MODEL[0]).read_text(), None, {"tp": 1, "pp": 2}, {"catalogue": "llama-3.1-8b"})
    assert "pipeline stages" in (docs[0][1] or "")


def test_tokens_that_are_not_whole_blocks_give_no_count() -> None:
    """public 27 (vLLM 0.26.0): 302,945 tokens = int(max_concurrency × max_model_len), not blocks × 16."""
    name = "public/27-v0260-deepseek-v4-flash-nvfp4-2x-sm120-96gb-tp2-ep-cpu-offload.log"
    config = json.loads((CONFIGS / "public-logs" / "deepseek-v4-flash-nvfp4.json").read_text())
    _, docs = read_log((LOGS / name).read_text(), config, {"tp": 2}, {"config": config})
    assert docs[0][0] is None and "not a whole number of 16-token blocks" in (docs[0][1] or "")


def test_a_stated_kv_memory_stays() -> None:
    """Every real log that states its KV memory: no rank of its plan takes a room from blocks."""
    for path in sorted(LOGS.rglob("*.log")):
        if not _MEMORY.search(path.read_text(errors="replace")):
            continue
        _, docs = read_log(path.read_text(errors="replace"))
        for doc, _ in docs:
            if doc is None:
                continue
            assert not any("kv_room_blocks" in rank for rank in doc.get("ranks", [])), path.name
            assert not any(n.startswith("measured-derived") for n in doc.get("notes", [])), path.name


def test_kv_room_blocks_needs_a_room() -> None:
    from app.schemas import validate_plan

    with pytest.raises(InputError, match="kv_room_blocks"):
        validate_plan({"model": {"catalogue": "llama-3.1-8b"}, "ranks": [{"total": 2**30, "kv_room_blocks": 3}]})


def test_parsed_logs_in_the_set_state_blocks() -> None:
    for name in BLOCKS_ONLY:
        engine = parse_log_text((LOGS / name).read_text())["runs"][0]["engine"]
        assert engine.get("num_gpu_blocks") or engine.get("kv_tokens")


def test_a_total_the_user_gives_checks_the_budget() -> None:
    """The same room with the rank's total memory (an L40S preset, then a card too small for it):
    requested and headroom are worked out, and a room above the budget is said."""
    from app.core.gpus import find_preset

    name = "public/03-v084-llama31-8b-l40s-tp1.log"
    _, docs = read_log((LOGS / name).read_text(), None, None, {"catalogue": "llama-3.1-8b"})
    doc = docs[0][0]
    assert doc is not None
    preset = find_preset("L40S")
    assert preset is not None
    for total in (preset.total_bytes, 16 * 2**30):
        ranks = [{**r, "total": total} for r in doc["ranks"]]
        result = plans.run_plan({**doc, "ranks": ranks}, with_levers=False)
        (rank,) = result["ranks"]
        assert rank["requested_bytes"] is not None and rank["headroom_bytes"] is not None
        assert result["tokens"] == 158_656  # the room stays the logged blocks'
        assert not any("cannot be checked" in n for n in result["notes"])
        assert any("not in the log" in n for n in result["notes"])
        above = [w for w in result["warnings"] if w["code"] == "kv_room_above_budget"]
        assert bool(above) == (total * 0.9 < rank["kv_bytes"])


def test_tokens_that_could_be_two_counts_give_none() -> None:
    """16,000 tokens at max_model_len 1,000 is 1,000 blocks × 16 (vLLM before 2026-04-28) or
    int(1,008 / 63 × 1,000) (after, PR #41069): no count is read. At 1,024 (whole blocks) both agree;
    a concurrency that fits neither formula rules the count out."""
    from app.services.blocks_room import logged_blocks

    engine = {"kv_tokens": 16_000, "max_concurrency_tokens": 1_000, "max_concurrency": 16.0}
    assert logged_blocks({"engine": engine}, 16) is None
    whole = {**engine, "max_concurrency_tokens": 1_024, "max_concurrency": 15.62}
    assert logged_blocks({"engine": whole}, 16) == (1_000, "16,000 tokens (÷ block_size 16)")
    assert logged_blocks({"engine": {**whole, "max_concurrency": 3.1}}, 16) is None
