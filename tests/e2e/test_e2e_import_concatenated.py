"""Two real logs pasted one after the other on the import page: two runs, each with its own figures.

16 (v0.10.2, Qwen3-14B TP1: EngineCore_DP0 pid 1133552, 42,656 tokens at 32,768) then 18 (v0.10.2,
Qwen3-VL-30B TP4: EngineCore_DP0 pid 41565, 6,297 blocks, 100,752 tokens at 65,536). The page showed
one run: 16's EngineCore beside 18's four ranks, 'kv tokens 42,656' (16's) with 'num gpu blocks 6,297'
and 'max concurrency tokens 65,536' (18's) — and its plan link was the mix of both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"


def test_two_pasted_logs_are_two_runs_with_their_own_numbers(page: Any) -> None:
    text = "".join(next(LOGS.glob(f"{n}-*.log")).read_text() for n in ("16", "18"))
    page.goto("/import")
    page.fill("#log-text", text)
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".card.import-run")
    cards = page.eval_on_selector_all(".card.import-run", "cs => cs.map(c => c.innerText)")
    assert len(cards) == 2
    first, second = cards
    assert "Run 1 of 2" in first and "kv tokens 42,656" in first and "max concurrency tokens 32,768" in first
    assert "6,297" not in first and "65,536" not in first
    assert "Run 2 of 2" in second and "num gpu blocks 6,297" in second and "kv tokens 100,752" in second
    per_card = page.eval_on_selector_all(
        ".card.import-run",
        "cs => cs.map(c => [...c.querySelectorAll('.ranks-preview tbody tr')].map(r => r.dataset.rank))",
    )
    assert per_card == [["EngineCore_DP0"], ["TP0", "TP1", "TP2", "TP3"]]
