"""Real logs pasted one after another (issue 12 item 1's benchmark input): a run whose KV figure
is negative (a failed start, public/23, public/08) merged with a block count from the next log
implied a negative bytes per token, and the plan document's validation raised instead of naming
why there is no plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.services import imports
from app.services.evidence import bytes_per_token_from_run

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
NEGATIVE = LOGS / "public" / "23-v073-qwen25-7b-rtx4060-8gb-tp1-negative-kv.log"


@pytest.mark.parametrize("kv", [-1_127_428_915, 0])
def test_a_negative_or_zero_kv_figure_implies_no_bytes_per_token(kv: int) -> None:
    run: dict[str, Any] = {"engine": {"num_gpu_blocks": 100, "block_size": 16}, "ranks": [{"kv_bytes": kv}]}
    assert bytes_per_token_from_run(run) is None
    run["ranks"].append({"kv_bytes": 16 * 100 * 512})
    assert bytes_per_token_from_run(run) == 512  # the positive figure still counts


def test_fewer_bytes_than_blocks_implies_nothing() -> None:
    assert bytes_per_token_from_run({"engine": {"num_gpu_blocks": 10**6}, "ranks": [{"kv_bytes": 5}]}) is None


@pytest.mark.parametrize("second", ["extra/docker-compose-kubectl.log", "extra/hard-wrapped-fold80.log",
                                    "public/26-v091dev-unknown-tp-cpu-offload-connector-blocks-override.log"])
def test_a_negative_kv_log_followed_by_another_reads(second: str) -> None:
    parsed, docs = imports.read_log(NEGATIVE.read_text() + (LOGS / second).read_text())
    assert len(docs) == len(parsed["runs"])
    for run, (doc, error) in zip(parsed["runs"], docs, strict=True):
        assert run["implied_kv_bytes_per_token"] is None or run["implied_kv_bytes_per_token"] > 0
        assert (doc is None) != (error is None)


def test_every_real_log_concatenated_reads_with_a_plan_or_a_reason_per_run() -> None:
    text = "".join(p.read_text() + "\n" for p in sorted(LOGS.rglob("*.log")))
    parsed, docs = imports.read_log(text)
    assert len(docs) == len(parsed["runs"]) >= 30
    assert all((doc is None) != (error is None) for doc, error in docs)
