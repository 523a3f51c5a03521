"""What a free-memory gap between ranks does to this plan (issue 17, item 20).

vLLM ≥ 0.9.1 (vllm/v1/worker/gpu_worker.py `determine_available_memory` after 2d8476e46,
2025-06-07; VLLM-NOTES §1) budgets each rank at total × gpu_memory_utilization less its own
rows, and refuses to start where free memory at start is below that requested budget: a gap
between ranks changes nothing while every rank's free memory covers the request. A manual
--kv-cache-memory-bytes must fit each rank's free memory (rows + KV). Before 0.9.1 the profile
counted memory other processes hold as this instance's non-torch memory
(`total × util − (torch_peak + non_torch)`, v0.7.0–v0.9.0), so the gap comes out of the low
rank's KV. The message says which holds, in the terms of the ledger beside it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from app.core.ledger import RankLedger
from app.core.units import fmt_bytes


def free_gap_message(
    ledgers: Sequence[RankLedger], preflight: bool, util: float, manual: int | None, version: str
) -> tuple[str, str] | None:
    """The free_memory_spread warning's text and the rank with the least free memory (None when
    fewer than two ranks state free memory)."""
    frees = [(lg, lg.inp.free_at_start.bytes) for lg in ledgers if lg.inp.free_at_start is not None]
    if len(frees) < 2:
        return None
    low, high = min(frees, key=lambda f: f[1]), max(frees, key=lambda f: f[1])
    head = (f"free memory at start differs across ranks by {fmt_bytes(high[1] - low[1])} (rank {low[0].label}: "
            f"{fmt_bytes(low[1])}, rank {high[0].label}: {fmt_bytes(high[1])})")
    if manual is not None:
        return (f"{head}; with --kv-cache-memory-bytes {manual} every rank must hold its rows and that KV in its own "
                f"free memory, so rank {low[0].label} is the one to check"), low[0].label
    if not preflight:
        rows = low[0].inp.non_torch
        where = ("its measured non-torch row includes it" if rows is not None and rows.source == "measured"
                 else "the estimated rows here do not include it, so that rank's KV is up to the gap too high")
        return (f"{head}; vLLM {version} counts memory other processes hold as its own non-torch memory, so the "
                f"gap comes out of rank {low[0].label}'s KV budget ({where}) — look for another process on it"), \
            low[0].label
    short = [lg for lg, free in frees if lg.requested_bytes is not None and free < lg.requested_bytes]
    if short:
        who = f"rank {short[0].label} has" if len(short) == 1 else f"ranks {', '.join(lg.label for lg in short)} have"
        total = low[0].inp.total
        fit = math.floor(low[1] / total.bytes * 100) / 100 if total is not None and total.bytes > 0 else None
        lower = f"lower the utilization to {fit} or less" if fit else "lower the utilization"
        return (f"{head}; vLLM asks each rank for total × {util}, and {who} less free than that: vLLM will not "
                f"start there (free_below_requested) — free memory on it or {lower}"), low[0].label
    spare = low[1] - (low[0].requested_bytes or 0)
    return (f"{head}; it does not change this plan: vLLM {version} sizes every rank's KV from total × {util}, "
            f"and every rank has that free (rank {low[0].label} has {fmt_bytes(spare)} to spare)"), low[0].label
