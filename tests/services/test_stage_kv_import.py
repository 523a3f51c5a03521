"""An imported TP2 × PP2 log whose stages hold 14 and 13 layers binds on its own stage's blocks.

public/48 (DeepSeek-V2-Lite, 27 layers split 14/13 by get_pp_indices, MLA 1,152 B per token and
layer, block 16): ranks 0-1 print 12.13 GiB, ranks 2-3 11.33 GiB; the log says 807,792 tokens and
788.86x at 1,024. By hand stage 0 has ⌊12.13 GiB / (16 × 1,152 × 14)⌋ = 50,473 blocks and stage 1
⌊11.33 GiB / (16 × 1,152 × 13)⌋ = 50,770: stage 0 binds at 807,568 tokens (the log's figure within
its printed GiB precision). The plan said rank 2 at 754,304 (every rank on the 14-layer page).
"""

from __future__ import annotations

from pathlib import Path

from app.core.plan import compute
from app.ingest.catalogue import get_model
from app.services import plan_inputs
from app.services.imports import import_log, plan_from_log_run

LOG = Path(__file__).parents[1] / "data/vllm-logs/public/48-v092dev-deepseek-v2-lite-4xl4-tp2-pp2-mla-eager.log"


def test_public_48_binds_on_stage_0_with_its_own_layers() -> None:
    cfg = get_model("DeepSeek-V2-Lite").config_dict()
    doc = plan_from_log_run(import_log(LOG.read_text(encoding="utf-8"), cfg), 0, cfg, {"tp": 2, "pp": 2})
    result = compute(plan_inputs.plan_input(doc))
    adm = result.admission
    by_hand = [int(12.13 * 2**30) // (16 * 1152 * 14)] * 2 + [int(11.33 * 2**30) // (16 * 1152 * 13)] * 2
    assert by_hand == [50473, 50473, 50770, 50770]
    assert abs(adm.tokens - 807_568) <= 16 and abs(adm.tokens - 807_792) <= 16 * 16  # the log, ±0.005 GiB
    assert adm.binding_rank == "rank=0"
    assert [abs(r.blocks - h) <= 1 for r, h in zip(adm.ranks, by_hand, strict=True)] == [True] * 4
    assert round(adm.max_concurrency_at_max_model_len, 2) == round(adm.blocks / 64, 2)  # 1,024 / 16 blocks
    assert abs(adm.max_concurrency_at_max_model_len - 788.86) < 0.3
