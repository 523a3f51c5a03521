"""The helper that turns a config's numbers into ``Tensor`` rows (weights_build, weights_mla)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.hfconfig import HFConfig
from app.core.mamba import DTYPE_BYTES
from app.core.weights_quant import QuantPlan
from app.core.weights_tensor import Tensor, Version

if TYPE_CHECKING:
    from app.core.shape import ModelShape


class Builder:
    def __init__(self, cfg: HFConfig, shape: ModelShape, quant: QuantPlan) -> None:
        self.cfg, self.shape, self.quant = cfg, shape, quant
        self.dtype_bytes = DTYPE_BYTES[shape.dtype]
        self.notes: list[str] = []

    def t(
        self, name: str, group: str, rows: int, cols: int, split: str, *, quant: str = "",
        versions: tuple[Version, Version] | None = None, dtype_bytes: int = 0, **kw: int,
    ) -> Tensor:  # fmt: skip
        """A tensor; ``quant`` = "linear"/"experts" makes it subject to the checkpoint's scheme."""
        scheme = self.quant.scheme_for(name, quant == "experts") if quant else None
        pad = self.quant.pad_expert_intermediate if quant == "experts" and scheme is not None else 1
        return Tensor(
            name.split(".", 3)[-1] if name.startswith("model.layers.") else name,
            group,
            rows,
            cols,
            split,
            scheme,
            dtype_bytes=dtype_bytes or self.dtype_bytes,
            pad=pad,
            kind=quant,
            versions=versions,
            **kw,
        )
