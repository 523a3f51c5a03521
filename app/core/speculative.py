"""Speculative decoding: the draft's weights, its KV in the shared block pool, the lookahead slots.

Theory of operation (vLLM read at 28be48fa9, 2026-05-24):

- Weights. ``GPUModelRunner.load_model`` loads the drafter inside the same ``DeviceMemoryProfiler``
  as the target (vllm/v1/worker/gpu_model_runner.py), so "Model loading took" holds it. ``draft_model``
  loads a whole second model (``draft_tensor_parallel_size`` defaults to the target's TP);
  ``eagle`` / ``eagle3`` heads share the target's ``embed_tokens`` (``_maybe_share_embeddings``,
  vllm/v1/spec_decode/llm_base_proposer.py) and EAGLE-1 heads its ``lm_head`` too
  (``_maybe_share_lm_head``; EAGLE-3 keeps its own, draft-vocabulary head); ``mtp`` loads the
  checkpoint's next-token-prediction layers (``num_nextn_predict_layers`` / ``mtp_num_hidden_layers``,
  ``SpeculativeConfig.hf_config_override``, vllm/config/speculative.py) — each one decoder layer like
  the last, its ``eh_proj`` 2h → h and norms — and shares the target's embedding; ``ngram`` has no weights.
- KV. The drafter's attention layers register in the same static forward context, so
  ``get_kv_cache_spec`` (gpu_model_runner.py) gives them specs beside the target's and they land in the
  same KV-cache groups and block pool: one block costs the target's page plus the draft layers'
  (``UniformTypeKVCacheSpecs`` when the head geometry differs, vllm/v1/kv_cache_interface.py).
- Lookahead. ``Scheduler.__init__`` (vllm/v1/core/sched/scheduler.py) sets ``num_lookahead_tokens =
  num_speculative_tokens`` for EAGLE/MTP and draft models (0 for ngram); ``allocate_slots`` reserves
  them for every running request, so each request holds up to k more token slots.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Literal

from app.core.errors import InputError
from app.core.estimates import embedding_bytes
from app.core.kvrank import RankKV
from app.core.shape import ModelShape
from app.core.weights import weights_per_rank
from app.core.weights_tensor import Geometry, Version, tensor_bytes

Method = Literal["eagle", "eagle3", "mtp", "draft_model", "ngram"]
METHODS: tuple[str, ...] = ("eagle", "eagle3", "mtp", "draft_model", "ngram")
MAX_SPECULATIVE_TOKENS = 64  # the planner's stated range (vLLM: gt=0, no upper bound)


@dataclass(frozen=True)
class SpecSpec:
    """The plan's ``engine.speculative``: vLLM's ``--speculative-config``."""

    method: Method
    num_speculative_tokens: int
    draft: ModelShape | None = None  # eagle / eagle3 / draft_model: the draft's config
    draft_name: str | None = None  # what ``"model"`` names in the flag (HF id or path)

    @property
    def lookahead_tokens(self) -> int:
        """Slots each running request reserves (0 for ngram: neither ``use_eagle`` nor a draft model)."""
        return 0 if self.method == "ngram" else self.num_speculative_tokens


def stated_mtp_layers(shape: ModelShape) -> int:
    """Next-token-prediction layers the config (or the checkpoint's index) states (0 when none): the
    ``n_predict`` vLLM takes ``num_speculative_tokens`` from when the flag leaves it out."""
    return shape.weights.mtp_layers if shape.weights is not None else 0


def mtp_layers(shape: ModelShape) -> int:
    """Next-token-prediction layers an MTP draft of this checkpoint runs (0 when none). A Qwen3-Next
    config states none and still has one: ``SpeculativeConfig.hf_config_override`` turns every
    ``qwen3_next`` config into ``qwen3_next_mtp`` (vllm/config/speculative.py:555) and ``Qwen3NextMTP``
    builds ``getattr(config, "num_nextn_predict_layers", 1)`` layers
    (vllm/model_executor/models/qwen3_next_mtp.py:60, both @28be48fa9); the checkpoints ship them."""
    stated = stated_mtp_layers(shape)
    if stated == 0 and shape.model_type == "qwen3_next" and shape.weights is not None:
        return 1
    return stated


def check_speculative(spec: SpecSpec, target: ModelShape | None) -> None:
    """Refuse what vLLM's ``SpeculativeConfig`` refuses for this model, naming the field."""
    if not 1 <= spec.num_speculative_tokens <= MAX_SPECULATIVE_TOKENS:
        raise InputError(
            "engine.speculative.num_speculative_tokens",
            f"must be 1 … {MAX_SPECULATIVE_TOKENS} (vLLM: Field(gt=0)); got {spec.num_speculative_tokens}",
        )
    if spec.method in ("eagle", "eagle3", "draft_model") and spec.draft is None:
        raise InputError(
            "engine.speculative.model",
            f"method {spec.method} needs the draft's config (model.catalogue or model.config): vLLM says "
            "'num_speculative_tokens was provided but without speculative model.'",
        )
    if spec.method in ("mtp", "ngram") and spec.draft is not None:
        raise InputError("engine.speculative.model", f"method {spec.method} takes no draft model")
    if spec.method == "mtp" and (target is None or mtp_layers(target) == 0):
        raise InputError(
            "engine.speculative.method",
            "mtp needs MTP layers in the target's checkpoint, and this config has no num_nextn_predict_layers / "
            "mtp_num_hidden_layers (vLLM's SpeculativeConfig.hf_config_override makes an MTP draft only of "
            "checkpoints that carry them)",
        )
    draft = spec.draft
    # SpeculativeConfig.verify_equal_vocab_size_if_draft_model (vllm/config/speculative.py)
    same_vocab = draft is None or target is None or draft.vocab_size == target.vocab_size
    if spec.method == "draft_model" and not same_vocab:
        assert draft is not None and target is not None
        raise InputError(
            "engine.speculative.model",
            "Target and draft model should have the same vocabulary size. "
            f"Target model vocab_size={target.vocab_size}. Draft model vocab_size={draft.vocab_size}.",
        )


@functools.lru_cache(maxsize=256)
def draft_weight_bytes(
    target: ModelShape, spec: SpecSpec, tp: int, version: Version | None = None, max_num_batched_tokens: int = 0
) -> tuple[int, str]:
    """(the draft's weight bytes on one rank, how they were counted), by the rules of the plan's vLLM
    ``version`` (None: the newest) and its batched-token budget, as the target's weights are."""
    if spec.method == "ngram":
        return 0, "ngram: prompt lookup, no draft weights"
    if spec.method == "mtp":
        return _mtp_bytes(target, tp, version)
    draft = spec.draft
    assert draft is not None
    if draft.weights is not None:
        whole = weights_per_rank(draft, tp, vllm_version=version, max_num_batched_tokens=max_num_batched_tokens).nbytes
    else:
        whole = draft.weight_bytes // tp
    if spec.method == "draft_model":
        return whole, f"draft model at TP {tp} (its own embedding and LM head)"
    embed = embedding_bytes(draft) // tp
    shared = embed if spec.method == "eagle3" or draft.tie_word_embeddings else 2 * embed
    what = "embedding" if shared == embed else "embedding and LM head"
    # The fc that fuses the target's hidden states: ReplicatedLinear 2h → h (llama_eagle.py), 3h → h
    # (llama_eagle3.py; target_hidden_size when the config states it), whole on every rank.
    fc = (3 if spec.method == "eagle3" else 2) * draft.hidden_size * draft.hidden_size * _dtype_bytes(draft)
    note = f"{spec.method} head at TP {tp} + its fc (replicated), the target's {what} shared"
    return max(0, whole - shared) + fc, note


def _dtype_bytes(shape: ModelShape) -> int:
    return 4 if shape.dtype == "float32" else 2


def _mtp_bytes(target: ModelShape, tp: int, version: Version | None) -> tuple[int, str]:
    m = target.weights
    assert m is not None
    g = Geometry(tp=tp, version=version)
    last = m.tensors.layers[m.tensors.layer_index[-1]]
    layer = sum(tensor_bytes(t, g) for t in last)
    h, b = target.hidden_size, m.tensors.first[0].dtype_bytes
    head = (m.tensors.first[0].rows * h * b // tp) if m.mtp_embed_copies >= 2 else 0  # DeepSeek's shared_head
    n = mtp_layers(target)
    total = n * (layer + 2 * h * h * b + head)
    note = f"{n} MTP layer(s) like the last decoder layer + eh_proj 2h→h" + (" + its LM head ÷ TP" if head else "")
    return total, note + "; the target's embedding shared"


def draft_kv_bytes_per_token(target_rkv: RankKV, target: ModelShape | None, spec: SpecSpec, tp: int, dtype: str) -> int:
    """The draft's KV bytes per token on one rank (its attention layers in the shared pool)."""
    if spec.method == "ngram":
        return 0
    if spec.method == "mtp":
        assert target is not None
        per_layer = target_rkv.page_bytes_per_layer // target_rkv.block_size
        return mtp_layers(target) * per_layer
    from app.core.kvspec import kv_bytes_per_token_at

    assert spec.draft is not None
    return kv_bytes_per_token_at(spec.draft, tp=tp, kv_cache_dtype=dtype)


def with_draft_kv(rkv: RankKV, draft_bpt: int, draft_layers: int) -> RankKV:
    """The pool with the draft's layers in it: one block costs the target's page plus the draft's.

    Only for a single KV-cache group (full attention or MLA); hybrid pools are left as they are
    (the caller warns)."""
    if draft_bpt == 0 or rkv.is_hybrid or not rkv.groups:
        return rkv
    draft_page = draft_bpt * rkv.block_size
    page = rkv.page_bytes + draft_page
    group = replace(rkv.groups[0], num_layers=rkv.groups[0].num_layers + draft_layers)
    note = f"draft's KV: {draft_layers} layer(s), {draft_bpt:,} B per token, in the same block pool"
    if rkv.group_size > 1 and draft_page == draft_layers * rkv.page_bytes_per_layer:
        gs, per_layer = rkv.group_size + draft_layers, rkv.page_bytes_per_layer
    else:
        gs, per_layer = 1, page
    return replace(
        rkv, kv_bytes_per_token=rkv.kv_bytes_per_token + draft_bpt, page_bytes=page, groups=(group,),
        group_size=gs, page_bytes_per_layer=per_layer, layers_on_rank=rkv.layers_on_rank + draft_layers,
        notes=(*rkv.notes, note),
    )  # fmt: skip


def draft_layers(target: ModelShape | None, spec: SpecSpec) -> int:
    if spec.method == "ngram":
        return 0
    if spec.method == "mtp":
        return mtp_layers(target) if target is not None else 0
    return spec.draft.attention_layers if spec.draft is not None else 0
