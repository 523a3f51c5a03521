"""The import page with a TP but no PP (or the reverse): it answered 500, "'dict object' has no
attribute 'pp'", since the form echoed `layout.pp` of a layout holding only the given keys. Walked with
the two lines vllm-project/vllm#21348 quotes (Qwen3-235B-A22B-FP8 on 4 x H100)."""

from __future__ import annotations

import re

import pytest

from .support import TestClient

LOG = "Available KV cache memory: 8.11 GiB\nGPU KV cache size: 178,880 tokens\n"


@pytest.mark.parametrize("given", [{"tp": "4"}, {"pp": "2"}, {"tp": "4", "pp": "1"}, {}])
def test_the_import_page_echoes_whichever_of_tp_and_pp_was_given(client: TestClient, given: dict[str, str]) -> None:
    resp = client.post("/import", data={"text": LOG, "model": "qwen3-235b-a22b-fp8", **given})
    assert resp.status_code == 200, resp.text[:300]
    for name in ("tp", "pp"):
        field = re.search(rf'<input[^>]*id="log-{name}"[^>]*value="([^"]*)"', resp.text)
        assert field is not None and field.group(1) == given.get(name, "")
