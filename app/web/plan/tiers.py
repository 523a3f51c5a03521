"""The plan page's KV tiers and prefix-retention card (issue 15 items 4, 6): presentation of the
result's `kv_tiers` and `prefix_pool` (computed in app.core.kv_tiers / app.core.prefix_pool)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.web.formatting import gib, intcomma, percent

_NAMES = {"gpu": "GPU (the block pool)", "cpu": "CPU (pinned host memory)", "disk": "Disk (LMCache local disk)"}


def tiers_card(result: Mapping[str, Any]) -> dict[str, Any]:
    """Rows of the tier table and the pool's running / retained split, with their explain entries."""
    explain = result.get("explain") or {}
    rows = []
    for tier in result.get("kv_tiers") or []:
        bandwidth = tier.get("bandwidth_bytes_per_s")
        rows.append({
            "name": _NAMES.get(tier["name"], tier["name"]), "key": tier["name"],
            "bytes": gib(tier["bytes"]), "per_rank": gib(tier["bytes_per_rank"]), "tokens": intcomma(tier["tokens"]),
            "link": "" if bandwidth is None else f"{bandwidth / 1e9:g} GB/s (assumed)",
            "explain": explain.get(f"kv_tiers.{tier['name']}.tokens"),
        })
    pool = result.get("prefix_pool") or {}
    share = pool.get("retention_share")
    return {
        "rows": rows,
        "prefix_on": bool(pool.get("enable_prefix_caching")),
        "share": "—" if share is None else percent(share, 1),
        "load_known": pool.get("running_blocks") is not None,  # no average live tokens: no planned load
        "running": intcomma(pool.get("running_blocks")),
        "retained": intcomma(pool.get("retained_blocks")),
        "usable": intcomma(pool.get("usable_blocks")),
        "explain": explain.get("prefix_pool.retained_blocks"),
        "env": result.get("kv_offload_env") or {},
    }
