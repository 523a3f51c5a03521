"""Shared helpers for the ingest tests: fixture paths and JSON navigation."""

from __future__ import annotations

import datetime
import re
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


_HEADER_TIME = re.compile(r"\b(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)\b")
_PID = re.compile(r"pid=(\d{1,10})")


def shifted(text: str, k: int) -> str:
    """`text` as the k-th restart of a long log would print it: every `MM-DD HH:MM:SS` header time
    2k hours later (a leap year, so 02-29 is a date) and every `pid=N` as N + 7919k. Repeating a
    log this way defeats any cache keyed on a line's text, as a real log of many restarts does."""

    def later(m: re.Match[str]) -> str:
        try:
            mo, d, h, mi, sec = (int(g) for g in m.groups())
            t = datetime.datetime(2024, mo, d, h, mi, sec)
        except ValueError:  # not a date: left as printed
            return m[0]
        return (t + datetime.timedelta(hours=2 * k)).strftime("%m-%d %H:%M:%S")

    return _PID.sub(lambda m: f"pid={int(m[1]) + 7919 * k}", _HEADER_TIME.sub(later, text))


_SECONDS = re.compile(r"\b(\d{1,9})(?:\.(\d{1,9}))?( ?(?:seconds|secs|sec|s)\b)")


def retimed(text: str, k: int) -> str:
    """`shifted(text, k)` with every duration in seconds (`took 12.3 seconds`, `in 20 secs`, `1.39s/it`)
    also k units of its last printed digit longer: a restart that took other times, as real ones do,
    so its timing lines are new messages, not only new pids and header times."""

    def longer(m: re.Match[str]) -> str:
        decimals = m[2] or ""
        value = int(m[1] + decimals) + k
        digits = str(value).rjust(len(decimals) + 1, "0")
        whole, frac = (digits[: -len(decimals)], digits[-len(decimals):]) if decimals else (digits, "")
        return whole + ("." + frac if decimals else "") + m[3]

    return _SECONDS.sub(longer, shifted(text, k))
