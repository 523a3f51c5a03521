"""What a slider tick on a plan without a base document reuses from the ticks before it.

A tick of `/plan?model=…&util=…` is a new document each time, but the knob that moved reaches
little of it. Utilization is read in one place only: the engine's `gpu_memory_utilization`,
the budget the core's ledger multiplies the total by (vLLM's `requested_memory`,
vllm/v1/worker/gpu_worker.py); the model shape, the layout, the estimated rows (weights,
non-torch, CUDA graphs, activation: `app.core.estimates.EstimateContext` has no utilization)
and the notes do not read it. The prefill chunk (`max_num_batched_tokens`) does reach the
estimated activation rows. So the terms of a plan input are kept by the parts of the document
they read:

- ``doc``: the validated document without its two slider values, keyed by that part's
  canonical JSON;
- ``plan``: the plan input built from it, keyed by the same and the validated prefill chunk
  (the model, its estimated rows, layout, policy, notes), carrying its ranks' columns
  (`app.core.plan.with_columns`), so the ticks of one chunk share the columns and what they
  hold (each rank's JSON template, `app.core.report_ranks._templates`) instead of remaking
  them; a tick sets only the utilization, by the one defaults rule (`plan_inputs.engine_settings`).

Each key also pins the catalogue entries the document names (their config sha256) and the app's
version, so a changed catalogue or release is a new key, never a stale value. Each tick still
validates its engine section (the slider values, with the validator's bounds) and applies the
document's what-if. Anything unusual — a document with measured ranks, a log, a serve command,
a value that does not validate — takes the uncached path (`plan_inputs.plan_input`), so errors
are the uncached path's own. `tests/services/test_plan_terms.py` compares both paths over
random knob sequences.

Why this is allowed beside issue 11's rule (no module-level mutable caches of results): the
cache is an instance the web app holds (`PlanCache.terms`, one per app), bounded by entries and
by the ranks its plan inputs hold (`PureCache`), and every value is a pure function of its key.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping
from dataclasses import replace

from pydantic import ValidationError

from app import __version__
from app.core.errors import InputError
from app.core.plan import PlanInput, with_columns
from app.ingest.catalogue import find_model
from app.schemas import EngineDoc, PlanDocument, validate_plan
from app.services.plan_inputs import apply_whatif, build_base_plan, engine_settings, plan_input
from app.services.prepared import PureCache

#: The engine fields a slider tick moves: left out of the keys, validated on every tick.
SLIDERS = frozenset({"gpu_memory_utilization", "max_num_batched_tokens"})
#: Sections whose presence sends a document down the uncached path (measured rows, a log, a
#: command line that validation expands): their documents are large or not what a key can see.
UNCACHED = ("ranks", "from_log", "serve", "vllm_config")

Term = PlanDocument | PlanInput


class PlanTerms:
    """A bounded LRU of a plan input's terms, by the parts of the document each reads."""

    def __init__(self, capacity: int = 256, max_ranks: int = 65_536) -> None:
        self.cache: PureCache[Term] = PureCache(capacity, max_ranks)

    def plan_input(self, doc: object) -> PlanInput:
        """`plan_inputs.plan_input(doc)`, reusing the terms the document shares with earlier ones."""
        key = document_key(doc)
        if key is None or not isinstance(doc, Mapping):
            return plan_input(doc)
        try:
            validated = self._validated(doc, key)
        except (InputError, ValidationError):
            return plan_input(doc)  # raises the uncached path's error, naming the field
        made = self.cache.get_or_make(
            ("plan", key, validated.engine.max_num_batched_tokens),
            lambda: _with_columns(build_base_plan(validated)[0]), _plan_weight
        )
        assert isinstance(made, PlanInput)
        util = engine_settings(validated, made.engine.max_model_len)[0]
        return apply_whatif(validated.whatif, replace(made, engine=replace(made.engine, gpu_memory_utilization=util)))

    def _validated(self, doc: Mapping[str, object], key: Hashable) -> PlanDocument:
        """The validated document: its part without the sliders reused, its engine validated now."""
        rest = self.cache.get_or_make(("doc", key), lambda: validate_plan(without_sliders(doc)), _weight)
        assert isinstance(rest, PlanDocument)
        engine = doc.get("engine")
        if engine is None:
            return rest
        return rest.model_copy(update={"engine": EngineDoc.model_validate(engine)})

    def __len__(self) -> int:
        return len(self.cache)


def without_sliders(doc: Mapping[str, object]) -> dict[str, object]:
    engine = doc.get("engine")
    if not isinstance(engine, Mapping):
        return dict(doc)
    return {**doc, "engine": {k: v for k, v in engine.items() if k not in SLIDERS}}


def document_key(doc: object) -> tuple[str, str, tuple[str | None, ...]] | None:
    """The key of a document's slider-free part: the app's version, its canonical JSON and the
    sha256 of every catalogue config it names; None for a document the terms do not serve."""
    if not isinstance(doc, Mapping) or any(doc.get(name) is not None for name in UNCACHED):
        return None
    engine = doc.get("engine")
    if engine is not None and not isinstance(engine, Mapping):
        return None
    try:
        text = json.dumps(without_sliders(doc), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        return None
    return __version__, text, _catalogue_pins(doc)


def _catalogue_pins(doc: Mapping[str, object]) -> tuple[str | None, ...]:
    """The config sha256 of the model and of the draft model the document names in the catalogue."""
    engine = doc.get("engine")
    spec = engine.get("speculative") if isinstance(engine, Mapping) else None
    draft = spec.get("model") if isinstance(spec, Mapping) else None
    out = []
    for section in (doc.get("model"), draft):
        name = section.get("catalogue") if isinstance(section, Mapping) else None
        entry = find_model(name) if isinstance(name, str) else None
        out.append(entry.sha256 if entry is not None else None)
    return tuple(out)


def _weight(value: Term) -> int:
    return len(value.ranks or ()) + 1


#: Plans of up to this many ranks (a page that draws every rank, `charts.MAX_BARS`) keep their
#: ranks' columns with them, and so what the columns hold once ticked: each rank's JSON template.
COLUMNS_MAX_RANKS = 64
#: Measured with tracemalloc (llama-3.1-8b at TP8, estimated ranks): kept with its columns, a
#: 64-rank plan input holds 103 KiB where it held 26 KiB alone (8 ranks: 29 vs 19 KiB); it weighs
#: four times its ranks, so the bound on ranks bounds the bytes as it did before. Larger plans stay
#: as they were (no columns kept: 1,024 ranks hold 187 KiB either way).
COLUMNS_WEIGHT = 4


def _with_columns(plan: PlanInput) -> PlanInput:
    """The plan input carrying its ranks' columns (`app.core.plan.with_columns`), when it is small."""
    return with_columns(plan) if len(plan.ranks) <= COLUMNS_MAX_RANKS else plan


def _plan_weight(value: Term) -> int:
    ranks = len(value.ranks or ())
    held = COLUMNS_WEIGHT if isinstance(value, PlanInput) and value.columns is not None else 1
    return held * ranks + 1
