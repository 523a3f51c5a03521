"""The non-torch row at TP > 1 from vLLM 0.11 (PR #25359): what lands after the init snapshot
(app.core.nontorch.after_snapshot_terms), fitted and scored leave-one-out on the v0.19 H100 logs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates_loo import calibration_without, measured, predict
from estimate_cases import CASES

from app.core.calibration import Observation, fit

GIB = 1024**3
AFTER_SNAPSHOT_TP = [c for c in CASES if c.tp > 1 and c.version.startswith("0.19") and not c.fails]


def test_fit_takes_the_excess_over_the_v1_base_of_the_same_observations() -> None:
    obs = [
        Observation("non_torch_base_v1", 100, "a"),
        Observation("non_torch_base_v1", 300, "b"),
        Observation("nccl_lazy_nvlink", 2300, "c", "v1"),  # excess 2100 over the median base 200
        Observation("nccl_lazy_nvlink", 150, "d", "v1"),  # below the base: 0
        Observation("nccl_lazy_nvlink", 1200, "e", "v1"),  # 1000
    ]
    assert fit(obs).nccl_lazy_nvlink == 1000
    assert fit(obs[:2]).nccl_lazy_nvlink == fit([]).nccl_lazy_nvlink  # none left: the recorded fit


def test_v019_multi_rank_rows_leave_one_out() -> None:
    """Each v0.19 TP2/TP4 log's non-torch row (2.07–2.21 GiB), predicted without that log."""
    assert len(AFTER_SNAPSHOT_TP) >= 4
    for case in AFTER_SNAPSHOT_TP:
        logged = measured(case).non_torch
        assert logged is not None and logged > 1.5 * GIB, case.log  # the excess TP1 runs do not show
        _, _, rows = predict(case, calibration_without(case.log), "measured")
        assert abs(rows["non_torch"] / logged - 1) < 0.10, (case.log, rows["non_torch"] / GIB, logged / GIB)


def test_single_rank_rows_take_no_communicator_term() -> None:
    tp1 = [c for c in CASES if c.tp == 1 and c.version.startswith("0.19")]
    for case in tp1:
        _, _, rows = predict(case, calibration_without(case.log), "measured")
        assert rows["non_torch"] < 0.5 * GIB, case.log
