"""Shared helpers for the ingest tests: fixture paths and JSON navigation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent.parent / "data"
LOGS = DATA / "vllm-logs"
EXTRA = LOGS / "extra"
SMI = DATA / "nvidia-smi"


def read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def parsed(text: str) -> dict[str, Any]:
    from app.ingest.vllm_log import log_parse_to_json, parse_vllm_log

    return log_parse_to_json(parse_vllm_log(text))


def runs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = doc["runs"]
    return out


def rank(run: dict[str, Any], label: str) -> dict[str, Any]:
    for r in run["ranks"]:
        if r["rank"] == label:
            out: dict[str, Any] = r
            return out
    raise AssertionError(f"no rank {label!r} in {[r['rank'] for r in run['ranks']]}")


def codes(run: dict[str, Any]) -> list[str]:
    return [f["code"] for f in run["findings"]]
