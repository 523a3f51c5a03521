"""Encoder cache (issue 15 item 3), and every issue-15 explain entry as an identity."""

from __future__ import annotations

import ast
import math
import operator
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.core.encoder_cache import encoder_cache_terms
from app.core.vision import vision_geometry
from app.ingest.catalogue import get_model
from app.services.plans import run_plan

VL = "qwen3-vl-30b-a3b-instruct"
GPU = {"name": "H100 80GB"}


def vl_plan(**engine: Any) -> dict[str, Any]:
    return run_plan({"model": {"catalogue": VL}, "gpu": GPU, "engine": {"max_model_len": 32768, **engine}},
                    with_levers=False)  # fmt: skip


def test_budget_is_vllms_max_of_the_chunk_and_one_item() -> None:
    # compute_mm_encoder_budget: max(max_num_batched_tokens, max tokens per item), both for compute and cache;
    # the profile runs budget // tokens_per_item items (MultiModalBudget._get_max_items), at least one.
    geo = vision_geometry(get_model(VL).config)
    assert geo is not None and geo.tokens_per_item == 16384
    for mnbt, items in ((2048, 1), (16384, 1), (40000, 2), (65536, 4)):
        terms = encoder_cache_terms(geo, mnbt, 1, 2, (0, 27, 1))
        assert terms is not None
        assert terms.cache_size_tokens == terms.compute_budget_tokens == max(mnbt, 16384)
        assert terms.items_profiled == items
        assert terms.cache_bytes == items * 16384 * terms.per_token_bytes
    assert encoder_cache_terms(geo, 8192, 1, 2, (0, 7, 3)) is None  # V0 (default before 0.8): no encoder cache


def test_the_cache_is_part_of_the_activation_peak_and_moves_with_the_chunk() -> None:
    small, big = vl_plan(max_num_batched_tokens=16384), vl_plan(max_num_batched_tokens=65536)
    for out in (small, big):
        cache = out["encoder_cache"]
        assert cache["in_row"] == "activation"
        assert cache["encoder_peak_bytes"] <= out["ranks"][0]["activation_bytes"]
    assert big["encoder_cache"]["cache_bytes"] == 4 * small["encoder_cache"]["cache_bytes"]
    assert run_plan({"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU}, with_levers=False)["encoder_cache"] is None


@settings(max_examples=25, deadline=None)
@given(st.integers(256, 200_000))
def test_a_larger_chunk_never_shrinks_the_encoder_cache(mnbt: int) -> None:
    geo = vision_geometry(get_model(VL).config)
    assert geo is not None
    a, b = encoder_cache_terms(geo, mnbt, 1, 2, (0, 27, 1)), encoder_cache_terms(geo, mnbt + 4096, 1, 2, (0, 27, 1))
    assert a is not None and b is not None and b.cache_bytes >= a.cache_bytes


_UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}
_NUM = re.compile(r"(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?:\s(GiB|MiB|KiB|B)\b)?")
_OPS: dict[type, Any] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                         ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv}  # fmt: skip


def _value(text: str) -> tuple[float, float]:
    """Evaluate an explain expression (× − + // /, numbers with units) → (value, rounding tolerance)."""
    tol = 0.0

    def number(m: re.Match[str]) -> str:
        nonlocal tol
        digits, unit = m[1].replace(",", ""), m[2]
        if unit is None:
            return digits
        tol += 0.5 * 10 ** -(len(digits.split(".")[1]) if "." in digits else 0) * _UNITS[unit]
        return f"({digits} * {_UNITS[unit]})"

    expr = _NUM.sub(number, text.replace("×", "*").replace("−", "-"))

    def ev(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.BinOp):
            return float(_OPS[type(node.op)](ev(node.left), ev(node.right)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = [ev(a) for a in node.args]
            fns: dict[str, Any] = {"floor": math.floor, "ceil": math.ceil, "int": int, "max": max}
            return float(fns[node.func.id](*args))
        raise AssertionError(ast.dump(node))

    return ev(ast.parse(expr, mode="eval")), tol


PLANS = {
    "lora": {"model": {"catalogue": "qwen3-8b"}, "layout": {"tp": 2}, "gpu": GPU,
             "engine": {"max_model_len": 16384, "lora": {"max_loras": 3, "max_lora_rank": 32}}},
    "draft_model": {"model": {"catalogue": "llama-3.1-8b"}, "gpu": GPU, "policy": {"avg_live_tokens": 2000},
                    "engine": {"max_model_len": 16384, "speculative": {"method": "draft_model",
                               "model": {"catalogue": "llama-3.2-1b"}, "num_speculative_tokens": 3}}},
    "mtp": {"model": {"catalogue": "deepseek-v3"}, "layout": {"tp": 8}, "gpu": {"name": "H200"},
            "policy": {"avg_live_tokens": 4000},
            "engine": {"max_model_len": 16384, "speculative": {"method": "mtp", "num_speculative_tokens": 2}}},
    "vision": {"model": {"catalogue": VL}, "gpu": GPU, "engine": {"max_model_len": 32768}},
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PLANS))
def test_issue_15_explain_entries_are_identities(name: str) -> None:
    out = run_plan(PLANS[name], with_levers=False)
    keys = {"lora": "lora_bytes", "draft_model": "draft_kv_bytes_per_token", "mtp": "draft_kv_bytes_per_token",
            "vision": "encoder_cache_bytes"}  # fmt: skip
    assert keys[name] in out["explain"]
    for key, entry in out["explain"].items():
        got, tol = _value(entry["values"])
        want, want_tol = _value(entry["result"].removesuffix("x").strip())
        if entry["result"].endswith("x"):
            assert round(got, 2) == pytest.approx(want), (key, entry)
        else:
            assert math.isclose(got, want, abs_tol=tol + want_tol + 1), (key, entry)
