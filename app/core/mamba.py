"""Recurrent-state geometry of Mamba-1, Mamba-2 and gated-DeltaNet layers, as vLLM caches it.

vLLM keeps one fixed-size state per request and per layer (a conv state and an SSM/"temporal"
state), sharded over tensor parallelism. The shapes follow vLLM's
``vllm/model_executor/layers/mamba/mamba_utils.py`` ``MambaStateShapeCalculator``
(``mamba1_state_shape``, ``mamba2_state_shape`` with ``extra_groups_for_head_shards``,
``gated_delta_net_state_shape``; v0.10.2 … upstream 52a31ccec). Every TP split uses vLLM's
``divide`` (an assertion), so a TP degree that does not divide a sharded dimension is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.core.errors import InputError

StateKind = Literal["mamba1", "mamba2", "gdn"]

DTYPE_BYTES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}


@dataclass(frozen=True)
class StateGeometry:
    """Per-layer recurrent-state geometry of a Mamba-1 / Mamba-2 / gated-DeltaNet mixer (whole model, TP1).

    mamba1: d_inner, d_state, d_conv (dt_rank for the parameter count).
    mamba2: d_inner (= num_heads × head_dim), num_heads, head_dim, n_groups, d_state, d_conv.
    gdn: num_k_heads, num_v_heads, head_k_dim, head_v_dim, d_conv (linear_conv_kernel_dim).
    conv_dtype / ssm_dtype: the cache dtypes (model dtype unless mamba_ssm_cache_dtype says otherwise).
    """

    kind: StateKind
    d_conv: int
    conv_dtype: str
    ssm_dtype: str
    d_inner: int = 0
    d_state: int = 0
    dt_rank: int = 0
    num_heads: int = 0
    head_dim: int = 0
    n_groups: int = 0
    num_k_heads: int = 0
    num_v_heads: int = 0
    head_k_dim: int = 0
    head_v_dim: int = 0


def _divide(numerator: int, tp: int, what: str) -> int:
    if numerator % tp != 0:
        raise InputError("layout.tp", f"tp={tp} does not divide the {what} ({numerator}); vLLM's divide() refuses this")
    return numerator // tp


def _extra_groups_for_head_shards(n_groups: int, tp: int) -> int:
    # mamba_utils.extra_groups_for_head_shards: groups are replicated so each head shard has its group.
    if n_groups % tp == 0:
        return 0
    return tp - n_groups


def state_shapes(geom: StateGeometry, tp: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(conv_state_shape, ssm_state_shape) on one TP rank, as vLLM allocates them."""
    if geom.kind == "mamba1":
        d_inner = _divide(geom.d_inner, tp, "Mamba intermediate size")
        return (geom.d_conv - 1, d_inner), (d_inner, geom.d_state)
    if geom.kind == "mamba2":
        n_groups = geom.n_groups + _extra_groups_for_head_shards(geom.n_groups, tp)
        conv_dim = geom.d_inner + 2 * n_groups * geom.d_state
        conv = (geom.d_conv - 1, _divide(conv_dim, tp, "Mamba-2 conv dimension"))
        heads = _divide(geom.num_heads, tp, "Mamba-2 head count")
        return conv, (heads, geom.head_dim, geom.d_state)
    conv_dim = 2 * geom.num_k_heads * geom.head_k_dim + geom.num_v_heads * geom.head_v_dim
    conv = (geom.d_conv - 1, _divide(conv_dim, tp, "gated-DeltaNet conv dimension"))
    _divide(geom.num_k_heads, tp, "gated-DeltaNet key-head count")
    v_heads = _divide(geom.num_v_heads, tp, "gated-DeltaNet value-head count")
    return conv, (v_heads, geom.head_k_dim, geom.head_v_dim)


def state_bytes_per_layer(geom: StateGeometry, tp: int) -> int:
    """Bytes of one request's state in one layer on one TP rank (vLLM MambaSpec page, unpadded)."""
    conv, ssm = state_shapes(geom, tp)
    conv_n = 1
    for dim in conv:
        conv_n *= dim
    ssm_n = 1
    for dim in ssm:
        ssm_n *= dim
    return conv_n * DTYPE_BYTES[geom.conv_dtype] + ssm_n * DTYPE_BYTES[geom.ssm_dtype]


def mixer_params(geom: StateGeometry, hidden_size: int) -> int:
    """Parameters of one mixer layer (projections, conv, A/D/dt, inner norm), whole model."""
    if geom.kind == "mamba1":
        d = geom.d_inner
        return (
            hidden_size * 2 * d
            + d * geom.d_conv
            + d
            + d * (geom.dt_rank + 2 * geom.d_state)
            + geom.dt_rank * d
            + d
            + d * geom.d_state
            + d
            + d * hidden_size
        )
    if geom.kind == "mamba2":
        d = geom.d_inner
        conv_dim = d + 2 * geom.n_groups * geom.d_state
        in_proj = hidden_size * (2 * d + 2 * geom.n_groups * geom.d_state + geom.num_heads)
        return in_proj + conv_dim * geom.d_conv + conv_dim + 3 * geom.num_heads + d + d * hidden_size
    key_dim = geom.num_k_heads * geom.head_k_dim
    value_dim = geom.num_v_heads * geom.head_v_dim
    conv_dim = 2 * key_dim + value_dim
    in_proj = hidden_size * (2 * key_dim + 2 * value_dim + 2 * geom.num_v_heads)
    return in_proj + conv_dim * geom.d_conv + 2 * geom.num_v_heads + geom.head_v_dim + value_dim * hidden_size
