"""Issue 17 item 3 in a browser: a hybrid (Qwen3-Next, 3 gated-DeltaNet groups + 1 attention group)
TP2 run imported from its real log explains its tokens as vLLM computes them — the pool split among
the KV-cache groups before the block size — and every explain line on the page is an identity.

Log: tests/data/vllm-logs/15-v0102-qwen3-next-80b-h200-tp2-hybrid.log (vLLM 0.10.2, H200, TP2):
7,162 blocks, "GPU KV cache size: 973,760 tokens", attention block raised to 544 by vLLM.
"""

from __future__ import annotations

import ast
import operator
import re
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.e2e

LOG = Path(__file__).resolve().parents[1] / "data" / "vllm-logs" / "15-v0102-qwen3-next-80b-h200-tp2-hybrid.log"
OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
       ast.Div: operator.truediv}  # fmt: skip


def _value(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        return float(OPS[type(node.op)](_value(node.left), _value(node.right)))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min"):
        values = [_value(a) for a in node.args]
        return float(max(values) if node.func.id == "max" else min(values))
    raise ValueError(ast.dump(node))


def _evaluate(values: str) -> float | None:
    """The printed `values` line as arithmetic (× and thousands separators), None if it is not one."""
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", values.lstrip("= ").replace("×", "*").replace("−", "-"))
    text = re.sub(r"(?<=\d)(?: B|x)$", "", text)  # a result in bytes, or a ratio
    try:
        return _value(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError):
        return None


def test_imported_hybrid_run_explains_its_tokens_by_vllms_rule(page: Any) -> None:
    page.goto("/import")
    page.fill("#log-text", LOG.read_text(encoding="utf-8"))
    page.select_option("#log-model", "qwen3-next-80b-a3b")
    page.click("form[action='/import'] button[type=submit]")
    page.wait_for_selector(".import-run a.button")
    page.click("text=Make a plan from this run")
    page.wait_for_url("**/plan?base=*")
    page.wait_for_selector("#admission details[data-item=tokens]")

    tokens = page.locator("#admission details[data-item=tokens]")
    tokens.locator("summary").click()
    codes = tokens.locator(".explain-body code").all_inner_texts()
    assert "kv_cache_groups" in codes[0] and "4 KV-cache groups" in codes[0]
    assert codes[1] == "= 7,162 // 4 × 544" and codes[2] == "= 973,760"  # what vLLM logged
    assert page.inner_text("#adm-tokens").replace(",", "").startswith("973760")

    # Every explain line the page prints holds for the numbers it prints.
    checked = 0
    for item in page.locator("#admission details").all():
        item.locator("summary").click()
        code = item.locator(".explain-body code").all_inner_texts()
        if len(code) < 3:
            continue
        left, right = _evaluate(code[1]), _evaluate(code[2])
        if left is None or right is None:  # a size in GiB, a yes/no: not plain arithmetic
            continue
        assert abs(left - right) <= max(1.0, abs(right) * 5e-3), code
        checked += 1
    assert checked >= 5

    flags = page.inner_text("#flags-text")
    assert "--block-size 16" not in flags  # vLLM raises the attention block to 544 itself
    assert "--tensor-parallel-size 2" in flags
