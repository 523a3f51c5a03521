"""`--max-model-len auto` pasted on the home page, in Chromium.

`vllm serve meta-llama/Meta-Llama-3.1-70B -tp 4 --max-model-len auto` on 4 × L40S 48GB opened a plan
that said "vLLM will not start: one 131,072-token request needs 10.00 GiB … the largest max_model_len
that fits is 77,776" and whose flags wrote `--max-model-len 131072`: the reader took `auto` as "not
stated". vLLM ≥ 0.14 fits the length to the KV memory (`_auto_fit_max_model_len`,
vllm/v1/core/kv_cache_utils.py @28be48fa9): the engine starts at 77,776, and so does the plan now.
"""

from __future__ import annotations

from typing import Any

import pytest

from .plan_page import paste_serve

pytestmark = pytest.mark.e2e

COMMAND = "vllm serve meta-llama/Meta-Llama-3.1-70B -tp 4 --max-model-len auto"


def test_max_model_len_auto_is_fitted_to_the_kv_memory(page: Any) -> None:
    plan = paste_serve(page, COMMAND, "L40S 48GB")
    assert plan["will_start"] and plan["fits_max_model_len"]
    assert plan["engine"]["max_model_len"] == plan["largest_max_model_len"] == 77_776
    body = page.inner_text("main")
    assert "--max-model-len auto: vLLM fits max_model_len to the KV memory, reduced from 131,072 to 77,776" in body
    assert "--max-model-len 77776" in page.inner_text("#flags-text")
    assert "vLLM will not start" not in body
