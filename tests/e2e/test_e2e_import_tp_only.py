"""In Chromium: the import form with a TP but no PP shows the preview, not "Something went wrong on our
side" (a 500: the form echoed `layout.pp` of a layout holding only TP). The log is the two lines
vllm-project/vllm#21348 quotes (Qwen3-235B-A22B-FP8 on 4 x H100)."""

from __future__ import annotations

from typing import Any

LOG = "Available KV cache memory: 8.11 GiB\nGPU KV cache size: 178,880 tokens\n"


def test_import_with_tp_only_previews_the_run(page: Any, server_url: str) -> None:
    page.goto(server_url + "/import")
    page.fill("textarea[name=text]", LOG)
    page.select_option("select[name=model]", "qwen3-235b-a22b-fp8")
    page.fill("#log-tp", "4")
    with page.expect_navigation():
        page.click("form button[type=submit]")
    body = page.inner_text("body")
    assert "Something went wrong" not in body
    assert "178,880" in body
    assert page.input_value("#log-tp") == "4" and page.input_value("#log-pp") == ""
