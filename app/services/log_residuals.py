"""Residuals of every run of a parsed log (`services.plans.import_log`), once per distinct run.

Per run: the catalogue model the log names (without a given model), blocks and tokens recomputed
from the parsed KV bytes against the logged figures (`evidence.residuals`), the implied KV bytes
per token and their findings. Runs that state the same figures on other lines
(`imported_runs.run_key`) share one result: none of it reads a line number.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import InputError
from app.services.evidence import bytes_per_token_from_run, catalogue_config_for, residuals
from app.services.imported_runs import distinct_runs, per_distinct_run
from app.services.rank_kv_memo import RankKVMemo

JSON = dict[str, Any]


def _run_residuals(run: Mapping[str, Any], model_config: Mapping[str, object] | None, memo: RankKVMemo,
                   layout: Mapping[str, int] | None = None) -> JSON:
    """What `add_residuals` adds to one run: residuals against the model (given, or the catalogue
    entry the log names), the implied KV bytes per token and the findings of both."""
    extra: JSON = {}
    config = model_config
    if config is None:
        found = catalogue_config_for((run.get("settings") or {}).get("model"))
        config = found[1] if found else None
        extra["catalogue_model"] = found[0] if found else None
    findings: list[JSON] = []
    try:
        res = residuals(run, config, memo=memo, layout=layout)
    except InputError as exc:
        res = {"ranks": [], "engine": None, "findings": []}
        findings.append({"code": "model_mismatch", "message": str(exc), "line": None})
    extra["residuals"] = res
    extra["implied_kv_bytes_per_token"] = bytes_per_token_from_run(run)
    return {"set": extra, "findings": [*findings, *res["findings"]]}


def add_residuals(runs: list[JSON], model_config: Mapping[str, object] | None,
                  layout: Mapping[str, int] | None = None) -> list[int]:
    """Per run of a parsed log, in place: `catalogue_model` (without a given model), `residuals`,
    `implied_kv_bytes_per_token` and their findings (`services.plans.import_log`); once per
    distinct run, the result shared by the runs that state the same. Returns that grouping
    (`distinct_runs`). `layout`: the TP/PP given with the import, for runs that do not state them."""
    firsts = distinct_runs(runs)
    memo = RankKVMemo()  # the model's KV geometry, once per config and layout of this log's runs
    extras = per_distinct_run(runs, lambda i: _run_residuals(runs[i], model_config, memo, layout), firsts)
    for run, extra in zip(runs, extras, strict=True):
        run.update(extra["set"])
        run.setdefault("findings", []).extend(extra["findings"])
    return firsts
