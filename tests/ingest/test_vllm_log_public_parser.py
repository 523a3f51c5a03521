"""Importer defects found on the public vLLM logs (tests/data/vllm-logs/public/), as golden tests
on the real files; the expected numbers are the ones index.json states for each file.

- caret-notation ANSI colour codes around the process prefix (`^[[0;36m(EngineCore_DP0 …)^[[0;0m`,
  as pasted into an issue) are stripped like real escapes, so the rank is identified: file 42.
"""

from __future__ import annotations

from typing import Any

from .ingest_helpers import LOGS, parsed, rank, read, runs

GIB = 2**30
PUBLIC = LOGS / "public"


def _doc(prefix: str) -> dict[str, Any]:
    (path,) = PUBLIC.glob(f"{prefix}-*.log")
    return parsed(read(path))


def test_caret_notation_ansi_prefix_names_the_engine_core_rank() -> None:
    doc = _doc("42")
    (run,) = runs(doc)
    assert [r["rank"] for r in run["ranks"]] == ["EngineCore_DP0"]
    r = rank(run, "EngineCore_DP0")
    assert r["pid"] == 70073
    assert abs(r["weights_bytes"] - 64.38 * GIB) <= 0.005 * GIB  # 'Model loading took 64.38 GiB'
    assert r["weights_load_seconds"] == 14.380607


def test_caret_and_real_escape_codes_parse_alike() -> None:
    text = read(next(PUBLIC.glob("42-*.log")))
    assert parsed(text.replace("^[", "\x1b"))["runs"] == parsed(text)["runs"]
