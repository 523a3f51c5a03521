"""Every explain entry is an identity that holds for the numbers it prints (issue 17 item 3).

The entry's ``values`` is evaluated as arithmetic (``×``, ``−``, ``//``, ``/``, ``floor``, ``ceil``,
``int``, ``max``; byte figures in their printed unit) and compared with its ``result``: counts
exactly, byte figures within the rounding of the printed operands. Plans are drawn over catalogue
models of every cache kind (full attention, GQA, MLA, sliding window, hybrid Mamba / gated-DeltaNet),
TP degrees, utilizations, reserves and both sides of vLLM 0.21.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from app.core.errors import InputError
from app.core.estimates import estimate_ranks
from app.core.ledger import Cell, RankInput
from app.core.model_config import shape_from_config
from app.core.plan import Engine, Layout, ModelInput, PlanInput, Policy, compute, estimate_context
from app.core.report import result_to_dict
from app.ingest.catalogue import get_model

GIB = 2**30
_UNITS = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "B": 1}
_NUM_UNIT = re.compile(r"(-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?)(?:\s(GiB|MiB|KiB|B)\b)?")
_OPS: dict[type, Any] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv,
}  # fmt: skip
_FUNCS: dict[str, Any] = {"floor": math.floor, "ceil": math.ceil, "int": int, "max": max}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return float(_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        return float(_FUNCS[node.func.id](*(_evaluate(a) for a in node.args)))
    raise AssertionError(f"not arithmetic: {ast.dump(node)}")


def _to_python(values: str) -> tuple[str, float]:
    """The expression in Python syntax (bytes for sized operands) and its rounding tolerance."""
    tol = 0.0

    def number(m: re.Match[str]) -> str:
        nonlocal tol
        text, unit = m[1].replace(",", ""), m[2]
        if unit is None:
            return text
        decimals = len(text.split(".")[1]) if "." in text else 0
        tol += 0.5 * 10**-decimals * _UNITS[unit]
        return f"({text} * {_UNITS[unit]})"

    expr = _NUM_UNIT.sub(number, values.replace("×", "*").replace("−", "-"))
    return expr, tol


def _check(key: str, entry: dict[str, str]) -> None:
    expr, tol = _to_python(entry["values"])
    got = _evaluate(ast.parse(expr, mode="eval"))
    result = entry["result"].removesuffix("x").strip()
    want_expr, want_tol = _to_python(result)
    want = _evaluate(ast.parse(want_expr, mode="eval"))
    if entry["result"].endswith("x"):
        assert round(got, 2) == pytest.approx(want), (key, entry)
    elif tol or want_tol:
        assert abs(got - want) <= tol + want_tol + 1, (key, entry)
    else:
        assert got == want, (key, entry)


MODELS = ("llama-3.1-8b", "qwen3-next-80b-a3b", "deepseek-v2-lite", "gemma-3-12b-it", "gpt-oss-20b",
          "jamba-1.5-mini", "qwen3-30b-a3b", "falcon-mamba-7b", "nemotron-h-56b-base-8k")  # fmt: skip


def _plan(slug: str, tp: int, util: float, growth: float, live: int | None, version: str, mml: int) -> PlanInput:
    shape = shape_from_config(get_model(slug).config_dict())
    engine = Engine(util, "auto", 16, mml, 2048, 256)
    layout = Layout(tp=tp)
    ctx = estimate_context(layout, engine, version, gpu_name=None)
    ranks = estimate_ranks(shape, ctx, 80 * GIB, None)
    return PlanInput(ModelInput(shape=shape, name=slug), layout, engine, Policy(growth, 0, live), ranks, version)


@settings(max_examples=120, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.sampled_from([1, 2, 4, 8]),
    st.floats(0.5, 0.98).map(lambda u: round(u, 2)),
    st.sampled_from([0.0, 0.05, 0.08, 0.1, 0.333]),
    st.one_of(st.none(), st.integers(1, 50_000)),
    st.sampled_from(["0.10.2", "0.27.1"]),
    st.sampled_from([1000, 4096, 8192, 32_768]),
    st.integers(0, 60 * GIB),
)
def test_every_explain_entry_evaluates_to_its_result(
    slug: str, tp: int, util: float, growth: float, live: int | None, version: str, mml: int, weights: int
) -> None:
    try:
        plan = _plan(slug, tp, util, growth, live, version, mml)
    except InputError:  # a layout the model cannot take (TP above its heads) is refused upstream
        assume(False)
        return
    ranks = tuple(replace(r, weights=Cell(weights, "measured")) for r in plan.ranks)
    out = result_to_dict(compute(replace(plan, ranks=ranks)))
    assert {"blocks", "tokens", "schedulable_tokens", "vllm_kv_cache_size_tokens"} <= set(out["explain"])
    for key, entry in out["explain"].items():
        _check(key, entry)


def test_qwen3_next_tp2_explains_vllms_split_and_matches_its_log() -> None:
    """tests/data/vllm-logs/15: 44.59 GiB per rank, block 544 → 973,760 tokens, 14.77x at 262,144."""
    shape = shape_from_config(get_model("qwen3-next-80b-a3b").config_dict())
    kv = round(44.59 * GIB)
    rank = RankInput("TP0", kv_room=Cell(kv, "measured"))
    plan = PlanInput(ModelInput(shape=shape), Layout(tp=2), Engine(0.9, "auto", 16, 262_144, 2048, 256),
                     Policy(), (rank, replace(rank, label="TP1")), "0.10.2")  # fmt: skip
    out = result_to_dict(compute(plan))
    tokens = out["explain"]["tokens"]
    assert tokens["values"] == "7,162 // 4 × 544" and tokens["result"] == "973,760"
    assert "splits the block pool among its 4 KV-cache groups" in tokens["formula"]
    assert out["tokens"] == 973_760 and round(out["max_concurrency_at_max_model_len"], 2) == 14.77
    # raw tokens count the Mamba groups' share too: within one block of the token figure
    assert out["tokens"] <= out["raw_tokens"] < out["tokens"] + 544
    assert "--block-size 16" not in out["flags"] and not any(f.startswith("--block-size") for f in out["flags"])
    assert any("544" in n and "no --block-size" in n for n in out["notes"])
    for key, entry in out["explain"].items():
        _check(key, entry)


def test_raw_tokens_of_a_uniform_model_are_bytes_over_bytes_per_token() -> None:
    shape = shape_from_config(get_model("llama-3.1-8b").config_dict())
    plan = PlanInput(ModelInput(shape=shape), Layout(), Engine(0.9, "auto", 16, 8192, 2048, 256), Policy(),
                     (RankInput("0", kv_room=Cell(10 * GIB + 12345, "measured")),), "0.10.2")  # fmt: skip
    out = result_to_dict(compute(plan))
    assert out["raw_tokens"] == (10 * GIB + 12345) // out["kv_bytes_per_token"]
    assert "--block-size 16" in out["flags"]


@pytest.mark.parametrize(("slug", "tp", "blocks"), [("llama-3.1-8b", 1, 9_916), ("qwen3-30b-a3b", 4, 12_424)])
def test_a_room_from_logged_blocks_explains_its_identity(slug: str, tp: int, blocks: int) -> None:
    """public 03 / 46: the room is blocks × page_bytes × layers (app.services.blocks_room), and every
    explain entry of that plan, the room's own included, evaluates to its result."""
    from app.core.ledger import ROOM_FROM_BLOCKS

    shape = shape_from_config(get_model(slug).config_dict())
    probe = compute(PlanInput(ModelInput(shape=shape), Layout(tp=tp), Engine(0.9, "auto", 16, 8192, 2048, 256),
                              Policy(), (RankInput("0", kv_room=Cell(GIB, "measured")),), "0.8.4"))  # fmt: skip
    room = Cell(blocks * probe.rkv.page_bytes, "measured", f"{ROOM_FROM_BLOCKS}: {blocks:,} logged blocks")
    ranks = tuple(RankInput(str(i), kv_room=room) for i in range(tp))
    out = result_to_dict(compute(PlanInput(ModelInput(shape=shape), Layout(tp=tp),
                                           Engine(0.9, "auto", 16, 8192, 2048, 256), Policy(), ranks, "0.8.4")))
    entry = out["explain"]["kv_bytes"]
    assert entry["values"].startswith(f"{blocks:,} × ") and "within one block" in entry["formula"]
    assert out["tokens"] == blocks * 16
    for key, value in out["explain"].items():
        _check(key, value)
    plain = Cell(room.bytes, "measured", "measured KV room")  # a room the log states: no such line
    again = compute(PlanInput(ModelInput(shape=shape), Layout(tp=tp), Engine(0.9, "auto", 16, 8192, 2048, 256),
                              Policy(), tuple(RankInput(str(i), kv_room=plain) for i in range(tp)), "0.8.4"))
    assert "kv_bytes" not in result_to_dict(again)["explain"]
