"""The plan memo (`app.services.memo`): owned by one app, used only inside its requests (or a
block that opens one), bounded, and invisible in every result: a plan computed through a memo,
cold or warm, equals the plan computed afresh."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.errors import InputError
from app.services import plans
from app.services.memo import CURRENT, PlanMemo, memoised, using
from app.web.app import create_app
from tests.web.support import HX, TestClient, make_settings

DOCS: list[dict[str, Any]] = [
    {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "layout": {"tp": 2}},
    {"model": {"catalogue": "llama-3.1-8b"}, "gpu": {"name": "H100 80GB"}, "engine": {"quantization": "fp8"}},
    {"model": {"catalogue": "qwen3-30b-a3b"}, "gpu": {"total": "80GiB"}, "layout": {"tp": 4},
     "engine": {"gpu_memory_utilization": 0.8}},
    {"model": {"catalogue": "llama-3.1-70b"}, "gpu": {"name": "H100 80GB"}, "layout": {"tp": 4},
     "engine": {"speculative": {"method": "draft_model", "num_speculative_tokens": 3,
                                "model": {"catalogue": "llama-3.1-8b"}}}},
    {"model": {"catalogue": "llama-3.1-8b"}, "ranks": [{"total": 85899345920, "free_at_start": 84000000000}]},
]


def _counted(calls: list[int]) -> int:
    calls.append(1)
    return 7


def test_without_a_memo_every_value_is_computed_afresh() -> None:
    calls: list[int] = []
    assert CURRENT.get() is None
    for _ in range(2):
        assert memoised(("k", 1), lambda: _counted(calls)) == 7
    assert len(calls) == 2


def test_a_memo_computes_each_key_once_and_keeps_errors_out() -> None:
    calls: list[int] = []
    memo = PlanMemo()
    with using(memo):
        for _ in range(3):
            assert memoised(("k", 1), lambda: _counted(calls)) == 7
        with pytest.raises(InputError):
            memoised(("bad",), lambda: (_ for _ in ()).throw(InputError("x", "refused")))
    assert len(calls) == 1 and len(memo) == 1
    assert CURRENT.get() is None  # the block restored the caller's (no) memo
    memo.clear()
    assert len(memo) == 0


def test_a_memo_is_bounded() -> None:
    memo = PlanMemo(capacity=3)
    with using(memo):
        for i in range(10):
            memoised(("k", i), lambda i=i: i)  # type: ignore[misc]
    assert len(memo) == 3


@pytest.mark.parametrize("doc", DOCS, ids=range(len(DOCS)))
def test_a_plan_through_a_memo_equals_the_plan_computed_afresh(doc: dict[str, Any]) -> None:
    fresh = plans.run_plan(doc, with_levers=True)
    memo = PlanMemo()
    with using(memo):
        cold = plans.run_plan(doc, with_levers=True)
        warm = plans.run_plan(doc, with_levers=True)
    assert cold == fresh and warm == fresh
    assert len(memo) >= 2  # the catalogue shape and the TP degrees at least


def test_each_app_fills_its_own_memo_from_its_requests() -> None:
    one, two = create_app(make_settings()), create_app(make_settings())
    assert one.state.plan_cache.memo is not two.state.plan_cache.memo
    with TestClient(one) as client:
        response = client.get("/plan?model=llama-3.1-8b&tp=2&util=0.77", headers=HX)
        assert response.status_code == 200
        filled = len(one.state.plan_cache.memo)
        assert filled > 0
        response = client.post("/api/v1/plan", json=DOCS[2])  # a `def` route: on the thread pool
        assert response.status_code == 200, response.text
    assert len(one.state.plan_cache.memo) > filled
    assert len(two.state.plan_cache.memo) == 0
    assert CURRENT.get() is None  # nothing leaked into the test's own context



def test_a_cli_command_runs_inside_one_memo_and_leaves_none_behind(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # `kvledger size` tries many layouts of one model: its sub-results are reused within the command
    from app import cli
    from app.services import sizing

    seen: list[PlanMemo | None] = []
    real = sizing.run_size

    def spy(doc: Any) -> Any:
        seen.append(CURRENT.get())
        return real(doc)

    path = tmp_path / "size.json"
    path.write_text('{"model": {"catalogue": "llama-3.1-8b"}, "target": {"max_model_len": 8192}}')
    monkeypatch.setattr(sizing, "run_size", spy)
    status = cli.main(["size", str(path)])
    through_memo = capsys.readouterr().out
    memo = seen[0]
    assert len(seen) == 1 and isinstance(memo, PlanMemo) and len(memo) > 0
    assert CURRENT.get() is None
    assert cli.main(["size", str(path)]) == status  # the next command: a new, cold memo, the same answer
    assert CURRENT.get() is None and seen[1] is not memo and capsys.readouterr().out == through_memo
