"""The non-torch row at TP > 1 from vLLM 0.11 (PR #25359): what lands after the init snapshot
(app.core.nontorch.after_snapshot_terms), fitted and scored leave-one-out on the v0.19 H100 logs."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from bench_estimates_loo import calibration_without, measured, predict
from estimate_cases import CASES

from app.core.calibration import Observation, fit
from app.core.estimates import fusion_workspace_bytes
from app.core.model_config import shape_from_config
from app.core.plan import Engine, Layout, estimate_context
from app.ingest.catalogue import get_model

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


MIB = 1024**2


def test_fusion_workspace_by_hand() -> None:
    """FlashInfer's trtllm fusion workspace per rank: tp × T × hidden × 2 + flags + 3 × that Lamport buffer, each
    rounded up to 2 MiB, with T = min(max size // (hidden × 2), max_num_batched_tokens) (allreduce_rms_fusion.py
    `AllReduceFusionPass.__init__`, FI_ALLREDUCE_FUSION_MAX_SIZE_MB on 9.0: 64 MB at TP2, 2 MB at TP4)."""
    from app.core.nontorch import allreduce_fusion_workspace_bytes as ws

    v019, h100 = (0, 19, 0), (9, 0)
    # Llama-70B (hidden 8192) TP2, 8192 batched tokens: T = 4096; 128 MiB + 2 MiB of flags + 384 MiB
    assert ws(v019, h100, 2, 1, 1, 8192, 2, 8192) == (128 + 2 + 384) * MIB
    # TP4: T = 2 MiB // 16 KiB = 128; 8 + 2 + 24 MiB
    assert ws(v019, h100, 4, 1, 1, 8192, 2, 8192) == (8 + 2 + 24) * MIB
    # gpt-oss (hidden 2880) TP2: T capped by the 8192 batched tokens; 2 × 8192 × 2880 × 2 B is 90 MiB exactly
    assert ws(v019, h100, 2, 1, 1, 2880, 2, 8192) == (90 + 2 + 270) * MIB
    # fewer batched tokens shrink it
    assert ws(v019, h100, 2, 1, 1, 8192, 2, 2048) == (64 + 2 + 192) * MIB
    # off: an A100 (capability 8.0, the fusion pass needs 9.0 or 10.x), TP1, TP3 (FlashInfer takes 2, 4, 8),
    # PP > 1 and DP > 1 (enable_allreduce_rms_fusion), and before the default (PR #34299, taken as v0.17)
    assert ws(v019, (8, 0), 2, 1, 1, 8192, 2, 8192) == 0
    assert ws(v019, h100, 1, 1, 1, 8192, 2, 8192) == 0
    assert ws(v019, h100, 3, 1, 1, 8192, 2, 8192) == 0
    assert ws(v019, h100, 2, 2, 1, 8192, 2, 8192) == 0
    assert ws(v019, h100, 2, 1, 2, 8192, 2, 8192) == 0
    assert ws((0, 16, 0), h100, 2, 1, 1, 8192, 2, 8192) == 0
    assert ws(v019, None, 2, 1, 1, 8192, 2, 8192) == ws(v019, h100, 2, 1, 1, 8192, 2, 8192)  # unknown: Hopper


def test_nvls_only_above_two_ranks_on_hopper_nvlink() -> None:
    from app.core.nontorch import nvls_possible

    assert nvls_possible(4, (9, 0), "nvlink") and nvls_possible(8, None, "unknown")
    assert not nvls_possible(2, (9, 0), "nvlink")  # ncclNvlsInit: off for two or fewer GPUs
    assert not nvls_possible(4, (8, 0), "nvlink")  # NVLink SHARP needs Hopper's NVSwitch
    assert not nvls_possible(4, (9, 0), "pcie")


def test_public_65_non_torch_row_takes_no_fusion_and_no_nvls() -> None:
    """public/65 (A100, TP2, v0.19.0): the fusion pass is off on capability 8.0 and NVLS off at two ranks, so the
    row is the V1 base plus the TP2 NCCL share fitted on H100 runs, said to be an upper bound there; before stop
    29 it took the H100 TP2 excess whole (2.10 GiB), fusion workspace included."""
    from bench_unseen import UNSEEN

    case = next(c for _, c, _ in UNSEEN if c.log.startswith("public/65-"))
    _, _, rows = predict(case, calibration_without(case.log), "measured")
    cal = calibration_without(case.log)
    assert rows["non_torch"] == cal.non_torch_v1 + cal.nccl_lazy_nvlink
    assert rows["non_torch"] < 1.8 * GIB


def test_after_snapshot_terms_add_the_fusion_and_pick_the_nccl_share() -> None:
    from app.core.calibration import DEFAULT
    from app.core.nontorch import non_torch_terms

    v019 = (0, 19, 0)
    tp2 = non_torch_terms(v019, True, 2, "unknown", DEFAULT, fusion=514 * MIB)
    assert tp2.communicators == 514 * MIB + DEFAULT.nccl_lazy_nvlink
    assert "fusion workspace 0.50 GiB (derived)" in tp2.note and "upper bound" in tp2.note
    tp4 = non_torch_terms(v019, True, 4, "nvlink", DEFAULT, fusion=34 * MIB, nvls=True)
    assert tp4.communicators == 34 * MIB + DEFAULT.nccl_nvls and "NVLink SHARP" in tp4.note
    a100 = non_torch_terms(v019, True, 2, "unknown", DEFAULT)
    assert a100.communicators == DEFAULT.nccl_lazy_nvlink and "no all-reduce fusion workspace" in a100.note


def test_a_data_parallel_plan_takes_no_fusion_workspace() -> None:
    """`enable_allreduce_rms_fusion` is off at DP > 1 (vLLM issue #34458): the plan's layout.dp reaches the row."""
    engine = Engine(0.9, "auto", 16, 8192, 8192, 1024)
    one = estimate_context(Layout(tp=2), engine, "0.19.0", gpu_name="H100 80GB")
    two = estimate_context(Layout(tp=2, dp=2), engine, "0.19.0", gpu_name="H100 80GB")
    shape = shape_from_config(get_model("llama-3.1-70b").config)
    assert fusion_workspace_bytes(shape, one) == 514 * MIB
    assert fusion_workspace_bytes(shape, two) == 0
