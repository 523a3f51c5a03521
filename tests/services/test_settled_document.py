"""A what-if on a prepared base reads the engine settings made with its validated document (no
re-validation, no scan of its ranks for the GPU total per tick): the defaults equal those worked
out from the whole document afresh, whatever the what-if."""

from __future__ import annotations

from typing import Any

import pytest

from app.services.plan_inputs import Prepared, SettledDocument, engine_defaults
from app.services.prepared import PureCache

GIB = 2**30


def _doc(whatif: dict[str, Any] | None, gpu: bool) -> dict[str, Any]:
    ranks = [{"label": f"r{i}", "total": (80 + i % 3) * GIB, "free_at_start": 79 * GIB, "weights": 35 * GIB,
              "non_torch": GIB, "activation": 3 * GIB} for i in range(16)]  # fmt: skip
    doc: dict[str, Any] = {"model": {"catalogue": "llama-3.1-70b"}, "layout": {"tp": 8, "dp": 2}, "ranks": ranks,
                           "engine": {"max_model_len": 8192}}  # fmt: skip
    if gpu:
        doc["gpu"] = {"name": "H100 80GB"}
        doc.pop("ranks")
    if whatif is not None:
        doc["whatif"] = whatif
    return doc


@pytest.mark.parametrize("gpu", [False, True])
def test_prepared_defaults_equal_the_fresh_ones(gpu: bool) -> None:
    cache: PureCache[Any] = PureCache()
    prepared = Prepared(cache, ("base", gpu))
    for whatif in (None, {"gpu_memory_utilization": 0.8}, {"max_num_batched_tokens": 4096}, {}):
        doc = _doc(whatif, gpu)
        assert engine_defaults(doc, prepared) == engine_defaults(doc)
    settled = cache.get_or_make(("doc", ("base", gpu)), lambda: pytest.fail("made again"), lambda _: 1)
    assert isinstance(settled, SettledDocument) and len(cache) == 1
