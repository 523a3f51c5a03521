"""`RankKVMemo`: the model's KV geometry once per config content and layout across one import's
runs, with exactly what computing it afresh gives (values and errors), and the import of real
logs printed as later restarts (distinct runs, one model) equal to the run-by-run reference."""

from __future__ import annotations

import copy
from types import MappingProxyType
from typing import Any

import pytest

from app.core.errors import InputError
from app.core.kvspec import rank_kv
from app.core.model_config import shape_from_config
from app.ingest.catalogue import find_model, get_model
from app.services import imports
from app.services.rank_kv_memo import RankKVMemo
from tests.ingest.ingest_helpers import shifted
from tests.services.test_per_distinct_run import _all, slow_import_log


def test_values_are_what_rank_kv_gives() -> None:
    config = get_model("qwen3-30b-a3b").config_dict()
    memo = RankKVMemo()
    for tp, dtype, block in ((1, "auto", 16), (2, "fp8", 16), (4, "auto", 32)):
        expected = rank_kv(shape_from_config(config), tp=tp, pp=1, kv_cache_dtype=dtype, block_size=block)
        assert memo.rank_kv(config, tp, 1, dtype, block) == expected
        assert memo.rank_kv(config, tp, 1, dtype, block) is memo.rank_kv(config, tp, 1, dtype, block)


def test_keyed_by_content_not_by_object() -> None:
    config = get_model("qwen3-30b-a3b").config_dict()
    memo = RankKVMemo()
    first = memo.rank_kv(config, 1, 1, "auto", 16)
    assert memo.rank_kv(copy.deepcopy(config), 1, 1, "auto", 16) is first  # an equal config: a hit
    proxy = MappingProxyType({k: MappingProxyType(v) if isinstance(v, dict) else v for k, v in config.items()})
    assert memo.rank_kv(proxy, 1, 1, "auto", 16) is first  # a read-only form of the same content
    changed = {**config, "num_hidden_layers": int(config["num_hidden_layers"]) // 2}  # type: ignore[call-overload]
    other = memo.rank_kv(changed, 1, 1, "auto", 16)
    assert other == rank_kv(shape_from_config(changed), tp=1, pp=1, kv_cache_dtype="auto", block_size=16)
    assert other != first


def test_errors_are_raised_again_fresh() -> None:
    config = get_model("qwen3-30b-a3b").config_dict()
    with pytest.raises(InputError) as direct:
        rank_kv(shape_from_config(config), tp=3)
    memo = RankKVMemo()
    seen = []
    for _ in range(2):
        with pytest.raises(InputError) as raised:
            memo.rank_kv(config, 3, 1, "auto", 16)
        assert (raised.value.field, raised.value.message) == (direct.value.field, direct.value.message)
        seen.append(raised.value)
    assert seen[0] is not seen[1]


def test_restarts_of_one_log_import_as_run_by_run() -> None:
    text = "".join(shifted(_all(), k) for k in range(3))  # every run distinct (pids), models repeat
    fast = imports.import_log(text)
    assert fast == slow_import_log(text)
    named = [r for r in fast["runs"] if r.get("catalogue_model") and find_model(r["catalogue_model"])]
    assert len(named) >= 6  # catalogue models' runs, their residuals from the memo after the first copy
    config = get_model("qwen3-30b-a3b").config_dict()
    assert imports.import_log(text, config) == slow_import_log(text, config)


def test_a_config_without_canonical_json_is_computed_afresh() -> None:
    config: dict[Any, object] = dict(get_model("qwen3-30b-a3b").config_dict())
    config[1] = "a key JSON cannot sort with the others"
    memo = RankKVMemo()
    first = memo.rank_kv(config, 1, 1, "auto", 16)
    again = memo.rank_kv(config, 1, 1, "auto", 16)
    assert first == again and first is not again
    assert first == memo.rank_kv(get_model("qwen3-30b-a3b").config_dict(), 1, 1, "auto", 16)
