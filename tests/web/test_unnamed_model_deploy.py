"""Issue 17: seed 001's plan is given only as bytes per token (its model name is a display label,
"seed-001 (256 KiB/token per rank)"): its page must not offer `vllm serve 'seed-001 …'` or a
`--model` flag, but a command with a MODEL placeholder and a note saying the model must be given."""

from __future__ import annotations

import html
import re

from .support import TestClient


def test_seed001_page_offers_no_label_as_the_model(client: TestClient) -> None:
    result = client.get("/plan.json?base=seed001").json()
    assert result["model"]["name"] == "seed-001 (256 KiB/token per rank)"  # kept as the plan's label
    assert all(a["flag"] != "--model" for a in result["vllm_args"])
    page = html.unescape(client.get("/plan?base=seed001").text)
    assert "vllm serve 'seed-001" not in page and "--model 'seed-001" not in page
    serve = re.search(r'id="flags-text"[^>]*>(.*?)</', page, re.S)
    assert serve is not None and serve.group(1).startswith("vllm serve MODEL")
    note = re.search(r'id="serve-note">(.*?)</p>', page, re.S)
    assert note is not None and "not a model vLLM can load" in note.group(1) and "placeholder" in note.group(1)
    assert "--kv-cache-memory-bytes" in serve.group(1)  # seed 001's uniform budget stays in the command
