"""Imported evidence: a startup log or nvidia-smi output → the JSON the pages and the API show,
with residuals against the model, and one log run → a plan document of its measured ranks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core.errors import InputError
from app.core.gpus import find_preset
from app.schemas import validate_plan

JSON = dict[str, Any]


def import_log(text: str, model_config: Mapping[str, object] | None = None) -> JSON:
    """The parsed log (issue-3 JSON) plus, per run, residuals against the model when it is known."""
    from app.services.evidence import parse_log_text
    from app.services.log_residuals import add_residuals

    parsed = parse_log_text(text)
    add_residuals(parsed.get("runs", []), model_config)
    return parsed


def read_log(
    text: str, model_config: Mapping[str, object] | None = None, layout: Mapping[str, int] | None = None,
    model: Mapping[str, object] | None = None,
) -> tuple[JSON, list[tuple[JSON | None, str | None]]]:
    """The parsed log (`import_log`) and, per run, its plan document or why there is none
    (``layout``: the TP/PP given with the import, for a log that does not state them; ``model``:
    the model section chosen for every run, catalogue or config, ``model_config`` its config).
    Pure and picklable in and out: the web runs it in a child process (`web/isolation.py`).
    Runs that state the same thing on other lines share one document (`per_distinct_run`)."""
    from app.services.evidence import parse_log_text
    from app.services.imported_runs import per_distinct_run
    from app.services.log_residuals import add_residuals

    parsed = parse_log_text(text)  # = import_log(text, model_config), keeping the runs' grouping
    firsts = add_residuals(parsed.get("runs", []), model_config, layout)

    def plan_of(index: int) -> tuple[JSON | None, str | None]:
        try:
            return plan_from_log_run(parsed, index, model_config, layout, model), None
        except InputError as exc:
            return None, exc.message

    return parsed, per_distinct_run(parsed.get("runs") or [], plan_of, firsts)


def plan_from_log_run(
    parsed: Mapping[str, object],
    run_index: int = 0,
    model_config: Mapping[str, object] | None = None,
    layout: Mapping[str, int] | None = None,
    model: Mapping[str, object] | None = None,
) -> JSON:
    """A plan document with the measured ranks of one run of a parsed log (``layout``: the TP/PP
    given with the import when the log does not state them).

    Only that run is converted and validated: the cost is one run's, whatever the log's size
    (converting the whole parsed log for each run made an import quadratic in its runs).
    """
    from app.services.evidence import document_from_log, log_run
    from app.services.imported_runs import require_length, require_whole_ranks

    run = log_run(parsed, run_index)
    doc: JSON = {"from_log": {"runs": [_plain(run)]}, "log_run": 0}
    if layout:
        _check_layout(run, layout)
        doc["layout"] = dict(layout)
    if model is not None:
        named = (run.get("settings") or {}).get("model")
        doc["model"] = {**_plain(model), **({"name": named} if isinstance(named, str) and "name" not in model else {})}
    elif model_config is not None:
        doc["model"] = {"config": _plain(model_config)}
    out = document_from_log(validate_plan(doc), None).model_dump(mode="json", exclude_none=True)
    require_length(out)
    require_whole_ranks(out)
    return out


def _check_layout(run: Mapping[str, Any], layout: Mapping[str, int]) -> None:
    """InputError when a TP/PP given with the import cannot be this run's: the log states another,
    or its ranks' prefixes name higher indices (`Worker_TP3` → TP ≥ 4; app.ingest.vllm_log_layout).
    A plan of the log's ranks under a layout they cannot have shows them not starting."""
    stated: Mapping[str, Any] = run.get("layout") or {}
    for key in ("tp", "pp"):
        given, info = layout.get(key), stated.get(key)
        if given is None or not isinstance(info, Mapping):
            continue
        value, least, basis = info.get("value"), info.get("at_least"), info.get("basis") or "the log"
        name = key.upper()
        if isinstance(value, int) and value != given:
            raise InputError(key, f"this run states {name} {value} ({basis}); the {name} given with the import "
                                  f"({given}) is not this run's: leave it empty for a log that states its layout")
        if isinstance(least, int) and given < least:
            raise InputError(key, f"this run's {name} is at least {least} ({basis}); the {name} given with the "
                                  f"import ({given}) cannot hold those ranks")


def _plain(obj: Any) -> Any:
    """Plain JSON data (dicts and lists) from read-only mappings and tuples, e.g. catalogue configs."""
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def import_nvidia_smi(text: str, free_spread_threshold_bytes: int = 1024**3) -> JSON:
    """Parsed nvidia-smi output, with seed 000's alert when free memory differs across GPUs."""
    from dataclasses import asdict

    from app.ingest.nvidia_smi import parse_nvidia_smi, smi_free_spread_alert, smi_parse_to_json

    parsed = parse_nvidia_smi(text)
    out = smi_parse_to_json(parsed)
    alerts = smi_free_spread_alert(parsed.gpus, free_spread_threshold_bytes)
    findings = out.get("findings")
    presets = _smi_presets(out.get("gpus"))
    out["findings"] = [*(findings if isinstance(findings, list) else []), *(asdict(a) for a in alerts), *presets]
    return out


def _smi_presets(gpus: object) -> list[JSON]:
    """Map each card nvidia-smi names to its preset: vLLM budgets against torch's total, about
    0.45 GiB below nvidia-smi's memory.total (gpu-totals.md); each GPU gets `vllm_total_bytes`."""
    out: list[JSON] = []
    for g in gpus if isinstance(gpus, list) else []:
        preset = find_preset(str(g.get("name") or "")) if isinstance(g, dict) else None
        if preset is None or not isinstance(g.get("total_bytes"), int):
            continue
        g["preset"], g["vllm_total_bytes"] = preset.name, preset.total_bytes
        out.append({
            "code": "gpu_preset_total", "severity": "info", "line": g.get("line"),
            "message": f"GPU {g.get('index')} ({g['name']}): nvidia-smi total {g['total_bytes'] / 2**30:.2f} GiB; "
                       f"vLLM budgets against torch's total, {preset.total_bytes / 2**30:.2f} GiB for the "
                       f"{preset.name} preset ({preset.source})",
        })  # fmt: skip
    return out
