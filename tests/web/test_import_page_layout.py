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


def test_the_residuals_use_the_tp_the_import_gives(client: TestClient) -> None:
    # At TP1 (the TP field ignored) 8.11 GiB made 2,827 blocks of Qwen3-235B's 3,080,192 B, and the page
    # said the log "contradicts itself" against its 11,180; at the given TP4 a block is 770,048 B
    # (94 layers x 1 KV head x 128 x 2 x 2 B x 16 tokens), so 8.11 GiB make 11,308.
    resp = client.post("/import.json", data={"text": LOG, "model": "qwen3-235b-a22b-fp8", "tp": "4"})
    assert resp.status_code == 200, resp.text[:300]
    run = resp.json()["runs"][0]
    engine = run["residuals"]["engine"]
    assert engine["computed_blocks"] == int(8.11 * 2**30) // (94 * 1 * 128 * 2 * 2 * 16)
    assert not any(f["code"] == "blocks_exceed_memory" for f in run["findings"])
