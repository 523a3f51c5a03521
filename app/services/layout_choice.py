"""The layout a model opens at: the smallest that starts on the chosen GPU (issue 17, item 5).

A plan that names no layout (a catalogue click: `/plan?model=llama-3.1-70b`) would open at TP1,
which for a 70B model on an 80 GB card "won't start" with every lever "0 gained". Instead the
page opens at the fewest GPUs that start — TP first (one node, the degrees the model allows, up
to 8), then pipeline stages of a full node (TP8 × PP2, × PP4, …) — and says that it chose it.
A URL that gives its TP but no PP keeps that TP and opens at the smallest PP (1, 2, 4, … 16) that
starts at it (`smallest_starting_pp`); one that gives its PP but no TP keeps that PP and opens at
the smallest TP vLLM accepts for the model at that PP, up to one node, that starts at it
(`smallest_starting_tp`); each says so. "Starts" is vLLM's start-up rule as the plan computes it:
every rank has KV memory and one max_model_len request fits (`will_start` of the result).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from app.core.errors import InputError
from app.core.plan import compute
from app.core.report import result_to_dict
from app.schemas import validate_plan
from app.services import plan_inputs, plans

MAX_TP = 8  # one node: TP past it crosses the node's NVLink domain
MAX_PP = 16


@dataclass(frozen=True)
class LayoutChoice:
    tp: int
    pp: int
    starts: bool
    tried: tuple[str, ...]  # the smaller layouts that do not start, as "TP1", "TP8 × PP2"
    gpu: str
    #: The settings the layouts were tried with (the document's, vLLM's defaults filled in), as
    #: "max_model_len 131,072, gpu_memory_utilization 0.92, bfloat16 weights, auto KV cache".
    settings: str = ""
    #: The degree the URL gives, the other one chosen at it: "tp" (`smallest_starting_pp`), "pp"
    #: (`smallest_starting_tp`); "" when both were chosen (`smallest_starting_layout`).
    given: Literal["", "tp", "pp"] = ""

    @property
    def note(self) -> str:
        layout = _label(self.tp, self.pp)
        at = f" at {self.settings}" if self.settings else ""
        does = "does" if len(self.tried) == 1 else "do"
        if self.given:
            return self._note_at_given(layout, at, does)
        if not self.starts:
            return (f"no layout up to {layout} starts on {self.gpu}{at}: opened at TP1; a larger card, fp8 weights "
                    "or fp8 KV, or a shorter max_model_len is needed")
        return (f"opened at {layout}: the smallest layout that starts on {self.gpu}{at} "
                f"({', '.join(self.tried)} {does} not); set TP/PP to change it")

    def _note_at_given(self, layout: str, at: str, does: str) -> str:
        given, value = ("TP", self.tp) if self.given == "tp" else ("PP", self.pp)
        chosen = "PP" if self.given == "tp" else "TP"
        url = f"the URL's {given}{value} on {self.gpu}{at}"
        if not self.starts:
            opened = f"TP{self.tp}" if self.given == "tp" else _label(1, self.pp)
            return (f"no {chosen} up to {layout} starts at {url}: opened at {opened}; a larger {given} or card, "
                    "fp8 weights or fp8 KV, or a shorter max_model_len is needed")
        return (f"opened at {layout}: the smallest {chosen} that starts at {url} "
                f"({', '.join(self.tried)} {does} not); set {chosen} to change it")


def _label(tp: int, pp: int) -> str:
    return f"TP{tp}" if pp == 1 else f"TP{tp} × PP{pp}"


def _pp_ladder() -> list[int]:
    """The PP degrees tried above 1: 2, 4, … MAX_PP."""
    out, pp = [], 2
    while pp <= MAX_PP:
        out.append(pp)
        pp *= 2
    return out


def _top_tp(allowed: Sequence[int]) -> int:
    """The largest TP degree tried: the model's largest up to one node (1 when it allows none)."""
    return max((tp for tp in allowed if tp <= MAX_TP), default=1)


def _candidates(doc: Mapping[str, Any]) -> list[tuple[int, int]]:
    """Layouts by GPU count: the model's TP degrees up to one node, then full nodes stacked by PP."""
    allowed = plans.allowed_tp(doc)
    out = [(tp, 1) for tp in allowed if tp <= MAX_TP]
    return out + [(_top_tp(allowed), pp) for pp in _pp_ladder()]


def _at(doc: Mapping[str, Any], tp: int, pp: int) -> dict[str, Any]:
    return {**doc, "layout": {**(doc.get("layout") or {}), "tp": tp, "pp": pp}}


