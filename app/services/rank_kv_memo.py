"""The tight rank's KV geometry of a model config, reused across the runs of one imported log.

`evidence.residuals` recomputes blocks from each run's KV bytes on the model's tight rank
(`core.kvspec.rank_kv` of `core.model_config.shape_from_config`). A long log restarts one model
many times, each run distinct by its pids (`imported_runs.run_key` keeps them), and the shape and
its rank cost ≈ 5 ms a run: ≈ 20 % of a 15 MB import of 3,267 restarts under cProfile.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from app.core.errors import InputError
from app.core.kvspec import RankKV, rank_kv
from app.core.mla_rules import full_kv_shape
from app.core.model_config import shape_from_config


class RankKVMemo:
    """The tight rank's KV geometry per (model config content, TP, PP, KV dtype, block size), for
    one caller's many runs (`log_residuals.add_residuals`: one import's runs): a long log restarts
    one model many times, each run distinct by its pids, and the shape and its rank cost
    ≈ 5 ms each time (≈ 20 % of a 15 MB import of 3,267 restarts). Owned by its caller and
    dropped with it, never module-level (tests/test_no_result_caches.py); a pure function of its
    key: the config's content (its canonical JSON), not the object, so an equal config given
    again is a hit and a changed one a miss (each config object's key is computed once: the
    configs must not change while the memo lives, as in one import). An InputError (a layout
    the model cannot take) is kept and raised again, as a fresh error, for the runs that ask."""

    def __init__(self) -> None:
        self._content: dict[int, tuple[Mapping[str, object], str]] = {}  # id → (config kept alive, key)
        self._values: dict[tuple[object, ...], RankKV | InputError] = {}

    def _key(self, config: Mapping[str, object]) -> str | None:
        """The config's canonical JSON, or None when it has none (a key that is not a string, a
        value JSON cannot hold): that config is computed afresh on every call."""
        held = self._content.get(id(config))
        if held is not None and held[0] is config:
            return held[1]
        try:
            key = json.dumps(config, sort_keys=True, separators=(",", ":"), default=_plain_json)
        except (TypeError, ValueError):
            return None
        self._content[id(config)] = (config, key)
        return key

    def rank_kv(self, config: Mapping[str, object], tp: int, pp: int, kv_cache_dtype: str, block_size: int,
                full_kv: bool = False) -> RankKV:
        """``full_kv``: an MLA model as a vLLM that does not use MLA caches it (app.core.mla_rules)."""
        content = self._key(config)
        key = (content, tp, pp, kv_cache_dtype, block_size, full_kv)
        value = self._values.get(key) if content is not None else None
        if value is None:
            value = _rank_kv_or_error(config, tp, pp, kv_cache_dtype, block_size, full_kv)
            if content is not None:
                self._values[key] = value
        if isinstance(value, InputError):
            raise InputError(value.field, value.message)
        return value


def _plain_json(value: object) -> object:
    """JSON for the read-only mappings and tuples of a catalogue config (a MappingProxyType)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON: {type(value).__name__}")


def _rank_kv_or_error(config: Mapping[str, object], tp: int, pp: int, kv_cache_dtype: str,
                      block_size: int, full_kv: bool = False) -> RankKV | InputError:
    try:
        shape = shape_from_config(config)
        shape = full_kv_shape(shape) if full_kv else shape
        return rank_kv(shape, tp=tp, pp=pp, kv_cache_dtype=kv_cache_dtype, block_size=block_size)
    except InputError as exc:
        return exc
