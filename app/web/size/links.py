"""The plan page's way into sizing: a plan that does not start, whose max_model_len does not fit,
or whose KV pool holds fewer requests at its avg_live_tokens than max_num_seqs admits, links to
/size with its model and target filled in (catalogue models only: the form names one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.web.querystring import page_url
from app.web.size.forms import query_for


def size_link(result: Mapping[str, Any]) -> dict[str, str] | None:
    source = str((result.get("model") or {}).get("source") or "")
    if not source.startswith("catalogue:"):
        return None
    model, mml = source.split(":", 1)[1], result["engine"]["max_model_len"]
    live = (result.get("policy") or {}).get("avg_live_tokens")
    if not result.get("will_start"):
        text = f"This plan does not start at max_model_len {mml:,}"
        return {"text": text, "url": page_url("/size", query_for(model, mml, None, None))}
    ceiling, seqs = result.get("concurrency_ceiling"), result.get("max_num_seqs")
    if live and isinstance(ceiling, int) and isinstance(seqs, int) and ceiling < seqs:
        text = (f"At {live:,} live tokens the KV pool holds {ceiling:,} requests, fewer than the {seqs:,} "
                "max_num_seqs admits")  # fmt: skip
        return {"text": text, "url": page_url("/size", query_for(model, mml, seqs, live))}
    return None