def _result(doc: Mapping[str, Any]) -> dict[str, Any]:
    return result_to_dict(compute(plan_inputs.build_plan(validate_plan(doc))), [])


def _starts(doc: Mapping[str, Any]) -> bool:
    return bool(_result(doc)["will_start"])


def _settings(result: Mapping[str, Any]) -> str:
    """The settings a plan's result was computed with that decide whether a layout starts."""
    engine, model = result.get("engine") or {}, result.get("model") or {}
    parts = []
    if engine.get("max_model_len") is not None:
        parts.append(f"max_model_len {engine['max_model_len']:,}")
    if engine.get("kv_cache_memory_bytes") is not None:
        parts.append(f"kv_cache_memory_bytes {engine['kv_cache_memory_bytes']:,}")
    elif engine.get("gpu_memory_utilization") is not None:
        parts.append(f"gpu_memory_utilization {engine['gpu_memory_utilization']}")
    weights = engine.get("quantization") or model.get("quantization") or model.get("dtype")
    if weights:
        parts.append(f"{weights} weights")
    if engine.get("kv_cache_dtype"):
        parts.append(f"{engine['kv_cache_dtype']} KV cache")
    return ", ".join(parts)


def _gpu_name(doc: Mapping[str, Any]) -> str:
    gpu = doc.get("gpu")
    if not isinstance(gpu, Mapping):
        return "this GPU"
    name, total = gpu.get("name"), gpu.get("total")
    return str(name) if name else f"a GPU of {total}"


def smallest_starting_layout(doc: Mapping[str, Any]) -> LayoutChoice | None:
    """The smallest layout at which the document's plan starts, when TP1 does not; None when TP1
    starts (nothing to choose) or the document cannot be planned (its own error shows instead)."""
    try:
        first = _result(doc)
        if first["will_start"]:
            return None
        candidates = _candidates(doc)
    except InputError:
        return None
    settings = _settings(first)
    tried: list[str] = ["TP1"]
    for tp, pp in candidates:
        if (tp, pp) == (1, 1):
            continue
        try:
            if _starts(_at(doc, tp, pp)):
                return LayoutChoice(tp, pp, True, tuple(tried), _gpu_name(doc), settings)
        except InputError:
            pass
        tried.append(_label(tp, pp))
    last = candidates[-1] if candidates else (1, 1)
    return LayoutChoice(last[0], last[1], False, tuple(tried), _gpu_name(doc), settings)


def smallest_starting_pp(doc: Mapping[str, Any], tp: int) -> LayoutChoice | None:
    """At the TP a URL gives without a PP: the smallest PP (2, 4, … MAX_PP) at which the document's
    plan starts, when PP1 does not; None when PP1 starts or the document cannot be planned at `tp`.
    When none starts, the choice says so (`starts` False) and the plan stays at PP1."""
    try:
        first = _result(_at(doc, tp, 1))
    except InputError:
        return None
    if first["will_start"]:
        return None
    settings, tried = _settings(first), [_label(tp, 1)]
    for pp in _pp_ladder():
        try:
            if _starts(_at(doc, tp, pp)):
                return LayoutChoice(tp, pp, True, tuple(tried), _gpu_name(doc), settings, given="tp")
        except InputError:
            pass
        tried.append(_label(tp, pp))
    return LayoutChoice(tp, MAX_PP, False, tuple(tried), _gpu_name(doc), settings, given="tp")


def smallest_starting_tp(doc: Mapping[str, Any], pp: int) -> LayoutChoice | None:
    """At the PP a URL gives without a TP: the smallest TP at which the document's plan starts, of
    the degrees vLLM accepts for the model at that PP (`plans.allowed_tp`) up to one node, when TP1
    does not; None when TP1 starts or the document cannot be planned at `pp`. When none starts, the
    choice says so (`starts` False) and the plan stays at TP1."""
    try:
        first = _result(_at(doc, 1, pp))
        if first["will_start"]:
            return None
        tps = [tp for tp in plans.allowed_tp(_at(doc, 1, pp)) if 1 < tp <= MAX_TP]
    except InputError:
        return None
    settings, tried = _settings(first), [_label(1, pp)]
    for tp in tps:
        try:
            if _starts(_at(doc, tp, pp)):
                return LayoutChoice(tp, pp, True, tuple(tried), _gpu_name(doc), settings, given="pp")
        except InputError:
            pass
        tried.append(_label(tp, pp))
    return LayoutChoice(max(tps, default=1), pp, False, tuple(tried), _gpu_name(doc), settings, given="pp")
