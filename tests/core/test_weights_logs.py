"""Per-rank weights against what vLLM logged, one test per real log that states them.

The logged figure is read from the log text itself ("Model loading took X GiB", "Loading model
weights took X GB" — bytes / 2**30 despite the label —, "model weights take X GiB", "Actual usage
is X GiB for weight"), so a hand-copied number cannot drift. The target is 2 % (issue 10).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from app.core.weights import weights_model, weights_per_rank

DATA = Path(__file__).resolve().parents[1] / "data"
LOGS = DATA / "vllm-logs"
CONFIGS = DATA / "configs"
GIB = 1024**3

_WEIGHT_LINE = re.compile(
    r"Model loading took ([0-9.]+) GiB|Loading model weights took ([0-9.]+) GB"
    r"|model weights take ([0-9.]+)\s*GiB|Actual usage is ([0-9.]+) GiB for weight"
)

# (log file, config, tp, expert parallel, source of the layout)
CASES = [
    ("01-v064-llama31-8b-rtx3090-tp1.log", "llama31-8b", 1, False),
    ("14-v0102-qwen3-235b-a22b-fp8-8xl40s-tp8-ep.log", "qwen3-235b-a22b-fp8", 8, True),
    ("15-v0102-qwen3-next-80b-h200-tp2-hybrid.log", "qwen3-next-80b", 2, False),
    ("18-v0110-qwen3-vl-30b-a3b-4x3090-tp4.log", "qwen3-vl-30b-a3b", 4, False),
]


def logged_weights_gib(log: Path) -> float:
    """The per-rank weights figure of a log (every rank must state the same one)."""
    values = {next(g for g in m.groups() if g) for m in _WEIGHT_LINE.finditer(log.read_text(errors="replace"))}
    assert len(values) == 1, f"{log.name}: expected one weights figure, got {sorted(values)}"
    return float(values.pop())


@pytest.mark.parametrize(("log", "config", "tp", "ep"), CASES, ids=[c[0][:2] for c in CASES])
def test_weights_match_the_log_within_2_percent(log: str, config: str, tp: int, ep: bool) -> None:
    logged = logged_weights_gib(LOGS / log)
    model = weights_model(json.loads((CONFIGS / f"{config}.json").read_text()))
    ours = weights_per_rank(model, tp, enable_expert_parallel=ep).nbytes / GIB
    assert ours == pytest.approx(logged, rel=0.02), f"{log}: ours {ours:.4f} GiB vs logged {logged} GiB"


def test_llama_weights_are_exact_to_the_logged_digits() -> None:
    # 8,030,261,248 parameters × 2 B + the rotary cache (131072 × 128 × 2 B) = 14.9888 GiB.
    model = weights_model(json.loads((CONFIGS / "llama31-8b.json").read_text()))
    assert round(weights_per_rank(model).nbytes / GIB, 4) == logged_weights_gib(LOGS / CASES[0][0])
