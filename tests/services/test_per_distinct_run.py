"""Runs that state the same thing cost their residuals and their plan once per import
(`imported_runs.per_distinct_run`): the result must be exactly what computing every run on its
own gives. The reference below is the per-run loop `plans.import_log` / `imports.read_log` ran
before (every run converted and planned), on every real log, their concatenation and with a
chosen model and layout."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import InputError
from app.ingest.catalogue import get_model
from app.services import imports
from app.services.evidence import bytes_per_token_from_run, catalogue_config_for, parse_log_text, residuals
from app.services.imported_runs import run_key

LOGS = Path(__file__).resolve().parents[1] / "data" / "vllm-logs"
ALL_LOGS = sorted(LOGS.rglob("*.log"))


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def slow_import_log(text: str, model_config: Mapping[str, object] | None = None,
                    layout: Mapping[str, int] | None = None) -> dict[str, Any]:
    parsed = parse_log_text(text)
    for run in parsed.get("runs", []):
        settings = run.get("settings") or {}
        config = model_config
        if config is None:
            found = catalogue_config_for(settings.get("model"))
            config = found[1] if found else None
            run["catalogue_model"] = found[0] if found else None
        try:
            res = residuals(run, config, layout=layout)  # the TP/PP the import gives, as read_log
        except InputError as exc:
            res = {"ranks": [], "engine": None, "findings": []}
            run.setdefault("findings", []).append({"code": "model_mismatch", "message": str(exc), "line": None})
        run["residuals"] = res
        run["implied_kv_bytes_per_token"] = bytes_per_token_from_run(run)
        run.setdefault("findings", []).extend(res["findings"])
    return parsed


def slow_read_log(text: str, model_config: Mapping[str, object] | None = None,
                  layout: Mapping[str, int] | None = None, model: Mapping[str, object] | None = None) -> Any:
    parsed = slow_import_log(text, model_config, layout)
    docs: list[tuple[Any, str | None]] = []
    for index in range(len(parsed.get("runs") or [])):
        try:
            docs.append((imports.plan_from_log_run(parsed, index, model_config, layout, model), None))
        except InputError as exc:
            docs.append((None, exc.message))
    return parsed, docs


def _all() -> str:
    return "".join(t if t.endswith("\n") else t + "\n" for t in map(_read, ALL_LOGS))


@pytest.mark.parametrize("path", ALL_LOGS, ids=lambda p: str(p.relative_to(LOGS)))
def test_each_real_log_reads_as_run_by_run(path: Path) -> None:
    assert imports.read_log(_read(path)) == slow_read_log(_read(path))


def test_real_logs_concatenated_twice_read_as_run_by_run() -> None:
    text = _all() * 2
    fast = imports.read_log(text)
    assert fast == slow_read_log(text)
    keys = [run_key(r) for r in fast[0]["runs"]]
    assert len(set(keys)) < len(keys)  # the second copy's runs were found the same as the first's


def test_with_a_chosen_model_and_layout() -> None:
    config = get_model("qwen3-30b-a3b").config_dict()
    model = {"catalogue": "qwen3-30b-a3b"}
    text = _all()
    assert imports.read_log(text, config, {"tp": 2}, model) == slow_read_log(text, config, {"tp": 2}, model)


def test_line_numbers_are_all_that_the_key_leaves_out() -> None:
    run = {"lines": [3, 9], "ranks": [{"first_line": 3, "evidence": {"kv_bytes": {"line": 7, "printed": "1 GiB"}}}],
           "findings": [{"message": "rank 0 (line 7) and line 8", "line": 7}], "version": {"stated_line": None},
           "settings": {"pipeline_parallel_size": 2, "non_default_args": {"baseline": 4}}}
    moved = {"lines": [13, 19],
             "ranks": [{"first_line": 13, "evidence": {"kv_bytes": {"line": 17, "printed": "1 GiB"}}}],
             "findings": [{"message": "rank 0 (line 17) and line 18", "line": 17}], "version": {"stated_line": 5},
             "settings": {"pipeline_parallel_size": 2, "non_default_args": {"baseline": 4}}}
    assert run_key(run) == run_key(moved)
    for other in ({**run, "settings": {"pipeline_parallel_size": 4, "non_default_args": {"baseline": 4}}},
                  {**run, "settings": {"pipeline_parallel_size": 2, "non_default_args": {"baseline": 5}}},
                  {**run, "findings": [{"message": "rank 1 (line 7) and line 8", "line": 7}]}):
        assert run_key(other) != run_key(run)
    assert run_key({"x": 2**70}) is None  # past orjson's 64 bits: computed on its own
