"""``engine.speculative`` of a plan document → the core's SpecSpec (the draft resolved, vLLM's refusals)."""

from __future__ import annotations

from app.core.errors import InputError
from app.core.model_config import shape_from_config
from app.core.shape import ModelShape
from app.core.speculative import SpecSpec, check_speculative, stated_mtp_layers
from app.schemas import SpeculativeDoc
from app.services.memo import memoised


def _catalogue_draft(slug: str) -> tuple[ModelShape, str]:
    """A catalogue draft model's shape (parsed once per app, `app.services.memo`, keyed by its
    config's sha256) and its Hugging Face id."""
    from app.ingest.catalogue import get_model

    try:
        entry = get_model(slug)
    except KeyError as exc:
        raise InputError("engine.speculative.model.catalogue", str(exc.args[0]) if exc.args else "unknown") from None
    shape = memoised(("draft_shape", entry.slug, entry.sha256), lambda: shape_from_config(entry.config))
    return shape, entry.hf_id


def speculative_spec(doc: SpeculativeDoc | None, target: ModelShape | None) -> SpecSpec | None:
    """The spec, or None when the document has no ``engine.speculative``."""
    if doc is None:
        return None
    if doc.method is None:
        raise InputError("engine.speculative.method", "required: one of eagle, eagle3, mtp, draft_model, ngram")
    draft, name = None, None
    if doc.model is not None and doc.model.catalogue is not None:
        draft, name = _catalogue_draft(doc.model.catalogue)
    elif doc.model is not None and doc.model.config is not None:
        try:
            draft = shape_from_config(doc.model.config)
        except InputError as exc:
            raise InputError("engine.speculative.model.config", exc.message) from None
        raw = doc.model.config.get("_name_or_path")
        name = raw if isinstance(raw, str) and raw else None
    if doc.model is not None and doc.model.name:
        name = doc.model.name
    k = doc.num_speculative_tokens
    if k is None:
        if doc.method != "mtp" or target is None or not stated_mtp_layers(target):
            raise InputError("engine.speculative.num_speculative_tokens",
                             "required: vLLM takes it from the draft's n_predict for MTP only")  # fmt: skip
        k = stated_mtp_layers(target)  # SpeculativeConfig: num_speculative_tokens defaults to n_predict
    spec = SpecSpec(doc.method, k, draft, name)
    check_speculative(spec, target)
    return spec
